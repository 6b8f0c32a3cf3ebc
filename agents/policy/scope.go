package policy

import (
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"path"
	"strings"
)

// parseAddresses parses raw as an RFC 5322 address list and returns each
// address as prefix+local@domain (domain lower-cased). An address whose
// domain is not plain ASCII letters, digits, hyphens and dots (a Unicode
// look-alike, an IP literal), or whose local part is not a dot-atom (a
// quoted local part, which may hide an '@'), is refused: a rule like
// *@loomwork.example must mean exactly that domain.
func parseAddresses(prefix, raw string) ([]string, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, errors.New("no address")
	}
	list, err := mail.ParseAddressList(raw)
	if err != nil {
		return nil, fmt.Errorf("address list %q: %w", raw, err)
	}
	out := make([]string, 0, len(list))
	for _, a := range list {
		at := strings.LastIndexByte(a.Address, '@')
		if at < 0 {
			return nil, fmt.Errorf("address %q has no domain", a.Address)
		}
		local, domain := a.Address[:at], strings.ToLower(a.Address[at+1:])
		if !dotAtom(local) {
			return nil, fmt.Errorf("address %q: local part is not a plain dot-atom", a.Address)
		}
		if !hostName(domain) {
			return nil, fmt.Errorf("address %q: domain is not an ASCII host name", a.Address)
		}
		out = append(out, prefix+local+"@"+domain)
	}
	return out, nil
}

// parseScopeURL parses raw as an absolute http(s) URL and returns
// scheme://host[:port]/path, with the path cleaned (no "..", no empty
// segments) so a pattern over it cannot be escaped; user info, an
// unparseable or non-ASCII host are refused. Query and fragment are not
// part of the scope.
func parseScopeURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("url %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("url %q: scheme must be http or https", raw)
	}
	if u.User != nil || u.Opaque != "" {
		return "", fmt.Errorf("url %q: user info or an opaque part is not allowed", raw)
	}
	host := strings.ToLower(u.Hostname())
	if !hostName(host) {
		return "", fmt.Errorf("url %q: host is not an ASCII host name", raw)
	}
	if p := u.Port(); p != "" {
		host += ":" + p
	}
	p := path.Clean("/" + u.EscapedPath())
	return u.Scheme + "://" + host + p, nil
}

// dotAtom reports whether s is an RFC 5322 dot-atom of ASCII atext.
func dotAtom(s string) bool {
	if s == "" {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" {
			return false
		}
		for _, c := range part {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-/=?^_`{|}~", c)) {
				return false
			}
		}
	}
	return true
}

// hostName reports whether s is a DNS name of ASCII letters, digits and
// hyphens (IDNs must come as xn-- labels, so they never look like another
// domain).
func hostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
