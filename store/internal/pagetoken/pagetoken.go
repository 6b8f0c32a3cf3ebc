// Package pagetoken encodes and decodes the opaque page tokens of
// store.Reader.ListTraces, shared by every backend so a token means the same
// thing, and is checked the same way, whichever store issued it.
//
// A token is the keyset position after the last trace of a page (that
// trace's sort value and id) plus the sort it was issued for and a hash of
// the query's filters, so a token cannot silently be applied to a different
// query. Layout before base64url (no padding):
//
//	[0]      format version (1)
//	[1]      sort key (index in the store package's sort key list)
//	[2]      1 if ascending, else 0
//	[3:11]   last sort value, int64 big-endian
//	[11:27]  last trace id, 16 bytes
//	[27:35]  filter hash, uint64 big-endian
package pagetoken

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
)

// Token is a decoded page token.
type Token struct {
	SortKey   byte // index of the sort key; Decode checks it against the caller's count
	Ascending bool
	LastValue int64    // sort value of the last trace of the page
	LastTrace [16]byte // id of the last trace of the page
	Filters   uint64   // hash of the filters the token was issued for
}

const (
	version = 1
	// Len is the length of a token before base64 encoding.
	Len = 3 + 8 + 16 + 8
)

// ErrMalformed is wrapped by every error Decode returns.
var ErrMalformed = errors.New("malformed page token (pass back next_page_token unchanged, with the same filters and sort)")

// Encode returns the token's one canonical spelling.
func (t Token) Encode() string {
	b := make([]byte, 0, Len)
	asc := byte(0)
	if t.Ascending {
		asc = 1
	}
	b = append(b, version, t.SortKey, asc)
	b = binary.BigEndian.AppendUint64(b, uint64(t.LastValue))
	b = append(b, t.LastTrace[:]...)
	b = binary.BigEndian.AppendUint64(b, t.Filters)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode parses s, accepting only what Encode writes for a sort key below
// sortKeys. Every error wraps ErrMalformed and says what is wrong.
func Decode(s string, sortKeys int) (Token, error) {
	var t Token
	if len(s) > 2*Len {
		return t, fmt.Errorf("%w: too long", ErrMalformed)
	}
	// Strict: reject non-zero trailing bits, so one token has one spelling.
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return t, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(b) != Len {
		return t, fmt.Errorf("%w: %d bytes, want %d", ErrMalformed, len(b), Len)
	}
	if b[0] != version {
		return t, fmt.Errorf("%w: unknown version %d", ErrMalformed, b[0])
	}
	if int(b[1]) >= sortKeys {
		return t, fmt.Errorf("%w: unknown sort key %d", ErrMalformed, b[1])
	}
	if b[2] > 1 {
		return t, fmt.Errorf("%w: bad order flag %d", ErrMalformed, b[2])
	}
	t.SortKey, t.Ascending = b[1], b[2] == 1
	t.LastValue = int64(binary.BigEndian.Uint64(b[3:11]))
	copy(t.LastTrace[:], b[11:27])
	t.Filters = binary.BigEndian.Uint64(b[27:35])
	// The base64 decoder skips newlines; accept only the spelling Encode writes.
	if t.Encode() != s {
		return Token{}, fmt.Errorf("%w: not in canonical form", ErrMalformed)
	}
	return t, nil
}
