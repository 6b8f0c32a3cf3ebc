package sandbox

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
)

// Egress is a run's network policy. A nil *Egress (the default) means no
// network at all: the run's namespace has only lo, down. A non-nil policy
// gives the namespace exactly one way out, a proxy owned by the runner on the
// host side, which lets a connection through only when a rule allows it:
//
//   - by name: HTTP by its Host header and TLS by its SNI, on the rule's
//     ports, reached by resolving the name on the host. Only names a rule
//     lists exactly are ever resolved on the host: a wildcard rule lists the
//     names under it that may be reached (Resolve), because resolving any
//     name the sandbox makes up would carry its labels to the host's
//     resolver and beyond (DNS exfiltration). The proxy's own resolver, the
//     only DNS server that answers inside the sandbox, answers for those
//     names alone and never asks the host;
//   - by address: a connection to an address in an allowed CIDR, on the
//     rule's ports, whatever it carries.
//
// Deny rules win over allow rules; what no rule allows is refused. Every
// attempt and its verdict is recorded in Result.Egress.
type Egress struct {
	// Allow lists what may be reached. Each rule names Host or CIDR, and Ports.
	Allow []EgressRule `json:"allow"`
	// Deny lists what must never be reached, even when an allow rule matches.
	// A deny rule without ports denies every port.
	Deny []EgressRule `json:"deny,omitempty"`
	// Credentials are injected by the proxy for their destination only; the
	// sandbox never sees them.
	Credentials []Credential `json:"credentials,omitempty"`
}

// EgressRule matches destinations by host name pattern or by address.
type EgressRule struct {
	// Host is a name ("files.example.org") or a wildcard for any name under
	// a domain ("*.example.org" matches a.example.org and a.b.example.org,
	// not example.org). Matched without case and without a trailing dot.
	Host string `json:"host,omitempty"`
	// CIDR is an address or prefix ("192.0.2.7", "192.0.2.0/24", IPv4 only).
	CIDR string `json:"cidr,omitempty"`
	// Ports the rule covers (1–65535). Required in allow rules.
	Ports []int `json:"ports,omitempty"`
	// Resolve lists, for a wildcard allow rule (required there, refused
	// elsewhere), the exact names under it the sandbox may reach: only
	// they are resolved on the host. A name under the wildcard that is not
	// listed is refused without any DNS query leaving the proxy, so
	// sandboxed code cannot smuggle data out as labels
	// ("<data>.example.org") through the host's resolver.
	Resolve []string `json:"resolve,omitempty"`

	prefix netip.Prefix
}

// Credential is a secret the proxy adds to requests for one destination.
// The sandbox speaks plain HTTP to the proxy for that destination; the proxy
// removes any copy of Header the sandbox sent, sets it to Value and forwards
// the request, as the TLS client of the upstream when UpstreamTLS is set.
type Credential struct {
	// Name identifies the credential in records (never the value).
	Name string `json:"name"`
	// Host is the exact destination name; Port its port as the sandbox
	// addresses it (the upstream's port too).
	Host string `json:"host"`
	Port int    `json:"port"`
	// Header is the header to set; empty means Authorization.
	Header string `json:"header,omitempty"`
	// Value is the header's value. It is never marshalled, printed or logged.
	Value Secret `json:"-"`
	// ValueEnv names a host environment variable holding Value, for
	// policies read from a file; it is read on the host by
	// LoadEgressCredentials and never passed to the sandbox.
	ValueEnv string `json:"value_env,omitempty"`
	// UpstreamTLS makes the proxy reach the upstream over TLS (verifying it
	// against Config.EgressRootCAs, or the host's roots when nil).
	UpstreamTLS bool `json:"upstream_tls,omitempty"`
}

// Secret is a credential value. Every way of printing it — fmt verbs, JSON,
// slog — gives "[redacted]".
type Secret string

const redacted = "[redacted]"

