package sandbox

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/testtier"
)

// upstreamIP is where the tests' upstream servers listen on the host: a
// loopback address other than the sandbox proxy's own 127.0.0.1, so a
// policy can name it with a CIDR rule.
const upstreamIP = "127.0.0.2"

// startUpstream serves h on upstreamIP and returns its port.
func startUpstream(t *testing.T, h http.Handler) (*httptest.Server, int) {
	t.Helper()
	ln, err := net.Listen("tcp4", upstreamIP+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", upstreamIP, err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = ln
	return srv, ln.Addr().(*net.TCPAddr).Port
}

// names resolves test host names, on the host side, to upstreamIP.
func names(known ...string) func(context.Context, string) ([]netip.Addr, error) {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		for _, k := range known {
			if host == k {
				return []netip.Addr{netip.MustParseAddr(upstreamIP)}, nil
			}
		}
		return nil, fmt.Errorf("test resolver: no such host %s", host)
	}
}

func findEvent(rep *EgressReport, match func(EgressEvent) bool) (EgressEvent, bool) {
	if rep == nil {
		return EgressEvent{}, false
	}
	for _, e := range rep.Events {
		if match(e) {
			return e, true
		}
	}
	return EgressEvent{}, false
}

const egressClient = `
import json, socket, ssl, sys, urllib.request
out = {}
def attempt(name, fn):
    try:
        out[name] = fn()
    except Exception as e:
        out[name] = 'error: %s: %s' % (type(e).__name__, getattr(e, 'errno', None) or e)
`

func TestRootEgressAllowedHostsAreReachedThroughTheProxy(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	plain, plainPort := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "plain upstream saw Host %s", r.Host)
	}))
	plain.Start()
	defer plain.Close()
	tlsSrv, tlsPort := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls upstream, sni %s", r.TLS.ServerName)
	}))
	tlsSrv.StartTLS()
	defer tlsSrv.Close()

	r := newRunner(t, Config{EgressResolver: names("plain.test", "files.tls.test")})
	policy := &Egress{Allow: []EgressRule{
		{Host: "plain.test", Ports: []int{plainPort}},
		{Host: "*.tls.test", Ports: []int{tlsPort}, Resolve: []string{"files.tls.test"}},
		// The upstreams are on the host's loopback, which a name may only
		// resolve to when a CIDR rule covers it.
		{CIDR: upstreamIP + "/32", Ports: []int{plainPort, tlsPort}},
	}}
	res := py(t, r, egressClient+`
pp, tp = int(sys.argv[1]), int(sys.argv[2])
attempt('resolve', lambda: socket.gethostbyname('plain.test'))
attempt('http', lambda: urllib.request.urlopen('http://plain.test:%d/x' % pp, timeout=10).read().decode())
def tls():
    ctx = ssl._create_unverified_context()  # the sandbox has no CA bundle; the point is SNI
    s = ctx.wrap_socket(socket.create_connection(('files.tls.test', tp), timeout=10), server_hostname='files.tls.test')
    s.sendall(b'GET / HTTP/1.1\r\nHost: files.tls.test\r\nConnection: close\r\n\r\n')
    data = b''
    while True:
        c = s.recv(4096)
        if not c: break
        data += c
    return data.decode().split('\r\n\r\n', 1)[1]
attempt('tls', tls)
print(json.dumps(out))
`, Request{Command: []string{strconv.Itoa(plainPort), strconv.Itoa(tlsPort)}, Egress: policy})
	var got map[string]string
	decode(t, res, &got)
	if got["resolve"] != "127.0.0.1" {
		t.Errorf("plain.test should resolve to the proxy (127.0.0.1) inside the sandbox, got %q", got["resolve"])
	}
	if want := fmt.Sprintf("plain upstream saw Host plain.test:%d", plainPort); got["http"] != want {
		t.Errorf("http through the proxy: want %q, got %q", want, got["http"])
	}
	if got["tls"] != "tls upstream, sni files.tls.test" {
		t.Errorf("tls through the proxy (end to end, SNI passed): got %q", got["tls"])
	}
	for _, want := range []struct{ via, host, rule string }{
		{"http-host", "plain.test", "allow[0] plain.test"},
		{"tls-sni", "files.tls.test", "allow[1] *.tls.test"},
		{"dns", "plain.test", "allow[0] plain.test"},
	} {
		e, ok := findEvent(res.Egress, func(e EgressEvent) bool { return e.Via == want.via && e.Host == want.host })
		if !ok || e.Verdict != "allow" || e.Rule != want.rule || e.Error != "" {
			t.Errorf("want an allow event via %s for %s by %s, got %+v (found %v); all: %+v", want.via, want.host, want.rule, e, ok, res.Egress)
		}
	}
}

