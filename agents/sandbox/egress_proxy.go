package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
)

// EgressEvent is one connection attempt (or DNS question, or refused
// packet) and its verdict. It never holds a credential's value.
type EgressEvent struct {
	// Proto is tcp, udp, icmp, dns (a question to the proxy's resolver) or
	// http (one request the proxy forwarded with a credential).
	Proto string `json:"proto"`
	// Host is the name the sandbox asked for (SNI, Host header, DNS
	// question), when there is one.
	Host string `json:"host,omitempty"`
	// Addr is the destination as the sandbox addressed it (ip:port).
	Addr string `json:"addr,omitempty"`
	// Via says how the destination was read: tls-sni, http-host, address,
	// dns, packet.
	Via string `json:"via"`
	// Verdict is allow or deny; Reason says why, Rule which rule decided.
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	Rule    string `json:"rule,omitempty"`
	// Credential names the credential the proxy injected (never its value).
	Credential string `json:"credential,omitempty"`
	// Status is the upstream's HTTP status for an http event.
	Status int `json:"status,omitempty"`
	// Error is set when an allowed connection failed upstream.
	Error string `json:"error,omitempty"`
	// Source is who saw it: proxy (its own log) or kernel (a packet the
	// kernel routed to the refusal device).
	Source string `json:"source"`
	// AtMS is when it happened, in milliseconds after the run's network
	// came up (not compared by replay).
	AtMS int64 `json:"at_ms"`
}

// EgressReport is what the proxy recorded for a run.
type EgressReport struct {
	// Events are the attempts and verdicts, in the order they were decided.
	Events []EgressEvent `json:"events"`
	// Dropped counts events not kept past the cap (maxEgressEvents).
	Dropped int `json:"dropped,omitempty"`
	// Kernel holds the namespace's own counters at the end of the run:
	// refusal_device_packets (packets routed to the refusal device),
	// ipv4/ipv6_out_no_routes, tcp_attempt_fails and tcp_out_rsts
	// (connections to a closed port, which the kernel refuses without the
	// proxy seeing them), icmp_in_dest_unreachs.
	Kernel map[string]int64 `json:"kernel"`
}

// Denied returns the refused events.
func (r *EgressReport) Denied() []EgressEvent {
	var out []EgressEvent
	for _, e := range r.Events {
		if e.Verdict == "deny" {
			out = append(out, e)
		}
	}
	return out
}

const (
	maxEgressEvents = 1000
	maxEgressConns  = 128
	peekTimeout     = 10 * time.Second
)

// egressNet is one run's network: the namespace's setup, the proxy's
// listeners inside it, the resolver, the refusal device and the records.
type egressNet struct {
	policy  *Egress
	cfg     Config
	nsFD    int
	tun     *os.File
	lns     []net.Listener
	dns     net.PacketConn
	start   time.Time
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	events  []EgressEvent
	dropped int
	dnsSeen map[string]bool
	conns   map[net.Conn]struct{}
	// sandboxConns counts the open connections from the sandbox.
	sandboxConns int
	closed       bool
}