func (Secret) String() string               { return redacted }
func (Secret) GoString() string             { return redacted }
func (Secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (Secret) MarshalJSON() ([]byte, error) { return json.Marshal(redacted) }
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }
func (s Secret) reveal() string             { return string(s) }
func (c Credential) header() string         { return cmp.Or(c.Header, "Authorization") }
func (r EgressRule) covers(port int) bool   { return len(r.Ports) == 0 || slices.Contains(r.Ports, port) }
func (r EgressRule) isHost() bool           { return r.Host != "" }
func (r EgressRule) describe(kind string, i int) string {
	what := r.Host
	if what == "" {
		what = r.CIDR
	}
	return fmt.Sprintf("%s[%d] %s", kind, i, what)
}

// LoadEgressCredentials fills each credential's Value from its ValueEnv
// using getenv (os.Getenv on the host), naming the missing ones.
func (e *Egress) LoadEgressCredentials(getenv func(string) string) error {
	if e == nil {
		return nil
	}
	var errs []error
	for i := range e.Credentials {
		c := &e.Credentials[i]
		if c.ValueEnv == "" {
			continue
		}
		v := getenv(c.ValueEnv)
		if v == "" {
			errs = append(errs, fmt.Errorf("egress.credentials[%d] (%s): environment variable %s is empty or unset", i, c.Name, c.ValueEnv))
			continue
		}
		c.Value = Secret(v)
	}
	return errors.Join(errs...)
}

// normHost lowers a host name and drops a trailing dot.
func normHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