func TestRootEgressRefusesEverythingElseAndRecordsWhy(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	t.Parallel()     // its own runner; waits on a limit or the network
	hits := 0
	var mu sync.Mutex
	up, port := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		fmt.Fprint(w, "upstream")
	}))
	up.Start()
	defer up.Close()
	// A server on the host's own 127.0.0.1, which the sandbox must not reach.
	hostLn, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostLn.Close()
	go func() {
		for {
			c, err := hostLn.Accept()
			if err != nil {
				return
			}
			t.Errorf("the host's 127.0.0.1 listener accepted a connection from %s", c.RemoteAddr())
			c.Close()
		}
	}()
	hostPort := hostLn.Addr().(*net.TCPAddr).Port

	r := newRunner(t, Config{EgressResolver: names("allowed.test", "denied.test")})
	policy := &Egress{
		Allow: []EgressRule{
			{Host: "allowed.test", Ports: []int{port}},
			{Host: "*.test", Ports: []int{port}, Resolve: []string{"denied.test"}},
			{CIDR: upstreamIP, Ports: []int{port}},
		},
		Deny: []EgressRule{{Host: "denied.test"}},
	}
	res := py(t, r, egressClient+`
port, hostport = int(sys.argv[1]), int(sys.argv[2])
def tcp(host, p, payload=None):
    s = socket.create_connection((host, p), timeout=5)
    if payload is not None:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
    data = s.recv(4096)
    s.close()
    return 'connected, read %r' % data
def get(url, host=None):
    req = urllib.request.Request(url)
    if host: req.add_header('Host', host)
    return urllib.request.urlopen(req, timeout=5).read().decode()
attempt('denied name', lambda: socket.gethostbyname('denied.test'))
attempt('unknown name', lambda: socket.gethostbyname('example.org'))
attempt('host header denied', lambda: tcp('127.0.0.1', port, b'GET / HTTP/1.1\r\nHost: denied.test\r\n\r\n'))
attempt('raw tcp', lambda: tcp('127.0.0.1', port, b'\x00\x01 not http\r\n\r\n'))
attempt('raw ip', lambda: tcp('192.0.2.1', 80))
attempt('host loopback', lambda: tcp('127.0.0.1', hostport))
attempt('other port', lambda: tcp('allowed.test', port + 1 if port < 65535 else port - 1))
def udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b'hello', ('192.0.2.1', 9999))
    return 'sent'
attempt('udp', udp)
def dns_elsewhere():
    q = b'\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03org\x00\x00\x01\x00\x01'
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(2)
    u.sendto(q, ('192.0.2.53', 53))
    try:
        return 'answered %r' % u.recv(512)
    except socket.timeout:
        return 'no answer'
attempt('dns elsewhere', dns_elsewhere)
attempt('ipv6', lambda: tcp('2001:db8::1', 443))
attempt('allowed', lambda: get('http://allowed.test:%d/' % port))
print(json.dumps(out))
`, Request{Command: []string{strconv.Itoa(port), strconv.Itoa(hostPort)}, Egress: policy})
	var got map[string]string
	decode(t, res, &got)
	t.Logf("sandbox saw: %v", got)
	for _, k := range []string{"denied name", "unknown name", "raw ip", "host loopback", "other port", "ipv6"} {
		if !strings.HasPrefix(got[k], "error: ") {
			t.Errorf("%s: want an error inside the sandbox, got %q", k, got[k])
		}
	}
	// A refused name-less or denied connection is closed by the proxy.
	for _, k := range []string{"host header denied", "raw tcp"} {
		if got[k] != "connected, read b''" {
			t.Errorf("%s: want the proxy to close without an answer, got %q", k, got[k])
		}
	}
	if got["allowed"] != "upstream" {
		t.Errorf("the allowed request should still pass: %q", got["allowed"])
	}
	if !strings.Contains(got["raw ip"], "113") { // EHOSTUNREACH from the ICMP answer
		t.Errorf("raw ip: want EHOSTUNREACH (113) at once from the refusal device's ICMP answer, got %q", got["raw ip"])
	}
	rep := res.Egress
	if rep == nil {
		t.Fatal("no egress report")
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	t.Logf("egress report: %s", b)
	for _, want := range []struct {
		what  string
		match func(EgressEvent) bool
		in    string
	}{
		{"denied name (dns)", func(e EgressEvent) bool { return e.Proto == "dns" && e.Host == "denied.test" }, "matches deny[0] denied.test"},
		{"unknown name (dns)", func(e EgressEvent) bool { return e.Proto == "dns" && e.Host == "example.org" }, "no allow rule names example.org"},
		{"host header", func(e EgressEvent) bool { return e.Via == "http-host" && e.Host == "denied.test" }, "matches deny[0]"},
		{"raw tcp", func(e EgressEvent) bool { return e.Via == "http-host" && e.Host == "" }, "raw TCP is not proxied"},
		{"raw ip", func(e EgressEvent) bool { return e.Proto == "tcp" && e.Addr == "192.0.2.1:80" }, "in no allowed cidr"},
		{"udp", func(e EgressEvent) bool { return e.Proto == "udp" && e.Addr == "192.0.2.1:9999" }, "UDP is not proxied"},
		{"dns elsewhere", func(e EgressEvent) bool { return e.Proto == "udp" && e.Addr == "192.0.2.53:53" }, "only the proxy's resolver"},
	} {
		e, ok := findEvent(rep, want.match)
		if !ok || e.Verdict != "deny" || !strings.Contains(e.Reason, want.in) {
			t.Errorf("%s: want a deny event whose reason has %q, got %+v (found %v)", want.what, want.in, e, ok)
		}
	}
	for _, e := range rep.Events {
		if e.Proto == "udp" || e.Addr == "192.0.2.1:80" {
			if e.Source != "kernel" {
				t.Errorf("%s %s: a packet routed to the refusal device is kernel evidence, got source %q", e.Proto, e.Addr, e.Source)
			}
		}
	}
	// Kernel evidence: the packets the kernel routed to the refusal device,
	// the closed-port refusal the proxy never sees, IPv6 without a route.
	if rep.Kernel["refusal_device_packets"] < 3 {
		t.Errorf("refusal device should have carried the raw IP, UDP and DNS packets, kernel counters %v", rep.Kernel)
	}
	if rep.Kernel["tcp_out_rsts"] < 1 {
		t.Errorf("the other-port attempt is refused by the kernel (RST); want tcp_out_rsts >= 1, got %v", rep.Kernel)
	}
	if rep.Kernel["ipv6_out_no_routes"] < 1 {
		t.Errorf("IPv6 has no route; want ipv6_out_no_routes >= 1, got %v", rep.Kernel)
	}
	mu.Lock()
	defer mu.Unlock()
	if hits != 1 {
		t.Errorf("upstream served %d requests; want exactly the one allowed", hits)
	}
}

