package stepdiff

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomSteps draws n steps from a small vocabulary, so that equal and
// near-equal steps are common: the hard case for an alignment.
func randomSteps(r *rand.Rand, n int) []Step {
	kinds := []string{KindModel, KindTool, KindRetrieval}
	names := []string{"search", "fetch", "gpt-4o"}
	vals := []string{"", "a", "b"}
	out := make([]Step, n)
	for i := range out {
		s := Step{Kind: kinds[r.IntN(len(kinds))], Name: names[r.IntN(len(names))]}
		s.Fields = []Field{{Name: "name", Value: s.Name}, {Name: "arguments", Value: vals[r.IntN(len(vals))]}, {Name: "result", Value: vals[r.IntN(len(vals))]}}
		s.Ref = fmt.Sprint(i)
		out[i] = s
	}
	return out
}

// checkCoverage fails unless every step of each side appears exactly once,
// in order, and each row's status agrees with its sides.
func checkCoverage(t *testing.T, d Diff, na, nb int) {
	t.Helper()
	var as, bs []int
	for k, r := range d.Rows {
		if r.A >= 0 {
			as = append(as, r.A)
		}
		if r.B >= 0 {
			bs = append(bs, r.B)
		}
		switch {
		case r.A < 0 && r.B < 0:
			t.Fatalf("row %d has neither side", k)
		case r.A < 0 && r.Status != OnlyB, r.B < 0 && r.Status != OnlyA:
			t.Fatalf("row %d: status %s with sides %d/%d", k, r.Status, r.A, r.B)
		case r.A >= 0 && r.B >= 0 && d.A[r.A].Kind != d.B[r.B].Kind:
			t.Fatalf("row %d pairs a %s step with a %s step", k, d.A[r.A].Kind, d.B[r.B].Kind)
		case r.Status == Changed && len(r.Diffs) == 0:
			t.Fatalf("row %d changed with no field diff", k)
		case r.Status == Same && len(r.Diffs) > 0:
			t.Fatalf("row %d same with field diffs %+v", k, r.Diffs)
		}
	}
	for side, got := range map[string][]int{"a": as, "b": bs} {
		want := na
		if side == "b" {
			want = nb
		}
		if len(got) != want {
			t.Fatalf("side %s: %d steps in the rows, want %d", side, len(got), want)
		}
		for i, x := range got {
			if x != i {
				t.Fatalf("side %s: rows visit steps %v, want each once in order", side, got)
			}
		}
	}
	first := -1
	for k, r := range d.Rows {
		if r.Status != Same {
			first = k
			break
		}
	}
	if d.First != first {
		t.Fatalf("First = %d, the first differing row is %d", d.First, first)
	}
	if d.Same+d.Changed+d.OnlyA+d.OnlyB != len(d.Rows) {
		t.Fatalf("counts %d+%d+%d+%d do not add up to %d rows", d.Same, d.Changed, d.OnlyA, d.OnlyB, len(d.Rows))
	}
}

func TestPropertySelfAlignmentHasNoDifferences(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 500; trial++ {
		s := randomSteps(r, r.IntN(40))
		d := Compare(s, slices.Clone(s), Codes{})
		checkCoverage(t, d, len(s), len(s))
		if !d.Identical() || d.Same != len(s) || len(d.Rows) != len(s) {
			t.Fatalf("trial %d: a run against itself: first=%d same=%d rows=%d of %d steps", trial, d.First, d.Same, len(d.Rows), len(s))
		}
		for k, row := range d.Rows {
			if row.A != k || row.B != k {
				t.Fatalf("trial %d: row %d pairs %d with %d", trial, k, row.A, row.B)
			}
		}
	}
}

func TestPropertyEveryStepOnceInOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 1000; trial++ {
		a, b := randomSteps(r, r.IntN(30)), randomSteps(r, r.IntN(30))
		checkCoverage(t, Compare(a, b, Codes{}), len(a), len(b))
	}
}

func TestPropertyOneInsertedStepIsExactlyOneGap(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 1000; trial++ {
		a := randomSteps(r, r.IntN(40))
		at := r.IntN(len(a) + 1)
		b := slices.Insert(slices.Clone(a), at, randomSteps(r, 1)[0])
		for _, swap := range []bool{false, true} {
			x, y := a, b
			if swap {
				x, y = b, a
			}
			d := Compare(x, y, Codes{})
			checkCoverage(t, d, len(x), len(y))
			if d.OnlyA+d.OnlyB != 1 || d.Changed != 0 {
				t.Fatalf("trial %d (inserted at %d of %d, swapped %v): %d only-a, %d only-b, %d changed; want exactly one gap",
					trial, at, len(a), swap, d.OnlyA, d.OnlyB, d.Changed)
			}
			if (d.OnlyB == 1) == swap {
				t.Fatalf("trial %d: the gap is on the wrong side", trial)
			}
		}
	}
}