func validHostPattern(h string) bool {
	name := strings.TrimPrefix(h, "*.")
	if name == "" || len(name) > 253 || strings.Contains(name, "*") {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// allows reports whether allow rule r (prepared) lets host be reached: an
// exact rule names it, a wildcard rule lists it in Resolve.
func (r EgressRule) allows(host string) bool {
	if !r.isHost() || !hostMatches(r.Host, host) {
		return false
	}
	return !strings.HasPrefix(r.Host, "*.") || slices.Contains(r.Resolve, normHost(host))
}

// unlisted is the refusal reason when host falls under a wildcard allow rule
// that does not list it ("" when none does).
func (e *Egress) unlisted(host string) string {
	for i, r := range e.Allow {
		if r.isHost() && strings.HasPrefix(r.Host, "*.") && hostMatches(r.Host, host) && !r.allows(host) {
			return fmt.Sprintf("; %s does not list it in resolve (names under a wildcard are resolved on the host only when listed)", r.describe("allow", i))
		}
	}
	return ""
}

// hostMatches reports whether pattern (normalised) matches name.
func hostMatches(pattern, name string) bool {
	name = normHost(name)
	if rest, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(name, "."+rest)
	}
	return name == pattern
}

// Validate reports every problem of the policy, naming the rule.
func (e *Egress) Validate() error {
	_, err := e.prepared()
	return err
}

// prepared returns a validated copy of the policy with host names
// normalised and CIDRs parsed; nil stays nil. The caller's policy is not
// changed, so one policy may serve concurrent runs.
func (e *Egress) prepared() (*Egress, error) {
	if e == nil {
		return nil, nil
	}
	c := &Egress{
		Allow:       slices.Clone(e.Allow),
		Deny:        slices.Clone(e.Deny),
		Credentials: slices.Clone(e.Credentials),
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return c, nil
}

func (e *Egress) check() error {
	var errs []error
	check := func(kind string, rules []EgressRule, needPorts bool) {
		for i := range rules {
			r := &rules[i]
			name := fmt.Sprintf("egress.%s[%d]", kind, i)
			switch {
			case r.Host != "" && r.CIDR != "":
				errs = append(errs, fmt.Errorf("%s: set host or cidr, not both", name))
			case r.Host == "" && r.CIDR == "":
				errs = append(errs, fmt.Errorf("%s: set host or cidr", name))
			case r.Host != "":
				r.Host = normHost(r.Host)
				if !validHostPattern(r.Host) {
					errs = append(errs, fmt.Errorf("%s: host %q is not a name or a leading-wildcard pattern like *.example.org", name, r.Host))
				}
				wild := strings.HasPrefix(r.Host, "*.")
				switch {
				case wild && needPorts && len(r.Resolve) == 0:
					errs = append(errs, fmt.Errorf("%s: host %q: a wildcard allow rule must list in resolve the names under it that may be reached (only listed names are resolved on the host)", name, r.Host))
				case (!wild || !needPorts) && len(r.Resolve) > 0:
					errs = append(errs, fmt.Errorf("%s: resolve is only for a wildcard allow rule", name))
				}
				r.Resolve = slices.Clone(r.Resolve)
				for j, n := range r.Resolve {
					r.Resolve[j] = normHost(n)
					if n := r.Resolve[j]; !validHostPattern(n) || strings.HasPrefix(n, "*.") || !hostMatches(r.Host, n) {
						errs = append(errs, fmt.Errorf("%s: resolve[%d] %q is not an exact name under %s", name, j, n, r.Host))
					}
				}
			default:
				p, err := netip.ParsePrefix(r.CIDR)
				if err != nil {
					a, aerr := netip.ParseAddr(r.CIDR)
					if aerr != nil {
						errs = append(errs, fmt.Errorf("%s: cidr %q: %w", name, r.CIDR, err))
						continue
					}
					p = netip.PrefixFrom(a, a.BitLen())
				}
				if !p.Addr().Is4() {
					errs = append(errs, fmt.Errorf("%s: cidr %q: only IPv4 is supported", name, r.CIDR))
					continue
				}
				r.prefix = p.Masked()
			}
			if needPorts && len(r.Ports) == 0 {
				errs = append(errs, fmt.Errorf("%s: ports: an allow rule must list its ports", name))
			}
			for _, p := range r.Ports {
				if p < 1 || p > 65535 {
					errs = append(errs, fmt.Errorf("%s: port %d out of range 1-65535", name, p))
				}
			}
		}
	}
	check("allow", e.Allow, true)
	check("deny", e.Deny, false)
	if len(e.Allow) == 0 {
		errs = append(errs, errors.New("egress.allow: empty (use no egress policy for no network)"))
	}
	for _, r := range e.Allow {
		if r.prefix.IsValid() && r.prefix.Contains(proxyAddr) {
			errs = append(errs, fmt.Errorf("egress.allow %s: contains %s, the proxy's address inside the sandbox", r.CIDR, proxyAddr))
		}
		if r.prefix.IsValid() && r.prefix.Contains(tunAddr) {
			errs = append(errs, fmt.Errorf("egress.allow %s: contains %s, the refusal device's address inside the sandbox", r.CIDR, tunAddr))
		}
		if slices.Contains(r.Ports, 53) && r.prefix.IsValid() && r.prefix.Contains(proxyAddr) {
			errs = append(errs, fmt.Errorf("egress.allow %s: port 53 of the proxy's address is its resolver", r.CIDR))
		}
	}
	for i := range e.Credentials {
		c := &e.Credentials[i]
		name := fmt.Sprintf("egress.credentials[%d]", i)
		c.Host = normHost(c.Host)
		if c.Name == "" {
			errs = append(errs, fmt.Errorf("%s: name is required (records name the credential, never its value)", name))
		}
		if !validHostPattern(c.Host) || strings.HasPrefix(c.Host, "*.") {
			errs = append(errs, fmt.Errorf("%s: host %q must be an exact name", name, c.Host))
		}
		if c.Port < 1 || c.Port > 65535 {
			errs = append(errs, fmt.Errorf("%s: port %d out of range 1-65535", name, c.Port))
		}
		if h := c.header(); strings.ContainsAny(h, " :\r\n\t") {
			errs = append(errs, fmt.Errorf("%s: header %q is not a header name", name, h))
		}
		if c.Value == "" && c.ValueEnv == "" {
			errs = append(errs, fmt.Errorf("%s: no value (set Value, or value_env and load it)", name))
		}
		if strings.ContainsAny(string(c.Value), "\r\n\x00") {
			errs = append(errs, fmt.Errorf("%s: value contains CR, LF or NUL", name))
		}
		if v, _ := e.decide(c.Host, netip.Addr{}, c.Port); !v.allowed {
			errs = append(errs, fmt.Errorf("%s: %s:%d is not allowed by the policy (%s)", name, c.Host, c.Port, v.reason))
		}
	}
	return errors.Join(errs...)
}

// ports lists every port some allow rule covers, sorted.
func (e *Egress) ports() []int {
	var out []int
	for _, r := range e.Allow {
		for _, p := range r.Ports {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// prefixes lists the allowed CIDRs (made local inside the sandbox so the
// proxy receives connections to them).
func (e *Egress) prefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, r := range e.Allow {
		if r.prefix.IsValid() {
			out = append(out, r.prefix)
		}
	}
	return out
}

type verdict struct {
	allowed bool
	rule    string
	reason  string
}

// decide judges a destination named by host (may be empty) and/or addr (may
// be invalid) on port. Deny rules first; then the first allow rule that
// matches; else refused.
func (e *Egress) decide(host string, addr netip.Addr, port int) (verdict, bool) {
	host = normHost(host)
	for i, r := range e.Deny {
		if !r.covers(port) {
			continue
		}
		if r.isHost() && host != "" && hostMatches(r.Host, host) || r.prefix.IsValid() && addr.IsValid() && r.prefix.Contains(addr) {
			d := r.describe("deny", i)
			return verdict{rule: d, reason: "matches " + d}, true
		}
	}
	for i, r := range e.Allow {
		if !r.covers(port) {
			continue
		}
		if r.isHost() && host != "" && r.allows(host) || !r.isHost() && addr.IsValid() && r.prefix.Contains(addr) {
			d := r.describe("allow", i)
			return verdict{allowed: true, rule: d, reason: "matches " + d}, true
		}
	}
	what := host
	if what == "" {
		what = addr.String()
	}
	return verdict{reason: fmt.Sprintf("no allow rule matches %s port %d%s", what, port, e.unlisted(host))}, false
}

// credentialFor returns the credential for host:port, if any.
func (e *Egress) credentialFor(host string, port int) *Credential {
	host = normHost(host)
	for i := range e.Credentials {
		if e.Credentials[i].Host == host && e.Credentials[i].Port == port {
			return &e.Credentials[i]
		}
	}
	return nil
}

// publicAddr reports whether a resolved upstream address may be dialled by
// name alone: loopback, private, link-local (cloud metadata), multicast and
// unspecified addresses need an allow rule naming their CIDR, so a name
// cannot be pointed (DNS rebinding, a hostile record) at the host or its
// network.
func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	return !(a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsMulticast() || a.IsUnspecified() || a.IsInterfaceLocalMulticast() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(a))
}

// upstreamAllowed judges an address a name resolved to on the host.
func (e *Egress) upstreamAllowed(addr netip.Addr, port int) (bool, string) {
	addr = addr.Unmap()
	for i, r := range e.Deny {
		if r.prefix.IsValid() && r.prefix.Contains(addr) && r.covers(port) {
			return false, fmt.Sprintf("resolves to %s, which matches %s", addr, r.describe("deny", i))
		}
	}
	if publicAddr(addr) {
		return true, ""
	}
	for _, r := range e.Allow {
		if r.prefix.IsValid() && r.prefix.Contains(addr) && r.covers(port) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("resolves to %s, a loopback/private/link-local address no allow cidr rule covers", addr)
}

// ParseEgress reads a policy from JSON (the format of Egress: allow, deny,
// credentials with value_env, never a value), refusing unknown fields and
// trailing data, and validates it. name is used in errors. Credentials'
// values are not read here: call LoadEgressCredentials.
func ParseEgress(r io.Reader, name string) (*Egress, error) {
	dec := json.NewDecoder(io.LimitReader(r, 1<<20))
	dec.DisallowUnknownFields()
	var e Egress
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("egress policy %s: %w", name, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("egress policy %s: data after the policy object", name)
	}
	if _, err := e.prepared(); err != nil {
		return nil, fmt.Errorf("egress policy %s: %w", name, err)
	}
	return &e, nil
}