func TestRootNoEgressPolicyStillMeansNoNetwork(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	res := py(t, r, `
import json, socket
print(json.dumps([n for _, n in socket.if_nameindex()]))
`, Request{})
	var ifs []string
	decode(t, res, &ifs)
	if len(ifs) != 1 || ifs[0] != "lo" || res.Egress != nil {
		t.Errorf("without a policy: want only lo and no egress report, got %v %+v", ifs, res.Egress)
	}
}

func TestEgressPolicyValidateNamesEveryBadRule(t *testing.T) {
	bad := &Egress{
		Allow: []EgressRule{
			{Host: "ok.test"},                       // no ports
			{Host: "a.*.test", Ports: []int{80}},    // wildcard not leading
			{CIDR: "10.0.0.0/33", Ports: []int{80}}, // bad prefix
			{CIDR: "127.0.0.0/8", Ports: []int{80}}, // holds the proxy
			{Host: "x.test", CIDR: "10.0.0.1", Ports: []int{1}},
			{Host: "y.test", Ports: []int{0, 70000}},
			{CIDR: "100.64.0.0/10", Ports: []int{80}}, // holds the refusal device
		},
		Credentials: []Credential{{Name: "", Host: "elsewhere.test", Port: 80}},
	}
	err := bad.Validate()
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"allow[0]: ports", "allow[1]: host", "allow[2]: cidr", "127.0.0.0/8: contains 127.0.0.1",
		"allow[4]: set host or cidr, not both", "port 0 out of range", "port 70000 out of range",
		"credentials[0]: name is required", "100.64.0.0/10: contains 100.127.255.2", "credentials[0]: no value", "elsewhere.test:80 is not allowed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error should mention %q:\n%v", want, err)
		}
	}
	if err := (&Egress{}).Validate(); err == nil {
		t.Error("an empty allow list should be refused (no policy means no network)")
	}
	var nilPolicy *Egress
	if err := nilPolicy.Validate(); err != nil {
		t.Errorf("nil policy: %v", err)
	}
}

