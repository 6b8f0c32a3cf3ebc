package collector

import (
	"crypto/subtle"
	"strings"
)

// bearerOK compares a presented "Bearer TOKEN" value in constant time. The
// scheme is case-insensitive (RFC 9110 §11.1): "bearer TOKEN" is accepted.
func bearerOK(header, token string) bool {
	got, ok := bearerToken(header)
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// bearerToken returns the token of an "Authorization: Bearer TOKEN" value,
// the scheme matched case-insensitively (RFC 9110 §11.1).
func bearerToken(header string) (string, bool) {
	const scheme = "bearer "
	if len(header) < len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return "", false
	}
	return header[len(scheme):], true
}
