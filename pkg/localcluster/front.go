package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Front stands in, on loopback, for the Service in front of
// muster-controller's replicas: connections go round-robin to the replicas
// whose readiness endpoint answers 200, probed every ProbePeriod, as a
// Service's endpoints follow its pods' readiness. A connection to a replica
// that has just died fails, as it would through a Service until the
// endpoint is dropped; the API server retries a webhook call refused so.
// The connections to a replica that stops answering its probe are closed
// then: a client that keeps its connection open, as the API server does
// with a webhook's, would otherwise go on waiting on a hung replica while a
// ready one stands by.
type Front struct {
	Listen      string
	Backends    []Backend
	ProbePeriod time.Duration
}

// Backend is one replica: where it serves, and its readiness endpoint.
type Backend struct {
	Addr  string
	Ready string
}

// Serve forwards connections accepted on f.Listen until ctx ends.
func (f *Front) Serve(ctx context.Context) error {
	l, err := net.Listen("tcp", f.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", f.Listen, err)
	}
	return f.ServeListener(ctx, l)
}

// ServeListener forwards connections accepted on l until ctx ends, and
// closes l.
func (f *Front) ServeListener(ctx context.Context, l net.Listener) error {
	if len(f.Backends) == 0 {
		l.Close()
		return errors.New("the front needs at least one backend")
	}
	ready := make([]atomic.Bool, len(f.Backends))
	open := make([]connections, len(f.Backends))
	var wg sync.WaitGroup
	wg.Go(func() { f.probe(ctx, ready, open) })
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	var next atomic.Uint64
	for {
		conn, err := l.Accept()
		if err != nil {
			wg.Wait()
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accepting on %s: %w", l.Addr(), err)
		}
		backend, ok := pick(ready, next.Add(1))
		if !ok {
			conn.Close()
			continue
		}
		go func() {
			open[backend].add(conn)
			defer open[backend].remove(conn)
			forward(conn, f.Backends[backend].Addr)
		}()
	}
}

// connections are the client connections forwarded to one backend.
type connections struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (c *connections) add(conn net.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conns == nil {
		c.conns = map[net.Conn]struct{}{}
	}
	c.conns[conn] = struct{}{}
}

func (c *connections) remove(conn net.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.conns, conn)
}

// closeAll closes every connection, which ends its forwarding.
func (c *connections) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for conn := range c.conns {
		conn.Close()
	}
}

// pick returns the n-th ready backend, round-robin.
func pick(ready []atomic.Bool, n uint64) (int, bool) {
	for i := range ready {
		j := int((n + uint64(i)) % uint64(len(ready)))
		if ready[j].Load() {
			return j, true
		}
	}
	return 0, false
}

func (f *Front) probe(ctx context.Context, ready []atomic.Bool, open []connections) {
	ticker := time.NewTicker(f.ProbePeriod)
	defer ticker.Stop()
	for {
		// At once, so that one hung replica does not delay the others.
		var probes sync.WaitGroup
		for i, b := range f.Backends {
			probes.Go(func() {
				probeCtx, cancel := context.WithTimeout(ctx, f.ProbePeriod)
				defer cancel()
				now := healthy(probeCtx, b.Ready)
				if was := ready[i].Swap(now); was && !now {
					open[i].closeAll()
				}
			})
		}
		probes.Wait()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// forward copies both ways between the client and the backend; a backend
// that refuses closes the client's connection.
func forward(client net.Conn, addr string) {
	defer client.Close()
	backend, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return
	}
	defer backend.Close()
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(backend, client)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(client, backend)
		done <- struct{}{}
	}()
	<-done
}