func TestEgressDecideDenyWinsWildcardsAndPorts(t *testing.T) {
	e, err := (&Egress{
		Allow: []EgressRule{{Host: "*.Example.org.", Ports: []int{443}, Resolve: []string{"a.example.org", "A.B.Example.org.", "bad.example.org"}},
			{CIDR: "192.0.2.0/24", Ports: []int{22}}},
		Deny: []EgressRule{{Host: "bad.example.org"}, {CIDR: "192.0.2.66/32"}},
	}).prepared()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host string
		addr string
		port int
		want bool
	}{
		{"a.example.org", "", 443, true},
		{"A.B.EXAMPLE.ORG.", "", 443, true},
		{"example.org", "", 443, false},   // the wildcard needs a label
		{"c.example.org", "", 443, false}, // under the wildcard, not listed in resolve
		{"a.example.org", "", 80, false},
		{"bad.example.org", "", 443, false},
		{"evil-example.org", "", 443, false},
		{"", "192.0.2.5", 22, true},
		{"", "192.0.2.66", 22, false},
		{"", "192.0.3.5", 22, false},
	} {
		var a netip.Addr
		if c.addr != "" {
			a = netip.MustParseAddr(c.addr)
		}
		if v, _ := e.decide(c.host, a, c.port); v.allowed != c.want {
			t.Errorf("decide(%q, %q, %d) = %+v, want allowed=%v", c.host, c.addr, c.port, v, c.want)
		}
	}
	if ok, _ := e.upstreamAllowed(netip.MustParseAddr("169.254.169.254"), 443); ok {
		t.Error("a name resolving to the metadata address must be refused without a cidr rule")
	}
	if ok, _ := e.upstreamAllowed(netip.MustParseAddr("192.0.2.66"), 22); ok {
		t.Error("a denied address must be refused even by name")
	}
}

func TestSecretNeverPrints(t *testing.T) {
	c := Credential{Name: "tok", Host: "a.test", Port: 80, Value: "s3cr3t-value"}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "cred", c, "v", c.Value)
	b, _ := json.Marshal(c)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s %q", c, c, c, c.Value, c.Value), string(b), buf.String()} {
		if strings.Contains(s, "s3cr3t") {
			t.Errorf("secret printed: %s", s)
		}
	}
	_ = io.Discard
}

// syncBuffer is a log sink shared by the proxy's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// selfSigned makes a certificate for name and a pool that trusts it.
func selfSigned(t *testing.T, name string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool
}

