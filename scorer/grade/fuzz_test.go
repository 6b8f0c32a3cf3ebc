package grade_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/scorer/grade"
)

// FuzzReadNumber: whatever the text, a number read is one written in it —
// its literal is in the text and parses (separators dropped) to the value.
func FuzzReadNumber(f *testing.F) {
	for _, s := range []string{"96.12", "The mean is 96.12 ms.", "1,234.5", "-3e2", "x=.5", "no digits", "1,23", "++1", "9" + strings.Repeat("9", 400), "1e999"} {
		f.Add(s, "")
	}
	f.Add("mean: 2.5 (n=3)", `mean: ([0-9.]+)`)
	f.Add("value 7", `(\d+`)
	f.Fuzz(func(t *testing.T, text, pattern string) {
		v, lit, err := grade.ReadNumber(text, pattern)
		if err != nil {
			return
		}
		if !strings.Contains(text, lit) {
			t.Fatalf("literal %q is not in %q", lit, text)
		}
		want, perr := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(lit), ",", ""), 64)
		if perr != nil || (want != v && !(want != want && v != v)) {
			t.Fatalf("literal %q parses to %v (%v), ReadNumber said %v", lit, want, perr, v)
		}
	})
}