// startEgress gives the network namespace of process pid (the helper) its
// one way out and starts the proxy. Called while the command is stopped at
// its exec, so everything listens before the command's first instruction.
func startEgress(pid int, policy *Egress, cfg Config) (*egressNet, error) {
	nsFD, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("egress: open network namespace of %d: %w", pid, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &egressNet{policy: policy, cfg: cfg, nsFD: nsFD, start: cfg.Now(), ctx: ctx, cancel: cancel,
		dnsSeen: map[string]bool{}, conns: map[net.Conn]struct{}{}}
	ports := policy.ports()
	err = inNetns(nsFD, func() error {
		loIdx, err := ifaceUp("lo", netip.Addr{})
		if err != nil {
			return err
		}
		if n.tun, err = openTun(); err != nil {
			return err
		}
		// No IPv6 on the refusal device: it would send router and
		// multicast-listener solicitations of its own, which are not the
		// command's attempts. IPv6 has no route at all (ENETUNREACH).
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+tunName+"/disable_ipv6", []byte("1"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("disable IPv6 on %s: %w", tunName, err)
		}
		tunIdx, err := ifaceUp(tunName, tunAddr)
		if err != nil {
			return err
		}
		if err := addRoute(netip.PrefixFrom(netip.IPv4Unspecified(), 0), tunIdx, unix.RT_TABLE_MAIN, unix.RTN_UNICAST, unix.RT_SCOPE_LINK); err != nil {
			return err
		}
		// Allowed CIDRs are made local, so a connection to one of their
		// addresses reaches the proxy's listener with its destination
		// intact (the listener's local address).
		loopback := netip.MustParsePrefix("127.0.0.0/8")
		for _, p := range policy.prefixes() {
			if loopback.Contains(p.Addr()) && p.Bits() >= 8 {
				continue // already local
			}
			if err := addRoute(p, loIdx, unix.RT_TABLE_LOCAL, unix.RTN_LOCAL, unix.RT_SCOPE_HOST); err != nil {
				return err
			}
		}
		for _, port := range ports {
			ln, err := net.Listen("tcp4", net.JoinHostPort("0.0.0.0", strconv.Itoa(port)))
			if err != nil {
				return fmt.Errorf("proxy listen on port %d: %w", port, err)
			}
			n.lns = append(n.lns, ln)
		}
		n.dns, err = net.ListenPacket("udp4", net.JoinHostPort(proxyAddr.String(), "53"))
		if err != nil {
			return fmt.Errorf("proxy resolver listen: %w", err)
		}
		return nil
	})
	if err != nil {
		n.close()
		return nil, fmt.Errorf("egress: %w", err)
	}
	for i, ln := range n.lns {
		n.wg.Add(1)
		go func() { defer n.wg.Done(); n.serve(ln, ports[i]) }()
	}
	n.wg.Add(2)
	go func() { defer n.wg.Done(); n.serveDNS() }()
	go func() { defer n.wg.Done(); n.readTun() }()
	return n, nil
}

// close stops the proxy, reads the namespace's counters and releases it.
func (n *egressNet) close() *EgressReport {
	rep := &EgressReport{Kernel: map[string]int64{}}
	if n.nsFD > 0 {
		_ = inNetns(n.nsFD, func() error { rep.Kernel = kernelCounters(); return nil })
	}
	n.mu.Lock()
	n.closed = true
	for c := range n.conns {
		_ = c.Close()
	}
	n.mu.Unlock()
	n.cancel()
	for _, ln := range n.lns {
		_ = ln.Close()
	}
	if n.dns != nil {
		_ = n.dns.Close()
	}
	if n.tun != nil {
		_ = n.tun.Close()
	}
	n.wg.Wait()
	if n.nsFD > 0 {
		_ = unix.Close(n.nsFD)
		n.nsFD = 0
	}
	n.mu.Lock()
	rep.Events, rep.Dropped = n.events, n.dropped
	n.mu.Unlock()
	return rep
}

func (n *egressNet) record(e EgressEvent) {
	e.AtMS = n.cfg.Now().Sub(n.start).Milliseconds()
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.events) >= maxEgressEvents {
		n.dropped++
		return
	}
	n.events = append(n.events, e)
	// The operational log gets destination and verdict, never a value.
	n.cfg.Logger.Debug("sandbox egress", "proto", e.Proto, "host", e.Host, "addr", e.Addr,
		"verdict", e.Verdict, "reason", e.Reason, "credential", e.Credential)
}

// track registers a connection for teardown; false once closed, or, for
// a connection from the sandbox, when maxEgressConns are open.
func (n *egressNet) track(c net.Conn, fromSandbox bool) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || fromSandbox && n.sandboxConns >= maxEgressConns {
		return false
	}
	if fromSandbox {
		n.sandboxConns++
	}
	n.conns[c] = struct{}{}
	return true
}

func (n *egressNet) untrackSandbox(c net.Conn) {
	n.mu.Lock()
	n.sandboxConns--
	n.mu.Unlock()
	n.untrack(c)
}

func (n *egressNet) untrack(c net.Conn) {
	n.mu.Lock()
	delete(n.conns, c)
	n.mu.Unlock()
	_ = c.Close()
}

func (n *egressNet) serve(ln net.Listener, port int) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !n.track(c, true) {
			n.record(EgressEvent{Proto: "tcp", Addr: c.LocalAddr().String(), Via: "address", Verdict: "deny",
				Reason: fmt.Sprintf("more than %d connections at once", maxEgressConns), Source: "proxy"})
			_ = c.Close()
			continue
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			defer n.untrackSandbox(c)
			n.handle(c, port)
		}()
	}
}

