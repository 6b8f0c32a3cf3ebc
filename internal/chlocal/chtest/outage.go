package chtest

import (
	"net"
	"sync"
	"testing"
)

// Outage is a loopback proxy in front of a ClickHouse that a test can take
// down and bring back, so a store (or serve) sees an outage without the
// server itself — shared by every test — being stopped. It forwards like
// the proxy in front of cluster nodes: a client's reset never reaches the
// server (see proxy.go: the libchdb server dies of one).
type Outage struct {
	p      *gentleProxy
	target string

	mu   sync.Mutex
	held []net.Conn // accepted while hung, never answered
}

// NewOutage starts a proxy to the server's native port, up.
func (s *Server) NewOutage(t testing.TB) *Outage {
	t.Helper()
	p, err := newGentleProxy("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &Outage{p: p, target: s.base.Host}
	o.Up()
	t.Cleanup(func() {
		o.release()
		p.close()
	})
	return o
}

// Addr is the proxy's host:port.
func (o *Outage) Addr() string { return o.p.ln.Addr().String() }

// DSN is the server's DSN through the proxy, with database db.
func (o *Outage) DSN(s *Server, db string) string {
	u := *s.base
	u.Host = o.Addr()
	u.Path = "/" + db
	return u.String()
}

// Up forwards new connections to the server.
func (o *Outage) Up() {
	o.release()
	o.p.setHold(nil)
	o.p.setTarget(o.target)
}

// Down ends the connections open through the proxy and hangs up on new
// ones at once: a server that is not running (the client reads EOF).
func (o *Outage) Down() {
	o.p.setHold(nil)
	o.p.setTarget("")
	o.p.cut()
}

// Hang ends the connections open through the proxy and accepts new ones
// without ever answering: a server that is stopped (SIGSTOP) or lost
// behind a network that drops packets.
func (o *Outage) Hang() {
	o.p.setTarget("")
	o.p.setHold(func(c net.Conn) {
		o.mu.Lock()
		o.held = append(o.held, c)
		o.mu.Unlock()
	})
	o.p.cut()
}

func (o *Outage) release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range o.held {
		_ = c.Close()
	}
	o.held = nil
}
