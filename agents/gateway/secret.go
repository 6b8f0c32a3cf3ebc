package gateway

import (
	"fmt"
	"log/slog"
	"strings"
)

// redacted is what a Secret prints as, whichever way it is printed.
const redacted = "[REDACTED]"

// Secret holds a credential. It prints, logs and marshals as "[REDACTED]", so
// a config or request struct that carries one can be logged or journaled
// without leaking it; Reveal is the only way to the value, and the clients
// call it only to set the authentication header.
type Secret struct {
	v string
}

// NewSecret wraps a credential value.
func NewSecret(v string) Secret { return Secret{v: v} }

// Reveal returns the credential. Use it only to authenticate a request.
func (s Secret) Reveal() string { return s.v }

// IsZero reports whether no credential is held.
func (s Secret) IsZero() bool { return s.v == "" }

func (s Secret) String() string   { return redacted }
func (s Secret) GoString() string { return redacted }

// Format makes every fmt verb (%v, %+v, %#v, %s, %q, %x ...) print the
// redaction marker.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue keeps the value out of slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON keeps the value out of journals and JSON logs.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText keeps the value out of text encoders.
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// Scrub replaces every occurrence of the credential in text with the
// redaction marker. Clients run provider error messages through it, because
// some servers echo (part of) a rejected key back.
func (s Secret) Scrub(text string) string {
	if len(s.v) < 4 { // too short to be a real key; replacing would mangle text
		return text
	}
	return strings.ReplaceAll(text, s.v, redacted)
}