// handle judges one connection the sandbox made to the proxy and, when
// allowed, carries it to the upstream.
func (n *egressNet) handle(c net.Conn, port int) {
	dst := c.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
	ev := EgressEvent{Proto: "tcp", Addr: netip.AddrPortFrom(dst, uint16(port)).String(), Source: "proxy"}
	deny := func(reason, rule string) {
		ev.Verdict, ev.Reason, ev.Rule = "deny", reason, rule
		n.record(ev)
	}
	if dst != proxyAddr {
		// An address in an allowed CIDR: judged by address, whatever it carries.
		ev.Via = "address"
		v, _ := n.policy.decide("", dst, port)
		if !v.allowed {
			deny(v.reason, v.rule)
			return
		}
		up, err := n.dial(ev.Addr)
		ev.Verdict, ev.Reason, ev.Rule = "allow", v.reason, v.rule
		if err != nil {
			ev.Error = err.Error()
			n.record(ev)
			return
		}
		n.record(ev)
		n.splice(c, bufio.NewReader(c), up, nil)
		return
	}
	// The proxy's own address: the destination is the name the connection
	// carries.
	_ = c.SetReadDeadline(n.cfg.Now().Add(peekTimeout))
	br := bufio.NewReaderSize(c, 32<<10)
	first, err := br.Peek(1)
	if err != nil {
		ev.Via = "none"
		deny(fmt.Sprintf("no TLS ClientHello or HTTP request within %s (raw TCP is not proxied by name)", peekTimeout), "")
		return
	}
	var (
		host   string
		prefix []byte
		req    *http.Request
		tee    *switchTee
		head   *capReader
		reader *bufio.Reader
	)
	if first[0] == 0x16 {
		ev.Via = "tls-sni"
		host, err = peekSNI(br)
		if err != nil || host == "" {
			deny(fmt.Sprintf("TLS ClientHello without a server name (SNI): %v", err), "")
			return
		}
		reader = br
	} else {
		ev.Via = "http-host"
		tee = &switchTee{}
		head = &capReader{r: br}
		head.limit(maxHeadBytes)
		reader = bufio.NewReader(io.TeeReader(head, tee))
		req, err = http.ReadRequest(reader)
		if err != nil {
			deny(fmt.Sprintf("neither a TLS ClientHello nor an HTTP request (%v): raw TCP is not proxied by name", err), "")
			return
		}
		host = req.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if host == "" {
			deny("HTTP request without a Host header", "")
			return
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	ev.Host = normHost(host)
	v, _ := n.policy.decide(ev.Host, netip.Addr{}, port)
	if !v.allowed {
		deny(v.reason, v.rule)
		return
	}
	cred := n.policy.credentialFor(ev.Host, port)
	if cred != nil && req == nil {
		deny(fmt.Sprintf("credential %s: its destination is reached with plain HTTP to the proxy, which is the TLS client", cred.Name), v.rule)
		return
	}
	upstream, why := n.resolve(ev.Host, port)
	if upstream == "" {
		deny(why, v.rule)
		return
	}
	ev.Verdict, ev.Reason, ev.Rule = "allow", v.reason, v.rule
	if cred != nil {
		n.record(ev)
		tee.off()
		n.forwardWithCredential(c, reader, head, req, cred, upstream)
		return
	}
	up, err := n.dial(upstream)
	if err != nil {
		ev.Error = err.Error()
		n.record(ev)
		return
	}
	n.record(ev)
	if tee != nil {
		prefix = tee.buf.Bytes()
		reader = br // the tee's bufio holds only bytes already in prefix
	}
	n.splice(c, reader, up, prefix)
}

// maxHeadBytes caps what the proxy reads of a request line and headers (a
// sandbox must not make the host buffer without end).
const maxHeadBytes = 64 << 10

// capReader ends (EOF) after its limit; limit(-1) lifts it.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) limit(n int64) { c.left = n }

func (c *capReader) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	if c.left > 0 && int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	if c.left > 0 {
		c.left -= int64(n)
	}
	return n, err
}

// switchTee records what passes until off is called.
type switchTee struct {
	buf      bytes.Buffer
	disabled bool
}

func (t *switchTee) Write(p []byte) (int, error) {
	if !t.disabled {
		t.buf.Write(p)
	}
	return len(p), nil
}

func (t *switchTee) off() { t.disabled = true; t.buf = bytes.Buffer{} }

// resolve finds an address for host on the host side and checks it; it
// returns "" and the reason when none may be used. Only a name some allow
// rule lists exactly is ever handed to the host's resolver (decide already
// requires it; checked again here because this is where a name leaves).
func (n *egressNet) resolve(host string, port int) (string, string) {
	if ok, why, _ := n.policy.nameAllowed(host); !ok {
		return "", "not resolved on the host: " + why
	}
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	defer cancel()
	addrs, err := n.cfg.EgressResolver(ctx, host)
	if err != nil {
		return "", fmt.Sprintf("resolve %s on the host: %v", host, err)
	}
	reason := fmt.Sprintf("%s has no IPv4 address", host)
	for _, a := range addrs {
		a = a.Unmap()
		if !a.Is4() {
			continue
		}
		ok, why := n.policy.upstreamAllowed(a, port)
		if ok {
			return netip.AddrPortFrom(a, uint16(port)).String(), ""
		}
		reason = host + " " + why
	}
	return "", reason
}

func (n *egressNet) dial(addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	defer cancel()
	c, err := n.cfg.EgressDial(ctx, "tcp4", addr)
	if err != nil {
		return nil, err
	}
	if !n.track(c, false) {
		_ = c.Close()
		return nil, errors.New("proxy is closing")
	}
	return c, nil
}

// splice copies both ways until both sides are done; prefix is sent to the
// upstream first (the bytes read to find the destination).
func (n *egressNet) splice(c net.Conn, from *bufio.Reader, up net.Conn, prefix []byte) {
	defer n.untrack(up)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(c, up)
		closeWrite(c)
	}()
	if len(prefix) == 0 || writeAll(up, prefix) == nil {
		_, _ = io.Copy(up, from)
	}
	closeWrite(up)
	<-done
}

