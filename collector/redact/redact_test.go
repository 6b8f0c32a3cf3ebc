package redact

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

var all = Config{Builtins: Builtins, Custom: []Custom{{Name: "ticket", Pattern: `TICKET-[0-9]{4,}`}}}

func mustNew(t testing.TB, c Config) *Redactor {
	t.Helper()
	r, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// cardRuns returns the maximal digit runs (single spaces or dashes between
// digits) of s that are 13-19 digits long and pass Luhn: what Card must
// leave none of. Written independently of the regexp.
func cardRuns(s string) []string {
	var out []string
	i := 0
	for i < len(s) {
		if s[i] < '0' || s[i] > '9' {
			i++
			continue
		}
		j, last := i, i
		var digits []byte
		for j < len(s) {
			c := s[j]
			if c >= '0' && c <= '9' {
				digits = append(digits, c-'0')
				last = j
				j++
				continue
			}
			if (c == ' ' || c == '-') && j+1 < len(s) && s[j+1] >= '0' && s[j+1] <= '9' {
				j++
				continue
			}
			break
		}
		if n := len(digits); n >= 13 && n <= 19 && luhnRef(digits) {
			out = append(out, s[i:last+1])
		}
		i = last + 1
	}
	return out
}

func luhnRef(d []byte) bool {
	sum, double := 0, false
	for i := len(d) - 1; i >= 0; i-- {
		x := int(d[i])
		if double {
			x *= 2
			if x > 9 {
				x -= 9
			}
		}
		sum += x
		double = !double
	}
	return sum%10 == 0
}

var (
	emailRef  = regexp.MustCompile(builtinRE[Email])
	apiKeyRef = regexp.MustCompile(builtinRE[APIKey])
	ticketRef = regexp.MustCompile(`TICKET-[0-9]{4,}`)
)

// survivors lists pattern matches left in s.
func survivors(s string) []string {
	out := cardRuns(s)
	out = append(out, emailRef.FindAllString(s, -1)...)
	out = append(out, apiKeyRef.FindAllString(s, -1)...)
	out = append(out, ticketRef.FindAllString(s, -1)...)
	return out
}

func TestRedactsEachPatternAndCounts(t *testing.T) {
	r := mustNew(t, all)
	in := "mail bob.smith+x@example.co.uk, key sk-proj-abcdefghijklmnop1234, card 4111 1111 1111 1111, " +
		"not a card 4111 1111 1111 1112, ticket TICKET-12345, aws AKIAABCDEFGHIJKLMNOP, Authorization: Bearer abcdefghijklmnopqrstuv"
	got, changed := r.String(in)
	if !changed {
		t.Fatal("nothing redacted")
	}
	want := "mail [REDACTED:email], key [REDACTED:api_key], card [REDACTED:card], " +
		"not a card 4111 1111 1111 1112, ticket [REDACTED:ticket], aws [REDACTED:api_key], Authorization: [REDACTED:api_key]"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	c := r.Counts()
	if c[Email] != 1 || c[APIKey] != 3 || c[Card] != 1 || c["ticket"] != 1 {
		t.Errorf("counts %v; want email 1, api_key 3, card 1, ticket 1", c)
	}
}

func TestSpanRedactsEveryStringItCarries(t *testing.T) {
	r := mustNew(t, all)
	sp := store.Span{
		Name:          "call for alice@example.com",
		StatusMessage: "401 for sk-abcdefghijklmnopqrstu",
		Attributes: store.Attributes{
			semconv.AttrInputMessages: `[{"role":"user","parts":[{"type":"text","content":"my card is 5500-0000-0000-0004"}]}]`,
			"list":                    []any{"ok", "carol@example.org", map[string]any{"deep": "TICKET-99999"}},
			"n":                       int64(4111111111111111),
		},
		ResourceAttributes: store.Attributes{"owner": "dave@example.net"},
		ScopeAttributes:    store.Attributes{"token": "lwk_" + strings.Repeat("A", 43)},
		Events:             []store.Event{{Name: "e", Time: time.Unix(1, 0), Attributes: store.Attributes{"exception.message": "leaked xoxb-1234567890-abc"}}},
		Links:              []store.Link{{Attributes: store.Attributes{"why": "erin@example.com"}}},
	}
	if n := r.Span(&sp); n != 10 {
		t.Errorf("Span changed %d values, want 10", n)
	}
	b, err := sp.Attributes.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	all := sp.Name + sp.StatusMessage + string(b)
	for _, a := range []store.Attributes{sp.ResourceAttributes, sp.ScopeAttributes, sp.Events[0].Attributes, sp.Links[0].Attributes} {
		b, _ := a.MarshalJSON()
		all += string(b)
	}
	if s := survivors(all); len(s) > 0 {
		t.Errorf("survived: %q in %s", s, all)
	}
	if sp.Attributes["n"] != "[REDACTED:card]" {
		t.Errorf("a card number sent as a number: %v, want it redacted", sp.Attributes["n"])
	}
}

// TestPatternsSplitAcrossAttributeBoundaries: each value is redacted on its
// own. A secret split in two attributes leaves two fragments that are not
// matches (stored as sent, and no stored value matches a pattern); a value
// holding the whole secret is redacted even when its neighbours hold
// fragments of another; a match that straddles the join of two list items
// is not reassembled.
func TestPatternsSplitAcrossAttributeBoundaries(t *testing.T) {
	r := mustNew(t, all)
	sp := store.Span{Attributes: store.Attributes{
		"a.part1": "sk-abcdefgh",                   // 8 of the 16 characters a key needs
		"a.part2": "ijklmnopqrst",                  // the rest, without the prefix
		"b.user":  "frank",                         // "frank" + "@example.com" would be an address
		"b.host":  "@example.com",                  // no local part: not an address
		"c.list":  []any{"4111 1111", "1111 1111"}, // a card split in two list items
		"d.whole": "x sk-abcdefghijklmnopqrst y",
	}}
	r.Span(&sp)
	for k, want := range map[string]any{"a.part1": "sk-abcdefgh", "a.part2": "ijklmnopqrst", "b.user": "frank", "b.host": "@example.com",
		"d.whole": "x [REDACTED:api_key] y"} {
		if sp.Attributes[k] != want {
			t.Errorf("%s = %q, want %q", k, sp.Attributes[k], want)
		}
	}
	if l := sp.Attributes["c.list"].([]any); l[0] != "4111 1111" || l[1] != "1111 1111" {
		t.Errorf("c.list = %q: fragments are not matches and stay", l)
	}
	for k, v := range sp.Attributes {
		if s, ok := v.(string); ok && len(survivors(s)) > 0 {
			t.Errorf("%s: %q still matches", k, s)
		}
	}
}

// TestHugeAndHostileValues: a 4 MiB value full of near-matches is
// redacted in linear time; pathological inputs (long digit runs, '@'
// floods, nested markers) leave no match behind.
func TestHugeAndHostileValues(t *testing.T) {
	testtier.Slow(t)
	r := mustNew(t, all)
	// make test redacts 1 MiB against a quarter of the long tier's bound
	// for 4 MiB (the same rate): a superlinear pass misses it either way.
	size, bound := testtier.Pick(1<<20, 4<<20), testtier.Pick(15*time.Second, 60*time.Second)
	var b strings.Builder
	for b.Len() < size {
		b.WriteString("aaaa@bbbb.cc 4111111111111111 sk-")
		b.WriteString(strings.Repeat("x", 15)) // one short of a key
		b.WriteString(" 1234 5678 9012 3456 7890 1234 5678 ")
	}
	start := time.Now()
	out, _ := r.String(b.String())
	el := time.Since(start)
	t.Logf("%d MiB value redacted in %s (%d → %d bytes)", size>>20, el, b.Len(), len(out))
	if s := survivors(out); len(s) > 0 {
		t.Fatalf("%d matches survived, e.g. %q", len(s), s[0])
	}
	if el > bound {
		t.Errorf("took %s: not linear", el)
	}
	// The hostile shapes at a quarter of their long-tier length in make
	// test (256 KiB of "@" instead of 1 MiB, …): what they check is that
	// nothing survives, which holds at any length.
	q := testtier.Pick(4, 1)
	for _, in := range []string{
		strings.Repeat("@", 1<<20/q),
		strings.Repeat("a@", 1<<18/q) + "b.cc",
		strings.Repeat("1", 1<<20/q),
		strings.Repeat("4111 ", 1<<16/q),
		strings.Repeat("[REDACTED:email]", 1000) + "x@y.zz",
		"TICKET-1234TICKET-5678",
	} {
		out, _ := r.String(in)
		if s := survivors(out); len(s) > 0 {
			t.Errorf("input %.40q…: %q survived", in, s[0])
		}
	}
}

func TestSelfMatchingCustomPatternEmptiesTheValue(t *testing.T) {
	r := mustNew(t, Config{Custom: []Custom{{Name: "red", Pattern: `RED`}}})
	if out, _ := r.String("a RED b"); out != "" {
		t.Errorf("got %q; a pattern matching its own marker must empty the value", out)
	}
}

func TestConfigValidateNamesTheBadPattern(t *testing.T) {
	err := Config{Builtins: []string{"emial"}, Custom: []Custom{{Name: "x", Pattern: "("}, {Name: "y", Pattern: "a*"}}}.Validate()
	for _, want := range []string{`redact.builtins[0]: unknown pattern "emial"`, "redact.custom[0] (x).pattern", `redact.custom[1] (y).pattern: "a*" matches the empty string`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v; want it to contain %q", err, want)
		}
	}
}