// scanProcessMemory reports whether any readable mapping of pid holds needle.
func scanProcessMemory(t *testing.T, pid int, needle []byte) (found bool, scanned int64) {
	t.Helper()
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatalf("read maps of %d: %v", pid, err)
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatalf("open mem of %d: %v", pid, err)
	}
	defer mem.Close()
	for _, line := range strings.Split(strings.TrimSpace(string(maps)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[1][0] != 'r' {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end-start > 1<<30 {
			continue
		}
		buf := make([]byte, end-start)
		n, _ := mem.ReadAt(buf, int64(start))
		scanned += int64(n)
		if bytes.Contains(buf[:n], needle) {
			return true, scanned
		}
	}
	return false, scanned
}

func TestRootEgressCredentialIsInjectedForItsDestinationOnlyAndNeverEntersTheSandbox(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	secret := "lw-secret-" + token(t)
	var mu sync.Mutex
	seen := map[string][]string{} // server -> Authorization values it saw, as verdicts
	check := func(server string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			vals := r.Header.Values("Authorization")
			verdict := "unauthorized"
			if len(vals) == 1 && vals[0] == "Bearer "+secret {
				verdict = "authorized"
			}
			mu.Lock()
			seen[server] = append(seen[server], verdict)
			mu.Unlock()
			// Never echo the header: the test is whether the proxy leaks it.
			fmt.Fprintf(w, "%s (%d authorization values)", verdict, len(vals))
		}
	}
	api, apiPort := startUpstream(t, check("api"))
	api.Start()
	defer api.Close()
	cert, pool := selfSigned(t, "tlsapi.test")
	tlsAPI, tlsPort := startUpstream(t, check("tlsapi"))
	tlsAPI.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	tlsAPI.StartTLS()
	defer tlsAPI.Close()
	other, otherPort := startUpstream(t, check("other"))
	other.Start()
	defer other.Close()

	logs := &syncBuffer{}
	r := newRunner(t, Config{
		EgressResolver: names("api.test", "tlsapi.test", "other.test"),
		EgressRootCAs:  pool,
		Logger:         slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	policy := &Egress{
		Allow: []EgressRule{
			{Host: "api.test", Ports: []int{apiPort}},
			{Host: "tlsapi.test", Ports: []int{tlsPort}},
			{Host: "other.test", Ports: []int{otherPort}},
			{CIDR: upstreamIP, Ports: []int{apiPort, tlsPort, otherPort}},
		},
		Credentials: []Credential{
			{Name: "api-token", Host: "api.test", Port: apiPort, Value: Secret("Bearer " + secret)},
			{Name: "tls-api-token", Host: "tlsapi.test", Port: tlsPort, Value: Secret("Bearer " + secret), UpstreamTLS: true},
		},
	}
	tok := token(t)
	ws := t.TempDir()
	type ran struct {
		res *Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := r.Run(context.Background(), Request{
			Command: []string{"/usr/bin/python3", "-I", "-c", egressClient + `
import os, time
ap, tp, op = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def get(url, auth=None, host=None):
    req = urllib.request.Request(url)
    if auth: req.add_header('Authorization', auth)
    if host: req.add_header('Host', host)
    try:
        return urllib.request.urlopen(req, timeout=10).read().decode()
    except urllib.error.HTTPError as e:
        return 'HTTP %d: %s' % (e.code, e.read().decode())
attempt('api', lambda: get('http://api.test:%d/' % ap, auth='Bearer sandbox-guess'))
attempt('api again', lambda: get('http://api.test:%d/second' % ap))
attempt('tls api as http', lambda: get('http://tlsapi.test:%d/' % tp))
def tls_direct():
    ctx = ssl._create_unverified_context()
    s = ctx.wrap_socket(socket.create_connection(('tlsapi.test', tp), timeout=10), server_hostname='tlsapi.test')
    return 'handshake done'
attempt('tls api direct', tls_direct)
attempt('other', lambda: get('http://other.test:%d/' % op))
attempt('other via api host', lambda: get('http://api.test:%d/' % ap, host='other.test'))
def pipelined():
    s = socket.create_connection(('api.test', ap), timeout=10)
    s.sendall(b'GET /1 HTTP/1.1\r\nHost: api.test\r\n\r\nGET /2 HTTP/1.1\r\nHost: other.test\r\n\r\n')
    data = b''
    while True:
        c = s.recv(4096)
        if not c: break
        data += c
    import re
    return re.findall(r'HTTP/1\.1 \d{3} [A-Za-z ]+?(?=\r\n)', data.decode())
attempt('pipelined', pipelined)
# Everything the sandbox can see of itself, for the host to search.
dump = {'environ': open('/proc/self/environ', 'rb').read().decode('latin1'),
        'cmdline': open('/proc/self/cmdline', 'rb').read().decode('latin1'), 'files': {}}
for top in ('/work', '/tmp'):
    for root, dirs, files in os.walk(top):
        for f in files:
            p = os.path.join(root, f)
            if not os.path.isfile(p): continue
            try:
                with open(p, 'rb') as fh:
                    dump['files'][p] = fh.read(1 << 20).decode('latin1')
            except OSError as e:
                dump['files'][p] = 'errno %d' % e.errno
out['dump'] = dump
open('/work/ready', 'w').write('1')
for _ in range(600):
    if os.path.exists('/work/done'): break
    time.sleep(0.05)
print(json.dumps(out))
`, strconv.Itoa(apiPort), strconv.Itoa(tlsPort), strconv.Itoa(otherPort), tok},
			Workspace: ws,
			Egress:    policy,
			Limits:    Limits{WallTime: 60 * time.Second},
		})
		done <- ran{res, err}
	}()
	// While the command waits, read its whole memory from the host.
	waitFor(t, "the sandboxed command to finish its requests", 45*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(ws, "ready"))
		return err == nil
	})
	pids := hostProcsWith(t, tok)
	if len(pids) != 1 {
		t.Fatalf("want the one sandboxed python, found %v", pids)
	}
	found, scanned := scanProcessMemory(t, pids[0], []byte(secret))
	if found {
		t.Errorf("the secret is in the sandboxed process's memory")
	}
	if scanned < 1<<20 {
		t.Errorf("scanned only %d bytes of the command's memory; the scan did not work", scanned)
	}
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pids[0])); err != nil || bytes.Contains(env, []byte(secret)) {
		t.Errorf("the command's /proc/pid/environ read from the host: err %v, holds the secret %v", err, bytes.Contains(env, []byte(secret)))
	}
	if err := os.WriteFile(filepath.Join(ws, "done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rr := <-done
	if rr.err != nil {
		t.Fatalf("Run: %v", rr.err)
	}
	res := rr.res
	var got map[string]any
	decode(t, res, &got)
	want := map[string]string{
		"api":             "authorized (1 authorization values)", // the sandbox's own guess replaced, not added
		"api again":       "authorized (1 authorization values)",
		"tls api as http": "authorized (1 authorization values)",
		"other":           "unauthorized (0 authorization values)",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: want %q, got %v", k, v, got[k])
		}
	}
	if s, _ := got["tls api direct"].(string); !strings.HasPrefix(s, "error") {
		t.Errorf("TLS straight to a credential destination must be refused (the proxy is the TLS client there), got %v", got["tls api direct"])
	}
	if s, _ := got["other via api host"].(string); !strings.HasPrefix(s, "error") {
		t.Errorf("a connection to api.test's port naming other.test must be refused, got %v", got["other via api host"])
	}
	if p, _ := got["pipelined"].([]any); len(p) != 2 || p[0] != "HTTP/1.1 200 OK" || p[1] != "HTTP/1.1 403 Forbidden" {
		t.Errorf("on a credential connection a second request for another host must get 403, got %v; events %+v", got["pipelined"], res.Egress.Events)
	}
	mu.Lock()
	if v := seen["other"]; len(v) != 1 || v[0] != "unauthorized" {
		t.Errorf("other.test must see no credential, saw %v", v)
	}
	if v := seen["api"]; len(v) != 3 {
		t.Errorf("api.test should have served 3 requests (not the ones for other.test), saw %v", v)
	}
	mu.Unlock()
	// Absent from every record: the sandbox's own view, the result (what the
	// journal and spans are made from) and the proxy's log.
	resJSON, _ := json.Marshal(res)
	for what, s := range map[string]string{"sandbox environ/files/stdout": res.Stdout + res.Stderr, "result JSON": string(resJSON), "proxy log": logs.String()} {
		if strings.Contains(s, secret) {
			t.Errorf("the secret appears in the %s", what)
		}
	}
	if !strings.Contains(logs.String(), `"credential":"api-token"`) {
		t.Errorf("the proxy log should name the credential it injected; log: %s", logs.String())
	}
	e, ok := findEvent(res.Egress, func(e EgressEvent) bool { return e.Proto == "http" && e.Credential == "tls-api-token" })
	if !ok || e.Verdict != "allow" || e.Status != 200 || !strings.Contains(e.Reason, "https") {
		t.Errorf("want an http event injecting tls-api-token over https with status 200, got %+v", e)
	}
	if e, ok := findEvent(res.Egress, func(e EgressEvent) bool { return e.Via == "tls-sni" && e.Host == "tlsapi.test" }); !ok || e.Verdict != "deny" || !strings.Contains(e.Reason, "plain HTTP to the proxy") {
		t.Errorf("want the direct TLS attempt denied with its reason, got %+v", e)
	}
	if e, ok := findEvent(res.Egress, func(e EgressEvent) bool { return e.Proto == "http" && e.Host == "other.test" }); !ok || e.Verdict != "deny" {
		t.Errorf("want the other-host request on the credential connection denied, got %+v", e)
	}
	if e, ok := findEvent(res.Egress, func(e EgressEvent) bool { return e.Proto == "tcp" && e.Host == "other.test" && e.Verdict == "deny" }); !ok || e.Verdict != "deny" || !strings.Contains(e.Reason, "no allow rule matches other.test port") {
		t.Errorf("want the other.test connection on api.test's port denied, got %+v", e)
	}
}