func writeAll(w io.Writer, b []byte) error { _, err := w.Write(b); return err }

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// forwardWithCredential serves the connection request by request: each
// must be for the credential's host; the sandbox's own copy of the header is
// removed and the secret set, and the request is sent to the upstream (over
// TLS when configured, the proxy being the TLS client).
func (n *egressNet) forwardWithCredential(c net.Conn, r *bufio.Reader, head *capReader, req *http.Request, cred *Credential, upstream string) {
	scheme := "http"
	if cred.UpstreamTLS {
		scheme = "https"
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return n.cfg.EgressDial(ctx, "tcp4", upstream)
		},
		TLSClientConfig:    &tls.Config{RootCAs: n.cfg.EgressRootCAs, ServerName: cred.Host, MinVersion: tls.VersionTLS12},
		DisableCompression: true,
		MaxIdleConns:       1,
		IdleConnTimeout:    30 * time.Second,
	}
	defer tr.CloseIdleConnections()
	for {
		ev := EgressEvent{Proto: "http", Host: cred.Host, Addr: netip.AddrPortFrom(proxyAddr, uint16(cred.Port)).String(),
			Via: "http-host", Source: "proxy"}
		host := req.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if normHost(host) != cred.Host {
			ev.Host, ev.Verdict = normHost(host), "deny"
			ev.Reason = fmt.Sprintf("request for %s on a connection opened for %s", normHost(host), cred.Host)
			n.record(ev)
			writeStatus(c, http.StatusForbidden, "egress refused: "+ev.Reason)
			return
		}
		req.Header.Del(cred.header())
		req.Header.Set(cred.header(), cred.Value.reveal())
		req.URL.Scheme, req.URL.Host = scheme, net.JoinHostPort(cred.Host, strconv.Itoa(cred.Port))
		req.RequestURI = ""
		head.limit(-1) // the body is not capped
		resp, err := tr.RoundTrip(req.WithContext(n.ctx))
		ev.Verdict, ev.Reason, ev.Credential = "allow", fmt.Sprintf("%s %s with credential %s", req.Method, scheme, cred.Name), cred.Name
		if err != nil {
			ev.Error = err.Error()
			n.record(ev)
			writeStatus(c, http.StatusBadGateway, "egress: upstream failed")
			return
		}
		ev.Status = resp.StatusCode
		n.record(ev)
		werr := resp.Write(c)
		_ = resp.Body.Close()
		if werr != nil || req.Close || resp.Close {
			return
		}
		head.limit(maxHeadBytes)
		if req, err = http.ReadRequest(r); err != nil {
			return
		}
	}
}

