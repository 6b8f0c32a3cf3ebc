// Package stepdiff compares two runs of an agent step by step: it aligns
// their steps (model calls, tool calls, retrievals) with an edit-distance
// alignment, so that one step inserted or dropped on one side does not
// misalign every step after it, and lists what differs in each aligned
// pair, the first difference first.
//
// It owns the alignment and the diff, and nothing of where steps come
// from: scorer/tracediff reads them from a trace's spans and agents/journal
// (StepsOf, DiffRuns) from a journaled run, each in its own vocabulary (the
// field names and, for journals, the divergence codes). It imports only the
// standard library, so both rooms, which may not import each other, can
// use it.
package stepdiff

import (
	"unicode/utf8"
)

// Step kinds.
const (
	KindModel     = "model"     // a call to a model
	KindTool      = "tool"      // a tool call
	KindRetrieval = "retrieval" // a search of a data source
)

// Field is one compared property of a step: the tool's name, its
// arguments, its result, the model's answer.
type Field struct {
	Name string `json:"name"`
	// Value is what is compared.
	Value string `json:"value"`
	// Show is what a reader is shown when it is not Value itself (a
	// journal compares the arguments' hash and shows the arguments).
	Show string `json:"show,omitempty"`
}

// Shown is what a reader is shown of the field.
func (f Field) Shown() string {
	if f.Show != "" {
		return f.Show
	}
	return f.Value
}

// Step is one step of a run.
type Step struct {
	Kind string `json:"kind"`
	// Name is what the step called: the tool, the model, the data source.
	Name string `json:"name"`
	// Ref says where the step is on its side (a span id, a journal
	// sequence number), for links.
	Ref string `json:"ref"`
	// Title is how its side names the step (the span name, "tool_call
	// search").
	Title string `json:"title"`
	// Fields are compared in order; a field one side lacks compares as
	// absent.
	Fields []Field `json:"fields"`
	// Info is shown and never compared (duration, tokens): two runs that
	// did the same thing at different speeds did not diverge.
	Info []Field `json:"info,omitempty"`
}

