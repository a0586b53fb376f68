package localcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// namedBackend answers every connection with its name, and is ready while
// ready holds.
func namedBackend(t *testing.T, name string, ready *atomic.Bool) Backend {
	return backend(t, ready, func(conn net.Conn) {
		fmt.Fprintln(conn, name)
		conn.Close()
	})
}

// backend serves each connection with serve, and is ready while ready
// holds.
func backend(t *testing.T, ready *atomic.Bool, serve func(net.Conn)) Backend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go serve(conn)
		}
	}()
	probe := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(probe.Close)
	return Backend{Addr: l.Addr().String(), Ready: probe.URL}
}

// serveFront runs the front, on a port of its own, until the test ends,
// and returns its address.
func serveFront(t *testing.T, front *Front) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- front.ServeListener(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	return l.Addr().String()
}

func TestTheFrontSendsConnectionsOnlyToReadyBackends(t *testing.T) {
	var aReady, bReady atomic.Bool
	aReady.Store(true)
	front := &Front{
		Backends:    []Backend{namedBackend(t, "a", &aReady), namedBackend(t, "b", &bReady)},
		ProbePeriod: 20 * time.Millisecond,
	}
	addr := serveFront(t, front)

	// answers connects n times and collects the backends that answered.
	answers := func(n int) map[string]int {
		got := map[string]int{}
		for range n {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				continue
			}
			line, _ := bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			if line != "" {
				got[line[:len(line)-1]]++
			}
		}
		return got
	}
	waitFor := func(what string, cond func(map[string]int) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := answers(20)
			if cond(got) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the backends answered %v", what, got)
			}
		}
	}

	waitFor("only a is ready", func(got map[string]int) bool { return got["a"] == 20 })
	bReady.Store(true)
	waitFor("both are ready: round-robin", func(got map[string]int) bool { return got["a"] == 10 && got["b"] == 10 })
	aReady.Store(false)
	waitFor("a is no longer ready", func(got map[string]int) bool { return got["b"] == 20 })
}

// TestTheFrontClosesTheConnectionsOfABackendThatStopsAnswering: a client
// that keeps its connection open, as the API server keeps a webhook's, is
// not left waiting on a replica that no longer answers its probe: the
// front closes the connection, and the client's next one reaches the
// ready replica.
func TestTheFrontClosesTheConnectionsOfABackendThatStopsAnswering(t *testing.T) {
	var aReady, bReady atomic.Bool
	aReady.Store(true)
	// a answers with its name and keeps the connection open.
	a := backend(t, &aReady, func(conn net.Conn) {
		fmt.Fprintln(conn, "a")
		_, _ = bufio.NewReader(conn).ReadString('\n')
	})
	addr := serveFront(t, &Front{Backends: []Backend{a, namedBackend(t, "b", &bReady)}, ProbePeriod: 20 * time.Millisecond})

	var conn net.Conn
	deadline := time.Now().Add(10 * time.Second)
	for conn == nil {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			if line, _ := bufio.NewReader(c).ReadString('\n'); line == "a\n" {
				conn = c
				break
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection reached a")
		}
	}
	defer conn.Close()
	bReady.Store(true)
	aReady.Store(false)
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection to the backend that stopped answering is still open (read: %v)", err)
	}
}