func writeStatus(c net.Conn, code int, msg string) {
	resp := &http.Response{StatusCode: code, ProtoMajor: 1, ProtoMinor: 1, Close: true,
		Header: http.Header{"Content-Type": {"text/plain"}}, Body: io.NopCloser(strings.NewReader(msg + "\n")),
		ContentLength: int64(len(msg) + 1)}
	_ = resp.Write(c)
}

// peekSNI reads the server name from the TLS ClientHello at the head of r
// without consuming it: crypto/tls parses the peeked record as a server
// would and stops at the hello.
func peekSNI(r *bufio.Reader) (string, error) {
	hdr, err := r.Peek(5)
	if err != nil {
		return "", fmt.Errorf("read TLS record header: %w", err)
	}
	n := int(binary.BigEndian.Uint16(hdr[3:5]))
	rec, err := r.Peek(5 + n)
	if err != nil {
		return "", fmt.Errorf("read ClientHello: %w", err)
	}
	var name string
	errStop := errors.New("stop")
	srv := tls.Server(&readOnlyConn{r: bytes.NewReader(rec)}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			name = h.ServerName
			return nil, errStop
		},
	})
	err = srv.Handshake()
	if name == "" {
		return "", fmt.Errorf("no server name in the ClientHello (%v)", err)
	}
	return name, nil
}

// readOnlyConn feeds bytes to crypto/tls and swallows what it writes.
type readOnlyConn struct{ r io.Reader }

func (c *readOnlyConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *readOnlyConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *readOnlyConn) Close() error                     { return nil }
func (c *readOnlyConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *readOnlyConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *readOnlyConn) SetDeadline(time.Time) error      { return nil }
func (c *readOnlyConn) SetReadDeadline(time.Time) error  { return nil }
func (c *readOnlyConn) SetWriteDeadline(time.Time) error { return nil }

// nameAllowed reports whether a DNS question may be answered: some allow
// rule names it (on any port; a wildcard rule only for the names it lists
// in Resolve) and no port-less deny rule does.
func (e *Egress) nameAllowed(name string) (bool, string, string) {
	name = normHost(name)
	for i, r := range e.Deny {
		if r.isHost() && len(r.Ports) == 0 && hostMatches(r.Host, name) {
			d := r.describe("deny", i)
			return false, "matches " + d, d
		}
	}
	for i, r := range e.Allow {
		if r.allows(name) {
			d := r.describe("allow", i)
			return true, "matches " + d, d
		}
	}
	return false, fmt.Sprintf("no allow rule names %s%s", name, e.unlisted(name)), ""
}

// serveDNS is the only resolver that answers inside the sandbox: an allowed
// name resolves to the proxy's address, anything else is NXDOMAIN.
func (n *egressNet) serveDNS() {
	buf := make([]byte, 1500)
	for {
		sz, from, err := n.dns.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp := n.answerDNS(buf[:sz]); resp != nil {
			_, _ = n.dns.WriteTo(resp, from)
		}
	}
}

func (n *egressNet) answerDNS(q []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil || h.Response {
		return nil
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		resp, _ := (&dnsmessage.Message{Header: dnsmessage.Header{ID: h.ID, Response: true, RCode: dnsmessage.RCodeFormatError}}).Pack()
		return resp
	}
	question := qs[0]
	name := normHost(question.Name.String())
	allowed, reason, rule := n.policy.nameAllowed(name)
	if name == "localhost" {
		allowed, reason, rule = true, "localhost is the sandbox's own loopback", ""
	}
	n.mu.Lock()
	key := name + "|" + strconv.FormatBool(allowed)
	first := !n.dnsSeen[key]
	n.dnsSeen[key] = true
	n.mu.Unlock()
	if first {
		ev := EgressEvent{Proto: "dns", Host: name, Addr: netip.AddrPortFrom(proxyAddr, 53).String(), Via: "dns",
			Reason: reason, Rule: rule, Source: "proxy", Verdict: "deny"}
		if allowed {
			ev.Verdict = "allow"
		}
		n.record(ev)
	}
	msg := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true},
		Questions: qs,
	}
	switch {
	case !allowed:
		msg.Header.RCode = dnsmessage.RCodeNameError
	case question.Type == dnsmessage.TypeA:
		msg.Answers = []dnsmessage.Resource{{
			Header: dnsmessage.ResourceHeader{Name: question.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 5},
			Body:   &dnsmessage.AResource{A: proxyAddr.As4()},
		}}
	}
	resp, err := msg.Pack()
	if err != nil {
		return nil
	}
	return resp
}

