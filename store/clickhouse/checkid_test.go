package clickhouse

import (
	"strings"
	"testing"
)

// checkIDReference is checkID's rule written plainly: 2n lower-case hex
// digits, not all '0'.
func checkIDReference(id string, n int) bool {
	if len(id) != 2*n {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return strings.Trim(id, "0") != ""
}

// FuzzCheckID holds checkID's branch-free pass to the plain rule, for span
// ids (8 bytes) and trace ids (16).
func FuzzCheckID(f *testing.F) {
	for _, s := range []string{
		"0123456789abcdef", "0000000000000000", "000000000000000a", "0123456789ABCDEF",
		"0123456789abcdeg", "0123456789abcde", "00000000000000000000000000000001",
		"0123456789abcdef0123456789abcdef", "0123456789abcdef\x000123456789abcde", "a0000000000000000000000000000000",
		"ffffffffffffffff", "/0000000000000000", "`000000000000000",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		for _, n := range []int{8, 16} {
			err := checkID(id, n)
			if want := checkIDReference(id, n); (err == nil) != want {
				t.Fatalf("checkID(%q, %d) = %v, want ok=%v", id, n, err, want)
			}
		}
	})
}