func TestDropContentKeepsOnlyNonContent(t *testing.T) {
	sp := store.Span{Attributes: store.Attributes{
		semconv.AttrInputMessages: "x", semconv.AttrOutputMessages: "x", semconv.AttrToolCallArguments: "x",
		semconv.AttrToolCallResult: "x", semconv.OpenInferenceInputValue: "x", semconv.OpenInferenceOutputValue: "x",
		semconv.OpenInferenceInputMessagesPrefix + "0.message.content": "x", semconv.AttrSystemInstructions: "x",
		semconv.AttrRequestModel: "gpt",
	}, Events: []store.Event{{Attributes: store.Attributes{semconv.AttrOutputMessages: "x", "k": "v"}}}}
	if n := DropContent(&sp); n != 9 {
		t.Errorf("dropped %d, want 9", n)
	}
	if len(sp.Attributes) != 1 || sp.Attributes[semconv.AttrRequestModel] != "gpt" || len(sp.Events[0].Attributes) != 1 {
		t.Errorf("left %v and %v", sp.Attributes, sp.Events[0].Attributes)
	}
}

// FuzzRedactProperties: for any input, (1) no pattern match survives
// redaction, (2) an input no pattern matches comes back unchanged, and
// (3) redacting twice changes nothing more.
func FuzzRedactProperties(f *testing.F) {
	for _, s := range []string{"", "plain text", "bob@example.com", "4111 1111 1111 1111", "4111-1111-1111-1111x5500000000000004",
		"sk-ant-0123456789abcdef0123", "Bearer abcdefghijklmnopqrstu==", "TICKET-0000", "a@b.cc@d.ee", "1@2.ab 3@4.cd",
		"40128888888818814111111111111111", "[REDACTED:email]@x.yy"} {
		f.Add(s)
	}
	r := mustNew(f, all)
	f.Fuzz(func(t *testing.T, in string) {
		out, changed := r.String(in)
		if s := survivors(out); len(s) > 0 {
			t.Fatalf("redact(%q) = %q: %q survived", in, out, s)
		}
		if len(survivors(in)) == 0 && (changed || out != in) {
			t.Fatalf("redact(%q) = %q: an input without matches changed", in, out)
		}
		if again, ch := r.String(out); ch || again != out {
			t.Fatalf("redacting %q again gave %q", out, again)
		}
	})
}

