package chtest

import (
	"io"
	"net"
	"sync"
	"time"
)

// gentleProxy forwards loopback TCP connections to a ClickHouse node and
// never lets a reset reach it. The libchdb server runs clickhouse-local's
// error handler, which terminates the process on an exception that escapes
// a connection handler, and "Connection reset by peer" does: a pooled
// node-to-node connection closed with unread bytes (which ClickHouse's
// own Distributed connections do) aborted a node every minute or so of the
// conformance suite (signal 6, "Terminate called for uncaught exception:
// Code: 210. DB::NetException: Connection reset by peer"). A real
// clickhouse-server logs that error and goes on. The proxy turns a peer's
// reset into an orderly close: it half-closes towards the node, drains
// what the node still sends, and closes once the node has.
type gentleProxy struct {
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	target string // guarded by mu; "" until the node has started
	// hold, when set and target is "", takes new connections instead of
	// closing them (Outage.Hang).
	hold   func(net.Conn)
	conns  map[net.Conn]struct{}
	closed bool
}

// newGentleProxy listens on listen; setTarget names the node once it runs.
func newGentleProxy(listen string) (*gentleProxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &gentleProxy{ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *gentleProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.forward(c)
		}()
	}
}

func (p *gentleProxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		if p.closed {
			return false
		}
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

// setTarget points new connections at addr (the node's TCP listener,
// which changes each time the node starts).
func (p *gentleProxy) setTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

// setHold sets (or, with nil, clears) what takes new connections while
// there is no target.
func (p *gentleProxy) setHold(h func(net.Conn)) {
	p.mu.Lock()
	p.hold = h
	p.mu.Unlock()
}

// cut ends the connections in flight (gently towards the node: each
// forward drains it before closing).
func (p *gentleProxy) cut() {
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
}

func (p *gentleProxy) forward(c net.Conn) {
	p.mu.Lock()
	target, hold := p.target, p.hold
	p.mu.Unlock()
	if target == "" && hold != nil {
		hold(c) // accepted, never answered
		return
	}
	defer c.Close()
	if target == "" {
		return // the node has not started yet
	}
	up, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		return // the node is down: the client sees the connection end
	}
	defer up.Close()
	if !p.track(c, true) {
		return
	}
	defer p.track(c, false)
	toNode := make(chan struct{})
	go func() {
		defer close(toNode)
		_, _ = io.Copy(up, c)
		// The client is done (EOF) or gone (reset): the node gets an
		// orderly end of stream either way.
		_ = up.(*net.TCPConn).CloseWrite()
	}()
	if _, err := io.Copy(c, up); err != nil {
		// The client cannot take more; read the node dry so that closing
		// leaves no unread bytes (which would make the close a reset).
		_, _ = io.Copy(io.Discard, up)
	}
	_ = c.Close()
	<-toNode
}

// close stops accepting and ends the connections in flight.
func (p *gentleProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
