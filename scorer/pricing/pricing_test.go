package pricing

import (
	"math"
	"strings"
	"testing"
)

func TestLookupMatchesSnapshotsDeliberately(t *testing.T) {
	tab := Default()
	cases := []struct {
		model, want string // want "" = unknown
	}{
		{"gpt-4o", "gpt-4o"},
		{"GPT-4o", "gpt-4o"},
		{"gpt-4o-2024-08-06", "gpt-4o"},
		{"gpt-4o-2024-05-13", "gpt-4o-2024-05-13"}, // its own, older price wins over the family
		{"gpt-4o-mini-2024-07-18", "gpt-4o-mini"},  // never gpt-4o by prefix
		{"gpt-4o-audio-preview", ""},
		{"gpt-4o-mini-tts", ""},
		{"openai/gpt-4.1-mini", "gpt-4.1-mini"},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4-5"},
		{"claude-3-5-haiku@20241022", "claude-3-5-haiku"},
		{"claude-3-5-sonnet-latest", "claude-3-5-sonnet"},
		{"claude-opus-4-0", "claude-opus-4"},
		{"models/gemini-2.5-flash", "gemini-2.5-flash"},
		{"gemini-2.0-flash-001", "gemini-2.0-flash"},
		{"gemini-2.5-flash-lite", "gemini-2.5-flash-lite"}, // not gemini-2.5-flash
		{"gemini-2.5", ""},
		{"gpt-5-2025-08-07", "gpt-5"},
		{"", ""},
		{"-20250929", ""},
	}
	for _, c := range cases {
		m, name, ok := tab.Lookup(c.model)
		if c.want == "" {
			if ok {
				t.Errorf("Lookup(%q) = %q, want unknown", c.model, name)
			}
			continue
		}
		if !ok || name != c.want || m == nil {
			t.Errorf("Lookup(%q) = %q, %v; want %q", c.model, name, ok, c.want)
		}
	}
}

func TestCostPricesCacheAndLongContextApart(t *testing.T) {
	tab := Default()
	m, _, _ := tab.Lookup("claude-sonnet-4-5")
	got := m.Cost(Usage{Input: 1000, CacheRead: 10000, CacheCreation: 2000, Output: 500})
	want := (1000*3.0 + 10000*0.30 + 2000*3.75 + 500*15.0) / 1e6
	if math.Abs(got-want) > 1e-12 {
		t.Errorf("short prompt cost = %v, want %v", got, want)
	}
	// 150k uncached + 60k cache read: over the 200k threshold, every token
	// is billed at the long-context tier.
	got = m.Cost(Usage{Input: 150000, CacheRead: 60000, Output: 1000})
	want = (150000*6.0 + 60000*0.60 + 1000*22.50) / 1e6
	if math.Abs(got-want) > 1e-12 {
		t.Errorf("long prompt cost = %v, want %v", got, want)
	}
	// No published cache rate: cached tokens cost the input rate.
	old, _, _ := tab.Lookup("gpt-4o-2024-05-13")
	if got, want := old.Cost(Usage{CacheRead: 1e6}), 5.0; math.Abs(got-want) > 1e-12 {
		t.Errorf("uncached-rate model cost = %v, want %v", got, want)
	}
}

func TestEmbeddedTableIsDatedAndSourced(t *testing.T) {
	tab := Default()
	if tab.AsOf == "" || len(tab.Sources) < 3 {
		t.Fatalf("embedded table lacks a date or sources: %q %v", tab.AsOf, tab.Sources)
	}
	for _, p := range []string{"gpt-4o", "claude-sonnet-4-5", "gemini-2.5-pro"} {
		if _, _, ok := tab.Lookup(p); !ok {
			t.Errorf("embedded table has no %s", p)
		}
	}
}