// hostNonLoopbackIPv4 returns an address of this host off loopback, if any.
func hostNonLoopbackIPv4(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if p, ok := a.(*net.IPNet); ok && p.IP.To4() != nil && !p.IP.IsLoopback() {
			return p.IP.String()
		}
	}
	return ""
}

// The sandbox suite's attacks, again with an egress policy on: the network
// opening must not weaken the rest, and the network itself must hold
// against a command that tries to widen it.
func TestRootAttacksStillContainedWithEgressOn(t *testing.T) {
	testtier.Slow(t) // a real sandbox; not parallel: it sets an environment variable
	up, port := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	up.Start()
	defer up.Close()
	// Host services the sandbox must not reach: one on 127.0.0.1, one on
	// the host's own address (both on the allowed port number too).
	var accepted sync.WaitGroup
	var mu sync.Mutex
	var leaks []string
	listen := func(addr string) int {
		ln, err := net.Listen("tcp4", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		accepted.Add(1)
		go func() {
			defer accepted.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				leaks = append(leaks, fmt.Sprintf("%s accepted %s", addr, c.RemoteAddr()))
				mu.Unlock()
				c.Close()
			}
		}()
		return ln.Addr().(*net.TCPAddr).Port
	}
	hostLoop := listen("127.0.0.1:0")
	hostIP := hostNonLoopbackIPv4(t)
	hostIPPort := 0
	if hostIP != "" {
		hostIPPort = listen(hostIP + ":0")
	}
	hostSecret := token(t)
	t.Setenv("LOOMWORK_TEST_SECRET", hostSecret)

	r := newRunner(t, Config{EgressResolver: func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "allowed.test":
			return []netip.Addr{netip.MustParseAddr(upstreamIP)}, nil
		case "rebind.test": // an allowed name whose record points at the metadata service
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
		case "hostloop.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}})
	policy := &Egress{Allow: []EgressRule{
		{Host: "allowed.test", Ports: []int{port}},
		{Host: "rebind.test", Ports: []int{port}},
		{Host: "hostloop.test", Ports: []int{hostLoop}},
		{CIDR: upstreamIP, Ports: []int{port}},
	}}
	wd, _ := os.Getwd()
	attacks := []struct {
		name, code string
		args       []string
		limits     Limits
		check      func(t *testing.T, res *Result, out map[string]any)
	}{
		{name: "host files are absent", code: probeRead, args: []string{"/etc/shadow", "/etc/passwd", "/root", wd, "/var", "/sys"},
			check: func(t *testing.T, res *Result, out map[string]any) {
				for k, v := range out {
					if v != float64(syscall.ENOENT) {
						t.Errorf("%s: want ENOENT, got %v", k, v)
					}
				}
			}},
		{name: "host environment is absent", code: `
import json, os
print(json.dumps({'env': dict(os.environ)}))`,
			check: func(t *testing.T, res *Result, out map[string]any) {
				if strings.Contains(res.Stdout, hostSecret) || len(out["env"].(map[string]any)) != 4 {
					t.Errorf("environment leaks or has extras: %v", out["env"])
				}
			}},
		{name: "writes outside the workspace fail", code: `
import json
out = {}
for p in ('/usr/evil', '/evil', '/dev/evil'):
    try:
        open(p, 'w').write('x'); out[p] = 0
    except OSError as e:
        out[p] = e.errno
print(json.dumps(out))`,
			check: func(t *testing.T, res *Result, out map[string]any) {
				for k, v := range out {
					if v != float64(syscall.EROFS) {
						t.Errorf("%s: want EROFS, got %v", k, v)
					}
				}
			}},
		{name: "fork bomb is refused at the pids limit", limits: Limits{Tasks: 16}, code: `
import json, os, time
n = 0
while True:
    try:
        pid = os.fork()
    except OSError as e:
        print(json.dumps({'forks': n, 'errno': e.errno})); break
    if pid == 0:
        time.sleep(30); os._exit(0)
    n += 1`,
			check: func(t *testing.T, res *Result, out map[string]any) {
				if out["forks"] != float64(15) || res.Counters.PidsMax < 1 {
					t.Errorf("want fork 16 refused with pids.events, got %v %+v", out, res.Counters)
				}
			}},
		{name: "memory hog is killed", limits: Limits{Memory: 64 << 20}, code: `
x = []
while True:
    x.append(bytearray(1 << 20))`,
			check: func(t *testing.T, res *Result, _ map[string]any) {
				if res.Reason != ReasonMemory {
					t.Errorf("want memory, got %s", res.Summary())
				}
			}},
		{name: "the network cannot be widened from inside", code: `
import json, socket, struct, fcntl
out = {}
def try_(name, fn):
    try:
        fn(); out[name] = 0
    except OSError as e:
        out[name] = e.errno
def lo_down():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    fcntl.ioctl(s.fileno(), 0x8914, struct.pack('16sH', b'lo', 0))  # SIOCSIFFLAGS
try_('bring lo down', lo_down)
def add_route():
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    hdr = struct.pack('=LHHLL', 16 + 12 + 8, 24, 0x1 | 0x4 | 0x400 | 0x200, 1, 0)  # RTM_NEWROUTE
    rtm = struct.pack('=BBBBBBBBI', 2, 0, 0, 0, 254, 4, 0, 1, 0)
    oif = struct.pack('=HHI', 8, 4, 1)
    s.send(hdr + rtm + oif)
    ans = s.recv(4096)
    err = struct.unpack('=i', ans[16:20])[0]
    if err: raise OSError(-err, 'netlink')
try_('add a route', add_route)
try_('raw socket', lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP))
try_('packet socket', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
try_('open tun', lambda: open('/dev/net/tun', 'rb'))
def bind_resolver():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(('127.0.0.1', 53))
try_('take the resolver port', bind_resolver)
out['interfaces'] = sorted(n for _, n in socket.if_nameindex())
out['routes'] = open('/proc/net/route').read().split('\n')[1:]
print(json.dumps(out))`,
			check: func(t *testing.T, res *Result, out map[string]any) {
				for _, k := range []string{"bring lo down", "add a route", "raw socket", "packet socket", "open tun", "take the resolver port"} {
					if v, _ := out[k].(float64); v == 0 {
						t.Errorf("%s: succeeded inside the sandbox", k)
					}
				}
				if fmt.Sprint(out["interfaces"]) != "[lo lwrefuse0]" {
					t.Errorf("interfaces: want lo and the refusal device only, got %v", out["interfaces"])
				}
				var routes []string
				for _, l := range out["routes"].([]any) {
					if f := strings.Fields(l.(string)); len(f) > 2 {
						routes = append(routes, f[0]+" "+f[1])
					}
				}
				// One route: the default, to the proxy's refusal device (the
				// proxy's listeners are local addresses, in the local table).
				if len(routes) != 1 || routes[0] != "lwrefuse0 00000000" {
					t.Errorf("want exactly one route, the default to the refusal device, got %v", routes)
				}
			}},
		{name: "the host's services are out of reach", args: []string{strconv.Itoa(hostLoop), hostIP, strconv.Itoa(hostIPPort), strconv.Itoa(port)}, code: egressClient + `
hostloop, hostip, hostipport, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def tcp(host, p):
    s = socket.create_connection((host, p), timeout=5)
    s.sendall(b'GET / HTTP/1.1\r\nHost: %s\r\n\r\n' % host.encode())
    d = s.recv(100)
    return 'read %r' % d
attempt('host 127.0.0.1', lambda: tcp('127.0.0.1', hostloop))
if hostip:
    attempt('host ip', lambda: tcp(hostip, hostipport))
    attempt('host ip on the allowed port', lambda: tcp(hostip, port))
attempt('metadata', lambda: tcp('169.254.169.254', 80))
attempt('rebind', lambda: tcp('rebind.test', port))
attempt('name for the host loopback', lambda: tcp('hostloop.test', hostloop))
print(json.dumps(out))`,
			check: func(t *testing.T, res *Result, out map[string]any) {
				for k, v := range out {
					if s, _ := v.(string); !strings.HasPrefix(s, "error") && s != "read b''" {
						t.Errorf("%s: reached something: %v", k, v)
					}
				}
				for _, want := range []string{"rebind.test resolves to 169.254.169.254", "hostloop.test resolves to 127.0.0.1"} {
					if _, ok := findEvent(res.Egress, func(e EgressEvent) bool { return e.Verdict == "deny" && strings.Contains(e.Reason, want) }); !ok {
						t.Errorf("want a deny event %q, got %+v", want, res.Egress.Events)
					}
				}
				if _, ok := findEvent(res.Egress, func(e EgressEvent) bool { return e.Addr == "169.254.169.254:80" && e.Source == "kernel" }); !ok {
					t.Errorf("want the metadata attempt recorded from the refusal device, got %+v", res.Egress.Events)
				}
			}},
		{name: "an endless request head is cut off", args: []string{strconv.Itoa(port)}, code: egressClient + `
port = int(sys.argv[1])
s = socket.create_connection(('127.0.0.1', port), timeout=10)
s.sendall(b'GET / HTTP/1.1\r\nHost: allowed.test\r\nX-Fill: ')
sent = 0
try:
    while sent < (8 << 20):
        s.sendall(b'a' * 65536); sent += 65536
except OSError as e:
    pass
print(json.dumps({'sent': sent}))`,
			check: func(t *testing.T, res *Result, out map[string]any) {
				if sent, _ := out["sent"].(float64); sent >= 8<<20 {
					t.Errorf("the proxy kept reading an endless head (%v bytes)", sent)
				}
				if _, ok := findEvent(res.Egress, func(e EgressEvent) bool {
					return e.Verdict == "deny" && strings.Contains(e.Reason, "neither a TLS ClientHello nor an HTTP request")
				}); !ok {
					t.Errorf("want the cut-off head refused and recorded, got %+v", res.Egress.Events)
				}
			}},
		{name: "a connection flood is capped", code: egressClient + `
port = int(sys.argv[1])
socks, errs = [], 0
for i in range(400):
    try:
        socks.append(socket.create_connection(('127.0.0.1', port), timeout=5))
    except OSError:
        errs += 1
# Hold them until the proxy closes some (those past its cap), so the
# cap is reached however slowly the proxy accepts.
import select, time
deadline, closed = time.monotonic() + 8, 0
while time.monotonic() < deadline and not closed:
    r, _, _ = select.select(socks, [], [], 0.5)
    closed = len(r)
print(json.dumps({'opened': len(socks), 'errors': errs, 'closed_early': closed}))`, args: []string{strconv.Itoa(port)}, limits: Limits{OpenFiles: 1024},
			check: func(t *testing.T, res *Result, out map[string]any) {
				if _, ok := findEvent(res.Egress, func(e EgressEvent) bool {
					return e.Verdict == "deny" && strings.Contains(e.Reason, "connections at once")
				}); !ok {
					t.Errorf("want connections past %d refused and recorded, got %d events", maxEgressConns, len(res.Egress.Events))
				}
			}},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			res := py(t, r, a.code, Request{Command: a.args, Egress: policy, Limits: a.limits})
			var out map[string]any
			if a.check != nil && res.Reason != ReasonMemory {
				decode(t, res, &out)
			}
			a.check(t, res, out)
			if res.Egress == nil {
				t.Errorf("egress report missing")
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	for _, l := range leaks {
		t.Errorf("host service reached: %s", l)
	}
}