// FuzzFindersMatchTheRegexps: the hand-written finders return exactly what
// the built-in regexps' FindAllStringIndex returns.
func FuzzFindersMatchTheRegexps(f *testing.F) {
	for _, s := range []string{"a@b.cc", "a@b.c0m.org", "x.y@z..ab", "a@b.cc@d.ee", "3x@d.ee a@b-c.d-e.fg9", "@a.bc", "a@.bc",
		"4111 1111-1111 1111", "1 -2", "12  34", "sk-abcdefghijklmnopq", "xsk-abcdefghijklmnopq", "Bearer  abcdefghijklmnop==",
		"BEARER\tabcdefghijklmnopqrst", "AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOPQ", "ghp_" + strings.Repeat("a", 30), "_sk-abcdefghijklmnopqr",
		"lwk_" + strings.Repeat("-", 20), "xoxb-1234567890", "AIza" + strings.Repeat("_", 35), "é@ü.de sk-é"} {
		f.Add(s)
	}
	res := map[string]*regexp.Regexp{}
	for name, src := range builtinRE {
		res[name] = regexp.MustCompile(src)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for name, re := range res {
			want := re.FindAllStringIndex(in, -1)
			got := builtinFind[name](in)
			if len(want) != len(got) {
				t.Fatalf("%s on %q: finder %v, regexp %v", name, in, got, want)
			}
			for i := range want {
				if want[i][0] != got[i][0] || want[i][1] != got[i][1] {
					t.Fatalf("%s on %q: finder %v, regexp %v", name, in, got, want)
				}
			}
		}
	})
}
