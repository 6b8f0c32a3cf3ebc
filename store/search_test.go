package store

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestParseSearchRoundTripsThroughString(t *testing.T) {
	for _, expr := range []string{
		`gen_ai.request.model=gpt-4o`,
		`error.type gen_ai.usage.input_tokens>=1000 x<=-2.5 y<3 z>1e3 k!=v`,
		`name:"execute_tool web_search" retrieved:doc-1 cited:doc-2 evidence:"doc 3"`,
		`quotes="she said \"hi\" \\ back" empty="" "weird key=x"=1 "and"`,
		`url="https://x.example/a?b=c"`,
	} {
		c, err := ParseSearch(expr)
		if err != nil {
			t.Fatalf("ParseSearch(%q): %v", expr, err)
		}
		again, err := ParseSearch(FormatSearch(c))
		if err != nil || FormatSearch(again) != FormatSearch(c) || len(again) != len(c) {
			t.Fatalf("ParseSearch(FormatSearch(%q)) = %q, %v", expr, FormatSearch(again), err)
		}
		for i := range c {
			if c[i] != again[i] {
				t.Errorf("%q clause %d: %+v after a round trip, was %+v", expr, i+1, again[i], c[i])
			}
		}
	}
}

func TestParseSearchErrorsNameTheClause(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{`a=1 b>lots`, `clause 2 "b>lots": > compares numbers; "lots" is not a finite number`},
		{`a=1 name:"open`, `clause 2 "name:\"open": unterminated quote`},
		{`=x`, `clause 1 "=x": no attribute key before the operator`},
		{`a= b`, `clause 1 "a=": = wants a value after it`},
		{`a=1 OR b=2`, `clause 2 "OR": clauses are separated by spaces and must all hold; OR is not supported`},
		{`evidence:`, `clause 1 "evidence:": evidence wants a value`},
		{`a=x"y"`, `clause 1 "a=x\"y\"": unexpected '"' after the value`},
		{`a=` + strings.Repeat("v", MaxSearchValue+1), `searches compare values of up to 256`},
		{`a>NaN`, `is not a finite number`},
	} {
		_, err := ParseSearch(c.expr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSearch(%.40q): %v; want an error containing %q", c.expr, err, c.want)
		}
	}
}

func TestParseTraceQueryReadsSearchAndSession(t *testing.T) {
	q, err := ParseTraceQuery(url.Values{"q": {`name:"chat gpt-4o" tokens>5`}, "session": {"conv-1"}}, time.Now())
	if err != nil || len(q.Search) != 2 || q.Session != "conv-1" || q.Search[1].Num != 5 {
		t.Fatalf("ParseTraceQuery: %+v, %v", q, err)
	}
	if v := TraceQueryValues(q); v.Get("q") != `name:"chat gpt-4o" tokens>5` || v.Get("session") != "conv-1" {
		t.Errorf("TraceQueryValues: %v", v)
	}
	_, err = ParseTraceQuery(url.Values{"q": {`a>b`}}, time.Now())
	if !errors.Is(err, ErrBadQuery) || !strings.HasPrefix(err.Error(), `q: clause 1 "a>b"`) {
		t.Errorf("bad q: %v", err)
	}
}

func TestTraceMatchesSearchByHand(t *testing.T) {
	spans := []Span{
		{Name: "chat gpt-4o", Attributes: Attributes{"m": "gpt-4o", "n": int64(7), "d": 2.5, "b": true, "arr": []any{"x", int64(3)}, "long": strings.Repeat("z", 300)}},
		{Name: "tool", RetrievedDocs: []string{"d1"}, CitedDocs: []string{"d2"}, Attributes: Attributes{"m": "claude"}},
	}
	for expr, want := range map[string]bool{
		"m=gpt-4o": true, "m=GPT-4O": false, "m!=gpt-4o": false, "m!=llama": true, "n=7.0": true, "n>7": false, "n>=7": true,
		"d<3": true, "b=true": true, "b=1": false, "arr=x": true, "arr>2": true, "arr=y": false, "long": true, "long!=z": true,
		`name:"chat gpt-4o"`: true, "name:chat": false, "retrieved:d1": true, "retrieved:d2": false, "cited:d2": true,
		"evidence:d1": true, "evidence:d3": false, "missing": false, "missing!=x": false, "m=gpt-4o cited:d2": true,
	} {
		c, err := ParseSearch(expr)
		if err != nil {
			t.Fatal(err)
		}
		if got := TraceMatchesSearch(spans, c); got != want {
			t.Errorf("%s: %v, want %v", expr, got, want)
		}
	}
}

// FuzzParseSearch: any input either parses to clauses that print back to a
// query parsing to the very same clauses (so a URL built from a search
// means what was searched), or fails with an error naming a clause by
// number; it never panics, and a query value longer than MaxSearchValue is
// never accepted.
func FuzzParseSearch(f *testing.F) {
	for _, s := range []string{
		`gen_ai.request.model=gpt-4o`,
		`error.type gen_ai.usage.input_tokens>=1000 x<=-2.5 y<3 z>1e3 k!=v`,
		`name:"execute_tool web_search" retrieved:doc-1 cited:doc-2 evidence:"doc 3"`,
		`quotes="she said \"hi\" \\ back" empty="" "weird key=x"=1 "and"`,
		`a=1 b>lots`, `name:"open`, `=x`, "k=\x00\xff", `a>NaN`, `a>1e400`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		c, err := ParseSearch(expr)
		if err != nil {
			if !strings.Contains(err.Error(), "clause ") && strings.TrimSpace(expr) != "" {
				t.Fatalf("ParseSearch(%q): error %q names no clause", expr, err)
			}
			return
		}
		for i, cl := range c {
			if len(cl.Value) > MaxSearchValue {
				t.Fatalf("ParseSearch(%q): clause %d accepted a %d-byte value", expr, i+1, len(cl.Value))
			}
		}
		printed := FormatSearch(c)
		again, err := ParseSearch(printed)
		if err != nil {
			t.Fatalf("ParseSearch(%q) printed as %q, which does not parse: %v", expr, printed, err)
		}
		if len(again) != len(c) {
			t.Fatalf("ParseSearch(%q): %d clauses, %d after printing as %q", expr, len(c), len(again), printed)
		}
		for i := range c {
			if c[i] != again[i] && !(c[i].IsNum && c[i].Num != c[i].Num) {
				t.Fatalf("ParseSearch(%q) clause %d: %+v, after printing as %q: %+v", expr, i+1, c[i], printed, again[i])
			}
		}
	})
}