func TestOverrideFileMergesOrReplaces(t *testing.T) {
	merge := `{"as_of":"2030-01-01","models":[{"provider":"acme","model":"gpt-4o","input":1,"output":2},{"model":"acme-1","input":3,"output":4}]}`
	tab, err := ParseOverride(Default(), strings.NewReader(merge), "merge.json")
	if err != nil {
		t.Fatal(err)
	}
	if m, _, _ := tab.Lookup("gpt-4o-2024-08-06"); m == nil || m.Input != 1 {
		t.Errorf("override did not replace gpt-4o: %+v", m)
	}
	if _, _, ok := tab.Lookup("claude-3-haiku"); !ok {
		t.Error("merge dropped a built-in model")
	}
	repl := `{"as_of":"2030-01-01","replace":true,"models":[{"model":"acme-1","input":3,"output":4}]}`
	tab, err = ParseOverride(Default(), strings.NewReader(repl), "replace.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := tab.Lookup("gpt-4o"); ok {
		t.Error("replace kept a built-in model")
	}
}

func TestBadPriceFilesNameTheProblem(t *testing.T) {
	cases := map[string]string{
		`{"models":[{"model":"x","input":1,"output":2,"oops":1}]}`: `unknown field "oops"`,
		`{"models":[{"model":"x","input":-1,"output":2}]}`:         `"input"`,
		`{"models":[{"model":"","input":1,"output":2}]}`:           `"model"`,
		`{"models":[]}`: `no models`,
		`{"models":[{"model":"x","input":1,"output":2},{"model":"X","input":1,"output":2}]}`:    `listed twice`,
		`{"models":[{"model":"x","input":"1","output":2}]}`:                                     `input`,
		`{"models":[{"model":"x","input":1,"output":2,"long_context":{"input":1,"output":1}}]}`: `threshold_input_tokens`,
	}
	const name = "prices/p.json"
	for body, want := range cases {
		_, err := ParseOverride(nil, strings.NewReader(body), name)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), name) {
			t.Errorf("ParseOverride(%s) error = %v, want it to name %q and the file", body, err, want)
		}
	}
}

func TestModelNamesWithSlashesStillMatchExactly(t *testing.T) {
	tab, err := ParseOverride(nil, strings.NewReader(`{"models":[{"model":"acme/large","input":1,"output":2}]}`), "p.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := tab.Lookup("acme/large"); !ok {
		t.Error("exact name with a slash not found")
	}
}

func TestSplitSubtractsCacheFromInputUnlessTheSenderUsedAnthropicsRawCounts(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		in, read, create, out int64
		want                  Usage
		raw                   bool
	}{
		{"GenAI convention: input counts the cache", 1000, 600, 100, 50, Usage{Input: 300, CacheRead: 600, CacheCreation: 100, Output: 50}, false},
		{"Anthropic raw: input excludes the cache", 20, 600, 100, 50, Usage{Input: 20, CacheRead: 600, CacheCreation: 100, Output: 50}, true},
		{"negative counts read as 0", -5, -1, 0, -2, Usage{}, false},
	} {
		got, raw := Split(tc.in, tc.read, tc.create, tc.out)
		if got != tc.want || raw != tc.raw {
			t.Errorf("%s: Split = %+v, raw %v; want %+v, raw %v", tc.name, got, raw, tc.want, tc.raw)
		}
	}
}

// A table's fingerprint is the same for the same prices and changes with
// any rate: a view keeping what it priced (a huge trace's rollup) reuses
// it only under the prices it was computed with.
func TestFingerprintFollowsThePrices(t *testing.T) {
	if Default().Fingerprint() != Default().Fingerprint() {
		t.Fatal("two loads of the built-in table fingerprint differently")
	}
	one := `{"as_of":"2030-01-01","models":[{"model":"gpt-4o","input":1,"output":2}]}`
	two := `{"as_of":"2030-01-01","models":[{"model":"gpt-4o","input":1,"output":3}]}`
	a, err := ParseOverride(Default(), strings.NewReader(one), "a.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseOverride(Default(), strings.NewReader(two), "b.json")
	if err != nil {
		t.Fatal(err)
	}
	fd, fa, fb := Default().Fingerprint(), a.Fingerprint(), b.Fingerprint()
	if fd == fa || fa == fb || fd == fb {
		t.Errorf("fingerprints %s (built-in), %s, %s (one output rate apart): want three", fd, fa, fb)
	}
	var none *Table
	if none.Fingerprint() == fd {
		t.Error("no table fingerprints as the built-in one")
	}
}