// Field returns the step's field of that name.
func (s *Step) Field(name string) (Field, bool) {
	for _, f := range s.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// Row statuses.
const (
	Same    = "same"    // both sides did the same
	Changed = "changed" // both sides took this step, and some fields differ
	OnlyA   = "only_a"  // a step of A that B has no counterpart for
	OnlyB   = "only_b"  // a step of B that A has no counterpart for
)

// FieldDiff is one field that differs between two aligned steps.
type FieldDiff struct {
	Field string `json:"field"`
	A     string `json:"a"`
	B     string `json:"b"`
	// AbsentA, AbsentB: that side's step has no such field.
	AbsentA bool `json:"absent_a,omitempty"`
	AbsentB bool `json:"absent_b,omitempty"`
	// Code is the side's code for this kind of difference, when its
	// vocabulary has one (journals: journal.CodeMismatch, CodeResultDiffers).
	Code string `json:"code,omitempty"`
}

// Split cuts both values into the part they share at the start, the parts
// that differ, and the part they share at the end (whole runes), so a page
// can mark only what changed.
func (d FieldDiff) Split() (prefix, a, b, suffix string) {
	pa, pb := d.A, d.B
	n := 0
	for n < len(pa) && n < len(pb) {
		ra, sa := utf8.DecodeRuneInString(pa[n:])
		rb, sb := utf8.DecodeRuneInString(pb[n:])
		if ra != rb || sa != sb {
			break
		}
		n += sa
	}
	prefix, pa, pb = pa[:n], pa[n:], pb[n:]
	m := 0
	for m < len(pa) && m < len(pb) {
		ra, sa := utf8.DecodeLastRuneInString(pa[:len(pa)-m])
		rb, sb := utf8.DecodeLastRuneInString(pb[:len(pb)-m])
		if ra != rb || sa != sb {
			break
		}
		m += sa
	}
	return prefix, pa[:len(pa)-m], pb[:len(pb)-m], pa[len(pa)-m:]
}

// Row is one line of the comparison: a pair of aligned steps, or a step
// of one side alone.
type Row struct {
	// A and B index the sides' steps; -1 where the row has no step on
	// that side.
	A      int         `json:"a"`
	B      int         `json:"b"`
	Status string      `json:"status"`
	Diffs  []FieldDiff `json:"diffs,omitempty"`
	// Code is the side's code for a step only one side took, when its
	// vocabulary has one (journals: journal.CodeMissing, CodeExtra).
	Code string `json:"code,omitempty"`
}

// Codes is a side's vocabulary for differences; the zero value has none.
type Codes struct {
	OnlyA, OnlyB string
	// Fields maps a field name to the code of a difference in it.
	Fields map[string]string
}

// Diff is the comparison of two runs.
type Diff struct {
	A    []Step `json:"a_steps"`
	B    []Step `json:"b_steps"`
	Rows []Row  `json:"rows"`
	// First is the index in Rows of the first row that differs, -1 when
	// the runs took the same steps.
	First int `json:"first_divergence"`
	// Counts of rows by status.
	Same    int `json:"same"`
	Changed int `json:"changed"`
	OnlyA   int `json:"only_a"`
	OnlyB   int `json:"only_b"`
	// Approximate: the runs were too long to align exactly (MaxCells); the
	// steps between their common start and common end were paired by
	// position.
	Approximate bool `json:"approximate,omitempty"`
}

// Identical reports whether the runs took the same steps.
func (d *Diff) Identical() bool { return d.First < 0 }

// Scores of a pair of steps in the alignment. The alignment maximises
// their sum, so it pairs as many identical steps as it can, then as many
// steps of the same kind and name, then of the same kind; steps of two
// kinds are never paired. Because an identical pair outscores every other
// choice, a run aligned with itself pairs each step with itself, and a run
// with one step inserted aligns with exactly one step unpaired.
const (
	scoreIdentical = 4
	scoreSameName  = 3
	scoreSameKind  = 2
)

func pairScore(a, b *Step) int {
	switch {
	case a.Kind != b.Kind:
		return 0
	case identical(a, b):
		return scoreIdentical
	case a.Name == b.Name:
		return scoreSameName
	}
	return scoreSameKind
}

// identical reports whether a and b are the same step: same kind and
// name, and the same fields with the same values (in any order).
func identical(a, b *Step) bool {
	if a.Kind != b.Kind || a.Name != b.Name || len(a.Fields) != len(b.Fields) {
		return false
	}
	for _, fa := range a.Fields {
		if fb, ok := b.Field(fa.Name); !ok || fb.Value != fa.Value {
			return false
		}
	}
	return true
}

// Compare aligns a and b and lists their differences, coded with codes.
func Compare(a, b []Step, codes Codes) Diff {
	d := Diff{A: a, B: b, First: -1}
	// The steps both runs start and end with identically need no
	// alignment: most comparisons are of runs that agree for a while.
	pre := 0
	for pre < len(a) && pre < len(b) && identical(&a[pre], &b[pre]) {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && identical(&a[len(a)-1-suf], &b[len(b)-1-suf]) {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	pairs, exact := Align(len(ma), len(mb), func(i, j int) int { return pairScore(&ma[i], &mb[j]) }, MaxCells)
	d.Approximate = !exact

	var rows []Row
	for i := 0; i < pre; i++ {
		rows = append(rows, Row{A: i, B: i, Status: Same})
	}
	for _, p := range pairs {
		r := Row{A: -1, B: -1}
		if p.A >= 0 {
			r.A = p.A + pre
		}
		if p.B >= 0 {
			r.B = p.B + pre
		}
		switch {
		case p.B < 0:
			r.Status, r.Code = OnlyA, codes.OnlyA
		case p.A < 0:
			r.Status, r.Code = OnlyB, codes.OnlyB
		default:
			sa, sb := &a[r.A], &b[r.B]
			r.Status = Same
			if !identical(sa, sb) {
				r.Status, r.Diffs = Changed, fieldDiffs(sa, sb, codes)
				if len(r.Diffs) == 0 {
					// Only the name differs, and no field carries it.
					r.Diffs = []FieldDiff{{Field: "name", A: sa.Name, B: sb.Name, Code: codes.Fields["name"]}}
				}
			}
		}
		rows = append(rows, r)
	}
	for k := suf; k > 0; k-- {
		rows = append(rows, Row{A: len(a) - k, B: len(b) - k, Status: Same})
	}
	d.Rows = rows
	for i, r := range rows {
		switch r.Status {
		case Same:
			d.Same++
		case Changed:
			d.Changed++
		case OnlyA:
			d.OnlyA++
		case OnlyB:
			d.OnlyB++
		}
		if r.Status != Same && d.First < 0 {
			d.First = i
		}
	}
	return d
}

// fieldDiffs lists the fields in which a and b differ: a's fields in a's
// order, then those only b has.
func fieldDiffs(a, b *Step, codes Codes) []FieldDiff {
	var out []FieldDiff
	seen := map[string]bool{}
	for _, fa := range a.Fields {
		seen[fa.Name] = true
		fb, ok := b.Field(fa.Name)
		if ok && fb.Value == fa.Value {
			continue
		}
		out = append(out, FieldDiff{Field: fa.Name, A: fa.Shown(), B: fb.Shown(), AbsentB: !ok, Code: codes.Fields[fa.Name]})
	}
	for _, fb := range b.Fields {
		if !seen[fb.Name] {
			out = append(out, FieldDiff{Field: fb.Name, B: fb.Shown(), AbsentA: true, Code: codes.Fields[fb.Name]})
		}
	}
	return out
}
