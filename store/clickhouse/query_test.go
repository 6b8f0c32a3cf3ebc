package clickhouse_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// TestReadsSurviveAConnectionTheServerDropped is the replica that dies
// between two reads: the store's pooled connection passed the driver's
// health check, and the next query on it is answered with a reset. The
// read must still succeed (on a new connection), as the cluster test's
// reads during a replica's outage expect. The proxy resets each
// connection that was open when it was armed as soon as the client sends
// on it, so without the retry every read after arming fails.
func TestReadsSurviveAConnectionTheServerDropped(t *testing.T) {
	testtier.Slow(t)
	srv := chtest.Start(t)
	db := srv.NewDatabase(t)
	u, err := url.Parse(srv.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	p := startResetProxy(t, u.Host)
	u.Host = p.addr()
	s := open(t, u.String())
	t.Cleanup(func() { s.Shutdown(store.WithDefaultProject(context.Background())) })
	ctx := store.WithDefaultProject(context.Background())
	spans := storetest.GenerateTraces(3, 4, 11)
	if err := s.WriteSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	reads := map[string]func() error{
		"GetTrace": func() error { _, err := s.GetTrace(ctx, spans[0].TraceID); return err },
		"ListTraces": func() error {
			page, err := s.ListTraces(ctx, store.TraceQuery{Limit: 10})
			if err == nil && len(page.Traces) != 3 {
				t.Errorf("ListTraces after a reset: %d traces, want 3", len(page.Traces))
			}
			return err
		},
	}
	for _, name := range []string{"GetTrace", "ListTraces"} {
		if err := reads[name](); err != nil {
			t.Fatalf("%s before any reset: %v", name, err)
		}
		p.arm()
		if err := reads[name](); err != nil {
			t.Errorf("%s on a pooled connection the server reset: %v", name, err)
		}
	}
	if n := p.resets.Load(); n < 2 {
		t.Fatalf("the proxy reset %d connections, want at least one per read: the test did not exercise a dropped connection", n)
	}
}

// resetProxy forwards TCP to a server; arm marks every connection open at
// that moment to be reset (RST, no reply) when the client next sends.
type resetProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	doomed map[net.Conn]bool
	resets atomic.Int64
}

func startResetProxy(t *testing.T, target string) *resetProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &resetProxy{ln: ln, doomed: map[net.Conn]bool{}}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { p.forward(c, target) })
		}
	})
	return p
}

func (p *resetProxy) addr() string { return p.ln.Addr().String() }

func (p *resetProxy) arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.doomed {
		p.doomed[c] = true
	}
}

func (p *resetProxy) forward(c net.Conn, target string) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	p.mu.Lock()
	p.doomed[c] = false
	p.mu.Unlock()
	defer func() { p.mu.Lock(); delete(p.doomed, c); p.mu.Unlock() }()
	go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.mu.Lock()
			doomed := p.doomed[c]
			p.mu.Unlock()
			if doomed {
				_ = c.(*net.TCPConn).SetLinger(0) // close with RST
				p.resets.Add(1)
				return
			}
			if _, err := up.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
