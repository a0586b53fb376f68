package localcluster

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// namedBackend answers every connection with its name, and is ready while
// ready holds.
func namedBackend(t *testing.T, name string, ready *atomic.Bool) Backend {
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
			fmt.Fprintln(conn, name)
			conn.Close()
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

func TestTheFrontSendsConnectionsOnlyToReadyBackends(t *testing.T) {
	var aReady, bReady atomic.Bool
	aReady.Store(true)
	free, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	front := &Front{
		Listen:      fmt.Sprintf("127.0.0.1:%d", free[0]),
		Backends:    []Backend{namedBackend(t, "a", &aReady), namedBackend(t, "b", &bReady)},
		ProbePeriod: 20 * time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- front.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})

	// answers connects n times and collects the backends that answered.
	answers := func(n int) map[string]int {
		got := map[string]int{}
		for range n {
			conn, err := net.Dial("tcp", front.Listen)
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