// readTun records every packet the kernel routed to the refusal device —
// anything not for the proxy — and answers TCP and UDP with an ICMP
// "administratively prohibited", so a connect fails at once instead of
// hanging.
func (n *egressNet) readTun() {
	buf := make([]byte, 65536)
	for {
		sz, err := n.tun.Read(buf)
		if err != nil {
			return
		}
		pkt := buf[:sz]
		ev, reply := n.judgePacket(pkt)
		if ev != nil {
			n.record(*ev)
		}
		if reply != nil {
			_, _ = n.tun.Write(reply)
		}
	}
}

func (n *egressNet) judgePacket(pkt []byte) (*EgressEvent, []byte) {
	if len(pkt) < 20 || pkt[0]>>4 != 4 {
		return &EgressEvent{Proto: "ip", Via: "packet", Verdict: "deny", Reason: "not IPv4", Source: "kernel"}, nil
	}
	ihl := int(pkt[0]&0x0f) * 4
	if ihl < 20 || len(pkt) < ihl {
		return nil, nil
	}
	dst, _ := netip.AddrFromSlice(pkt[16:20])
	ev := &EgressEvent{Via: "packet", Verdict: "deny", Source: "kernel"}
	l4 := pkt[ihl:]
	switch pkt[9] {
	case unix.IPPROTO_TCP:
		if len(l4) < 14 {
			return nil, nil
		}
		flags := l4[13]
		if flags&0x02 == 0 || flags&0x10 != 0 {
			return nil, nil // only a connection's first SYN is an attempt
		}
		port := binary.BigEndian.Uint16(l4[2:4])
		ev.Proto, ev.Addr = "tcp", netip.AddrPortFrom(dst, port).String()
		ev.Reason = fmt.Sprintf("tcp to %s: the address is in no allowed cidr, and names are reached through the proxy's resolver", ev.Addr)
		if v, _ := n.policy.decide("", dst, int(port)); v.rule != "" {
			ev.Reason, ev.Rule = v.reason, v.rule
		}
	case unix.IPPROTO_UDP:
		if len(l4) < 8 {
			return nil, nil
		}
		port := binary.BigEndian.Uint16(l4[2:4])
		ev.Proto, ev.Addr = "udp", netip.AddrPortFrom(dst, port).String()
		ev.Reason = fmt.Sprintf("udp to %s: UDP is not proxied", ev.Addr)
		if port == 53 {
			ev.Reason = fmt.Sprintf("dns to %s: only the proxy's resolver (%s:53) answers", ev.Addr, proxyAddr)
		}
	case unix.IPPROTO_ICMP:
		ev.Proto, ev.Addr = "icmp", dst.String()
		ev.Reason = fmt.Sprintf("icmp to %s: ICMP is not proxied", dst)
		return ev, nil
	default:
		ev.Proto, ev.Addr = fmt.Sprintf("ip-proto-%d", pkt[9]), dst.String()
		ev.Reason = fmt.Sprintf("IP protocol %d to %s is not proxied", pkt[9], dst)
		return ev, nil
	}
	return ev, icmpProhibited(pkt, ihl)
}

// icmpProhibited builds the ICMP "destination unreachable, communication
// administratively prohibited" answer to pkt, as if from its destination.
func icmpProhibited(pkt []byte, ihl int) []byte {
	quote := pkt[:min(len(pkt), ihl+8)]
	icmp := make([]byte, 8+len(quote))
	icmp[0], icmp[1] = 3, 13
	copy(icmp[8:], quote)
	binary.BigEndian.PutUint16(icmp[2:], inetChecksum(icmp))
	ip := make([]byte, 20, 20+len(icmp))
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(icmp)))
	ip[8], ip[9] = 64, unix.IPPROTO_ICMP
	copy(ip[12:16], pkt[16:20])
	copy(ip[16:20], pkt[12:16])
	binary.BigEndian.PutUint16(ip[10:], inetChecksum(ip))
	return append(ip, icmp...)
}

func inetChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