// TestAlignIsOptimal checks the table against every alignment of short
// sequences (exhaustive recursion).
func TestAlignIsOptimal(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var best func(a, b []Step) int
	best = func(a, b []Step) int {
		if len(a) == 0 || len(b) == 0 {
			return 0
		}
		v := max(best(a[1:], b), best(a, b[1:]))
		if s := pairScore(&a[0], &b[0]); s > 0 {
			v = max(v, s+best(a[1:], b[1:]))
		}
		return v
	}
	for trial := 0; trial < 300; trial++ {
		a, b := randomSteps(r, r.IntN(7)), randomSteps(r, r.IntN(7))
		pairs, exact := Align(len(a), len(b), func(i, j int) int { return pairScore(&a[i], &b[j]) }, MaxCells)
		if !exact {
			t.Fatal("short sequences aligned approximately")
		}
		got := 0
		for _, p := range pairs {
			if p.A >= 0 && p.B >= 0 {
				got += pairScore(&a[p.A], &b[p.B])
			}
		}
		if want := best(a, b); got != want {
			t.Fatalf("trial %d: alignment scores %d, the best is %d", trial, got, want)
		}
	}
}

func TestInsertedStepDoesNotMisalignTheRest(t *testing.T) {
	tool := func(name, args string) Step {
		return Step{Kind: KindTool, Name: name, Fields: []Field{{Name: "tool", Value: name}, {Name: "arguments", Value: args}}}
	}
	model := func(answer string) Step {
		return Step{Kind: KindModel, Name: "gpt-4o", Fields: []Field{{Name: "answer", Value: answer}}}
	}
	a := []Step{model(""), tool("search", `{"q":"retry"}`), model(""), tool("fetch", `{"url":"docs/retries.md"}`), model("Use backoff.")}
	b := []Step{model(""), tool("search", `{"q":"retry"}`), model(""), tool("search", `{"q":"retry policy"}`), model(""), tool("fetch", `{"url":"docs/retries.md"}`), model("Use exponential backoff.")}
	d := Compare(a, b, Codes{OnlyB: "EXTRA", Fields: map[string]string{"answer": "ANSWER"}})
	checkCoverage(t, d, len(a), len(b))
	var got []string
	for _, r := range d.Rows {
		got = append(got, fmt.Sprintf("%d/%d %s %s", r.A, r.B, r.Status, r.Code))
	}
	want := []string{"0/0 same ", "1/1 same ", "2/2 same ", "-1/3 only_b EXTRA", "-1/4 only_b EXTRA", "3/5 same ", "4/6 changed "}
	if !slices.Equal(got, want) {
		t.Fatalf("rows\n%q\nwant\n%q", got, want)
	}
	if d.First != 3 {
		t.Fatalf("first divergence at row %d, want 3", d.First)
	}
	last := d.Rows[6].Diffs
	if len(last) != 1 || last[0].Field != "answer" || last[0].Code != "ANSWER" {
		t.Fatalf("last row's diffs %+v", last)
	}
	pre, x, y, suf := last[0].Split()
	if pre != "Use " || x != "" || y != "exponential " || suf != "backoff." {
		t.Fatalf("split %q %q %q %q", pre, x, y, suf)
	}
}

func TestDifferentToolAtTheSamePlaceIsOneChangedRow(t *testing.T) {
	a := []Step{{Kind: KindTool, Name: "search", Fields: []Field{{Name: "tool", Value: "search"}, {Name: "arguments", Value: `{"q":"x"}`}}}}
	b := []Step{{Kind: KindTool, Name: "fetch", Fields: []Field{{Name: "tool", Value: "fetch"}, {Name: "arguments", Value: `{"q":"x"}`}}}}
	d := Compare(a, b, Codes{})
	if len(d.Rows) != 1 || d.Rows[0].Status != Changed || len(d.Rows[0].Diffs) != 1 || d.Rows[0].Diffs[0].Field != "tool" {
		t.Fatalf("rows %+v", d.Rows)
	}
	// Steps of different kinds never pair.
	c := []Step{{Kind: KindModel, Name: "search"}}
	d = Compare(a, c, Codes{})
	if d.OnlyA != 1 || d.OnlyB != 1 || d.Changed != 0 {
		t.Fatalf("a tool and a model call paired: %+v", d.Rows)
	}
}

func TestTooLongToAlignIsPairedByPositionAndSaysSo(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	a, b := randomSteps(r, 50), randomSteps(r, 60)
	pairs, exact := Align(len(a), len(b), func(i, j int) int { return pairScore(&a[i], &b[j]) }, 100)
	if exact || len(pairs) != 60 {
		t.Fatalf("exact=%v, %d pairs", exact, len(pairs))
	}
	for k, p := range pairs {
		if (k < 50 && (p.A != k || p.B != k)) || (k >= 50 && (p.A != -1 || p.B != k)) {
			t.Fatalf("pair %d = %+v", k, p)
		}
	}
}

func TestSplitKeepsRunesWhole(t *testing.T) {
	pre, a, b, suf := FieldDiff{A: "café crème", B: "cafè crème"}.Split()
	if pre != "caf" || a != "é" || b != "è" || suf != " crème" {
		t.Fatalf("%q %q %q %q", pre, a, b, suf)
	}
	pre, a, b, suf = FieldDiff{A: "aa", B: "aaa"}.Split()
	if pre+a+suf != "aa" || pre+b+suf != "aaa" {
		t.Fatalf("%q %q %q %q", pre, a, b, suf)
	}
}

func BenchmarkCompare1000Steps(b *testing.B) {
	r := rand.New(rand.NewPCG(11, 12))
	x, y := randomSteps(r, 1000), randomSteps(r, 1000)
	for b.Loop() {
		Compare(x, y, Codes{})
	}
}
