package clickhouse

import (
	"slices"
	"testing"
)

// searchTokens splits as ClickHouse's hasToken and tokenbf_v1 do: ASCII
// letters and digits and non-ASCII bytes make tokens, any other ASCII byte
// separates them; the longest three come first. A token hasToken refuses
// (one with a separator in it) would fail the whole search.
func TestSearchTokensSplitAsClickHouseDoes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{`"call_533240cbe6b04775e16b"`, []string{"533240cbe6b04775e16b", "call"}},
		{`"gen_ai.request.model":`, []string{"request", "model", "gen"}},
		{`"café déjà"`, []string{"déjà", "café"}},
		{`"a-b-a-b"`, []string{"a", "b"}},
		{`""`, nil},
		{`"x\n\"y\""`, []string{"n", "x", "y"}}, // JSON escapes split tokens as stored
	} {
		got := searchTokens(c.in)
		if !slices.Equal(got, c.want) {
			t.Errorf("searchTokens(%s) = %q, want %q", c.in, got, c.want)
		}
		for _, tok := range got {
			for i := 0; i < len(tok); i++ {
				if b := tok[i]; b < 0x80 && !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9') {
					t.Errorf("token %q holds separator %q", tok, b)
				}
			}
		}
	}
}
