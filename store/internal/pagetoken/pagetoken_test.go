package pagetoken

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

const testSortKeys = 5

func TestEncodedTokenDecodesToItself(t *testing.T) {
	for _, tok := range []Token{
		{},
		{SortKey: 4, Ascending: true, LastValue: -1 << 63, LastTrace: [16]byte{0xff, 1, 2}, Filters: 1<<64 - 1},
		{SortKey: 1, LastValue: 1<<63 - 1, LastTrace: [16]byte{15: 9}, Filters: 42},
	} {
		s := tok.Encode()
		got, err := Decode(s, testSortKeys)
		if err != nil {
			t.Fatalf("Decode(Encode(%+v) = %q): %v", tok, s, err)
		}
		if got != tok {
			t.Fatalf("Decode(Encode(%+v)) = %+v", tok, got)
		}
	}
}

func TestDecodeRejectsWhatEncodeNeverWrites(t *testing.T) {
	valid := Token{SortKey: 2, LastValue: 7, LastTrace: [16]byte{1}, Filters: 3}.Encode()
	raw := func(mutate func([]byte)) string {
		b := make([]byte, Len)
		b[0] = version
		mutate(b)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	for _, tc := range []struct {
		name, in, why string
	}{
		{"empty", "", "0 bytes"},
		{"truncated", valid[:10], "bytes, want"},
		{"too long", strings.Repeat("A", 2*Len+1), "too long"},
		{"not base64", "not a token", "illegal base64"},
		{"padding", valid + "=", "illegal base64"},
		{"unknown version", raw(func(b []byte) { b[0] = 2 }), "unknown version 2"},
		{"sort key out of range", raw(func(b []byte) { b[1] = testSortKeys }), "unknown sort key 5"},
		{"bad order flag", raw(func(b []byte) { b[2] = 2 }), "bad order flag 2"},
		// Crashers the fuzzer found in the embedded store's old decoder: the
		// base64 decoder skips newlines and, unless strict, ignores non-zero
		// trailing bits, so one token had several spellings.
		{"embedded newline", valid[:20] + "\n" + valid[20:], "not in canonical form"},
		{"non-zero trailing bits", valid[:len(valid)-1] + "B", "illegal base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.in, testSortKeys)
			if err == nil {
				t.Fatalf("Decode(%q) accepted", tc.in)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode(%q) = %v, does not wrap ErrMalformed", tc.in, err)
			}
			if !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("Decode(%q) = %q, want it to say %q", tc.in, err, tc.why)
			}
		})
	}
}

// FuzzDecode: any string is either rejected with ErrMalformed or is a token
// whose encoding gives the same string back; never a panic. The seed corpus
// in testdata/fuzz/FuzzDecode keeps the crashers found so far.
func FuzzDecode(f *testing.F) {
	valid := Token{SortKey: 1, Ascending: true, LastValue: -5, LastTrace: [16]byte{1, 2, 3}, Filters: 42}.Encode()
	for _, s := range []string{"", valid, valid[:10], "AAAA", "not a token", "////", valid + "A", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Decode(s, testSortKeys)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode(%q) = %v, does not wrap ErrMalformed", s, err)
			}
			return
		}
		if got := p.Encode(); got != s {
			t.Fatalf("Decode(%q) accepted, but encodes back as %q", s, got)
		}
		if int(p.SortKey) >= testSortKeys {
			t.Fatalf("Decode(%q) accepted sort key %d", s, p.SortKey)
		}
	})
}
