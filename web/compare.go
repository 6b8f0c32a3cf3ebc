package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/internal/stepdiff"
	"github.com/loomwork/loomwork/scorer/grade"
	"github.com/loomwork/loomwork/scorer/tracecases"
	"github.com/loomwork/loomwork/scorer/tracediff"
	"github.com/loomwork/loomwork/store"
)

// The comparison pages: two traces (/compare?a=TRACE&b=TRACE), or two
// journaled runs (/compare/runs?a=FILE/RUN&b=FILE/RUN), side by side,
// aligned step by step. The alignment and the diff are
// scorer/tracediff's and agents/journal's (on internal/stepdiff); these
// handlers resolve the two sides and lay the result out.

func (s *Server) registerCompare() {
	s.mux.HandleFunc("GET /compare", s.comparePage)
	s.mux.HandleFunc("GET /api/v1/compare", s.apiCompare)
	if s.deps.Files != nil {
		s.mux.HandleFunc("GET /compare/runs", s.compareRunsPage)
		s.mux.HandleFunc("GET /api/v1/compare/runs", s.apiCompareRuns)
	}
}

// CompareSide is one of the two things compared.
type CompareSide struct {
	// Ref is what the URL names it by: a trace id, or FILE/RUN.
	Ref   string `json:"ref"`
	Title string `json:"title"`
	Link  string `json:"link"`
	// CaseID and Trial are the case and trial it ran ("" and -1 when it
	// does not say); CaseNote says why not.
	CaseID   string `json:"case_id,omitempty"`
	Trial    int    `json:"trial"`
	CaseNote string `json:"case_note,omitempty"`
	Answer   string `json:"answer"`
	// Stats are its totals, for the page's header.
	Stats  []CompareStat `json:"stats"`
	Labels []string      `json:"model_labels,omitempty"`

	stepLink func(ref string) string
}

// CompareStat is one total of a side.
type CompareStat struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// CompareView is a comparison page, and the JSON API's answer.
type CompareView struct {
	Runs bool        `json:"-"`
	A    CompareSide `json:"a"`
	B    CompareSide `json:"b"`
	stepdiff.Diff
	Notes []string `json:"notes,omitempty"`
	// SameCase: both sides say they ran the same case.
	SameCase bool `json:"same_case"`
}

// CompareCell is one side of a row, as the page shows it.
type CompareCell struct {
	Step    stepdiff.Step
	Link    string
	Changed map[string]bool // the fields that differ from the other side
}

// CompareRow is one row of the page.
type CompareRow struct {
	N      int
	Status string
	First  bool
	Code   string
	A, B   *CompareCell
	Diffs  []stepdiff.FieldDiff
}

// Lines lays the diff out for the page.
func (v *CompareView) Lines() []CompareRow {
	out := make([]CompareRow, len(v.Rows))
	for k, r := range v.Rows {
		row := CompareRow{N: k + 1, Status: r.Status, First: k == v.First, Code: r.Code, Diffs: r.Diffs}
		changed := map[string]bool{}
		for _, d := range r.Diffs {
			changed[d.Field] = true
		}
		if r.A >= 0 {
			st := v.Diff.A[r.A]
			row.A = &CompareCell{Step: st, Link: v.A.stepLink(st.Ref), Changed: changed}
		}
		if r.B >= 0 {
			st := v.Diff.B[r.B]
			row.B = &CompareCell{Step: st, Link: v.B.stepLink(st.Ref), Changed: changed}
		}
		out[k] = row
	}
	return out
}

// CompareCandidate is something the picker offers to compare with.
type CompareCandidate struct {
	Ref      string
	Title    string
	CaseID   string
	Trial    int
	SameCase bool
	Detail   string
}

// ComparePicker is the page asking what to compare with.
type ComparePicker struct {
	Runs       bool
	A, B       string
	ASide      *CompareSide
	Candidates []CompareCandidate
	Err        string
}

func param(r *http.Request, name string) string { return strings.TrimSpace(r.URL.Query().Get(name)) }

// traceSide resolves and loads one trace to compare.
func (s *Server) traceSide(ctx context.Context, name, ref string) (CompareSide, []store.Span, error) {
	if ref == "" {
		return CompareSide{}, nil, badRequest{fmt.Sprintf("parameter %s: required (a trace id, or a prefix of one)", name)}
	}
	id, err := store.TraceIDOf(ctx, s.deps.Traces, ref)
	if err != nil {
		return CompareSide{}, nil, fmt.Errorf("parameter %s: %w", name, err)
	}
	c, err := s.loadTrace(ctx, id)
	if err != nil {
		return CompareSide{}, nil, fmt.Errorf("parameter %s: trace %s: %w", name, id, err)
	}
	side := CompareSide{Ref: id, Title: c.rollup.RootName, Link: "/traces/" + id, Labels: c.labels, Trial: -1,
		stepLink: func(span string) string { return "/traces/" + id + "?span=" + span }}
	if side.Title == "" {
		side.Title = "trace " + shortID(id)
	}
	ref2 := tracecases.TrialOf(c.spans)
	if ref2.Marked {
		side.CaseID, side.Trial = ref2.CaseID, ref2.Trial
		if ref2.Trial < 0 {
			side.CaseNote = ref2.TrialWhy
		}
	} else {
		side.CaseNote = "no case id: " + ref2.CaseWhy
	}
	side.Answer = grade.TranscriptFromSpans(c.spans).Answer
	ru := c.rollup
	side.Stats = []CompareStat{
		{"duration", fmtMS(ru.DurationMS) + asyncSuffix(msDur(ru.AfterRootMS))},
		{"cost", fmtCost(ru.CostUSD)},
		{"tokens in / out", fmtInt(ru.TokensIn) + " / " + fmtInt(ru.TokensOut)},
		{"model calls", fmtInt(int64(ru.ModelCalls))},
		{"tool calls", fmtInt(int64(ru.ToolCalls))},
		{"errors", fmtInt(int64(ru.ErrorCount))},
	}
	return side, c.spans, nil
}

// asyncSuffix is the part of a duration after the root ended, in the
// list's words (asyncText), for a figure written as text.
func asyncSuffix(afterRoot time.Duration) string {
	if afterRoot <= 0 {
		return ""
	}
	return " (" + asyncText(afterRoot) + ")"
}

func (s *Server) compareTraces(r *http.Request) (CompareView, error) {
	a, sa, err := s.traceSide(r.Context(), "a", param(r, "a"))
	if err != nil {
		return CompareView{}, err
	}
	b, sb, err := s.traceSide(r.Context(), "b", param(r, "b"))
	if err != nil {
		return CompareView{}, err
	}
	res := tracediff.Compare(sa, sb)
	v := CompareView{A: a, B: b, Diff: res.Diff, Notes: res.Notes}
	v.finish()
	return v, nil
}

// finish adds what the two sides say about each other.
func (v *CompareView) finish() {
	v.SameCase = v.A.CaseID != "" && v.A.CaseID == v.B.CaseID
	switch {
	case v.A.Ref == v.B.Ref:
		v.Notes = append(v.Notes, "A and B are the same "+map[bool]string{true: "run", false: "trace"}[v.Runs]+".")
	case v.A.CaseID != "" && v.B.CaseID != "" && !v.SameCase:
		v.Notes = append(v.Notes, fmt.Sprintf("A ran case %q and B case %q: these are different tasks, so differences are expected.", v.A.CaseID, v.B.CaseID))
	}
}

func (s *Server) comparePage(w http.ResponseWriter, r *http.Request) {
	if param(r, "a") == "" || param(r, "b") == "" {
		s.comparePicker(w, r, false)
		return
	}
	v, err := s.compareTraces(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	render(w, r, ComparePage(v))
}

func (s *Server) apiCompare(w http.ResponseWriter, r *http.Request) {
	v, err := s.compareTraces(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// comparePicker asks for the side not given, offering the traces (or runs)
// of the same case first.
func (s *Server) comparePicker(w http.ResponseWriter, r *http.Request, runs bool) {
	p := ComparePicker{Runs: runs, A: param(r, "a"), B: param(r, "b")}
	var err error
	if runs {
		err = s.runCandidates(r.Context(), &p)
	} else {
		err = s.traceCandidates(r.Context(), &p)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	render(w, r, ComparePickerPage(p))
}

// pickerLimit is how many recent traces the picker reads; pickerSpanLimit
// the largest of them it opens to read their case and trial.
const (
	pickerLimit     = 40
	pickerSpanLimit = 5000
)

func (s *Server) traceCandidates(ctx context.Context, p *ComparePicker) error {
	if p.A != "" {
		a, _, err := s.traceSide(ctx, "a", p.A)
		if err != nil {
			return err
		}
		p.A, p.ASide = a.Ref, &a
	}
	page, err := s.deps.Traces.ListTraces(ctx, store.TraceQuery{Limit: pickerLimit})
	if err != nil {
		return err
	}
	for _, sum := range page.Traces {
		if p.ASide != nil && sum.TraceID == p.ASide.Ref {
			continue
		}
		c := CompareCandidate{Ref: sum.TraceID, Title: sum.RootName, Trial: -1,
			Detail: fmtTime(sum.Start) + " · " + fmtInt(sum.SpanCount) + " spans"}
		if sum.SpanCount <= pickerSpanLimit {
			if ct, err := s.loadTrace(ctx, sum.TraceID); err == nil {
				if ref := tracecases.TrialOf(ct.spans); ref.Marked {
					c.CaseID, c.Trial = ref.CaseID, ref.Trial
				}
			}
		}
		c.SameCase = p.ASide != nil && c.CaseID != "" && c.CaseID == p.ASide.CaseID
		p.Candidates = append(p.Candidates, c)
	}
	sortCandidates(p.Candidates)
	return nil
}

func sortCandidates(cs []CompareCandidate) {
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].SameCase && !cs[j].SameCase })
}

// runSide resolves FILE/RUN in the runs directory.
func (s *Server) runSide(name, ref string) (CompareSide, *journal.Run, error) {
	file, runID, ok := strings.Cut(ref, "/")
	if ref == "" || !ok || file == "" || runID == "" {
		return CompareSide{}, nil, badRequest{fmt.Sprintf("parameter %s: %q is not FILE/RUN (a journal in the runs directory and a run id in it)", name, ref)}
	}
	p, err := safeFile(s.deps.Files.RunsDir, file, ".jsonl")
	if err != nil {
		return CompareSide{}, nil, fmt.Errorf("parameter %s: %w", name, err)
	}
	runs, err := journal.ReadJSONLFile(p)
	if err != nil {
		return CompareSide{}, nil, badRequest{fmt.Sprintf("parameter %s: %v", name, err)}
	}
	for i := range runs {
		if runs[i].ID != runID {
			continue
		}
		run := &runs[i]
		row := summariseRun(file, *run)
		side := CompareSide{Ref: file + "/" + runID, Title: row.Agent + " run " + runID, Link: "/runs/" + file + "/" + runID,
			CaseID: row.CaseID, Trial: row.Trial, Answer: row.Answer,
			stepLink: func(seq string) string { return "/runs/" + file + "/" + runID + "#seq-" + seq }}
		if row.CaseID == "" {
			side.Trial, side.CaseNote = -1, "no case id: its run_started names none"
		}
		if row.Label != "" {
			side.Labels = []string{row.Label}
		}
		var models, tools int
		for _, e := range run.Events {
			switch e.Kind {
			case journal.KindModelResponse:
				models++
			case journal.KindToolCall:
				tools++
			}
		}
		side.Stats = []CompareStat{
			{"events", fmtInt(int64(len(run.Events)))},
			{"model calls", fmtInt(int64(models))},
			{"tool calls", fmtInt(int64(tools))},
		}
		if n := len(run.Events); n > 1 {
			side.Stats = append(side.Stats, CompareStat{"recorded time", fmtDur(run.Events[n-1].Time.Sub(run.Events[0].Time))})
		}
		if !row.Finished {
			side.Stats = append(side.Stats, CompareStat{"finished", "no"})
		}
		return side, run, nil
	}
	return CompareSide{}, nil, fmt.Errorf("parameter %s: run %q in %s: %w", name, runID, file, errNotFound)
}

func (s *Server) compareRuns(r *http.Request) (CompareView, error) {
	a, ra, err := s.runSide("a", param(r, "a"))
	if err != nil {
		return CompareView{}, err
	}
	b, rb, err := s.runSide("b", param(r, "b"))
	if err != nil {
		return CompareView{}, err
	}
	v := CompareView{Runs: true, A: a, B: b, Diff: journal.DiffRuns(ra, rb)}
	if v.Approximate {
		v.Notes = append(v.Notes, fmt.Sprintf("the runs are too long to align exactly (%d × %d steps): the steps between their common start and end are paired by position", len(v.Diff.A), len(v.Diff.B)))
	}
	v.finish()
	return v, nil
}

func (s *Server) compareRunsPage(w http.ResponseWriter, r *http.Request) {
	if param(r, "a") == "" || param(r, "b") == "" {
		s.comparePicker(w, r, true)
		return
	}
	v, err := s.compareRuns(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	render(w, r, ComparePage(v))
}

func (s *Server) apiCompareRuns(w http.ResponseWriter, r *http.Request) {
	v, err := s.compareRuns(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) runCandidates(_ context.Context, p *ComparePicker) error {
	if p.A != "" {
		a, _, err := s.runSide("a", p.A)
		if err != nil {
			return err
		}
		p.ASide = &a
	}
	v, _, err := s.runFiles(true)
	if err != nil {
		return err
	}
	for _, row := range v.Rows {
		ref := row.File + "/" + row.RunID
		if p.ASide != nil && ref == p.ASide.Ref {
			continue
		}
		c := CompareCandidate{Ref: ref, Title: row.Agent + " run " + row.RunID, CaseID: row.CaseID, Trial: row.Trial,
			Detail: row.File + " · " + fmtInt(int64(row.Events)) + " events"}
		c.SameCase = p.ASide != nil && c.CaseID != "" && c.CaseID == p.ASide.CaseID
		p.Candidates = append(p.Candidates, c)
	}
	sortCandidates(p.Candidates)
	return nil
}

// fieldLabel is how the page names a step field.
func fieldLabel(name string) string {
	switch name {
	case journal.StepFieldArgsHash:
		return "arguments"
	case journal.StepFieldError:
		return "error"
	case tracediff.FieldToolCalls:
		return "tool calls"
	case tracediff.FieldDataSource:
		return "data source"
	}
	return name
}

// describeDiffs says in a sentence what differs in a row.
func describeDiffs(row CompareRow) string {
	switch row.Status {
	case stepdiff.OnlyA:
		return "only A took this step: B has no " + stepWhat(row.A.Step) + " here"
	case stepdiff.OnlyB:
		return "only B took this step: A has no " + stepWhat(row.B.Step) + " here"
	case stepdiff.Same:
		return "same"
	}
	var fs []string
	for _, d := range row.Diffs {
		fs = append(fs, fieldLabel(d.Field))
	}
	verb := " differ"
	if len(fs) == 1 && !strings.HasSuffix(fs[0], "s") {
		verb = " differs" // "result differs"; "arguments differ", "tool calls differ"
	}
	return stepWhat(row.A.Step) + ": " + strings.Join(fs, ", ") + verb
}

func stepWhat(st stepdiff.Step) string {
	switch st.Kind {
	case stepdiff.KindModel:
		return "model call"
	case stepdiff.KindTool:
		return "tool call " + st.Name
	case stepdiff.KindRetrieval:
		return "retrieval " + st.Name
	}
	return st.Kind
}

func trialText(t int) string {
	if t < 0 {
		return "?"
	}
	return strconv.Itoa(t)
}

// CellField is one field of a step as a cell shows it: the text, cut
// where it differs from the other side's (Mid is the differing part).
type CellField struct {
	Label         string
	Pre, Mid, Suf string
	Changed       bool
	Absent        bool // this side's step has no such field; the other's has
}

// cellContext is how much shared text is kept either side of a change,
// and cellMax how much of a field is shown at all.
const (
	cellContext = 80
	cellMax     = 600
)

// Fields lays out a cell's fields, marking what differs from the other
// side: its own fields in order, then those only the other side has.
func (c *CompareCell) Fields(row CompareRow, side string) []CellField {
	var out []CellField
	diff := map[string]stepdiff.FieldDiff{}
	for _, d := range row.Diffs {
		diff[d.Field] = d
	}
	seen := map[string]bool{}
	for _, f := range c.Step.Fields {
		seen[f.Name] = true
		d, changed := diff[f.Name]
		if !changed {
			out = append(out, CellField{Label: fieldLabel(f.Name), Pre: clipRunes(f.Shown(), cellMax)})
			continue
		}
		pre, a, b, suf := d.Split()
		mid := a
		if side == "b" {
			mid = b
		}
		out = append(out, CellField{Label: fieldLabel(f.Name), Pre: clipStart(pre, cellContext), Mid: clipRunes(mid, cellMax), Suf: clipRunes(suf, cellContext), Changed: true})
	}
	for _, d := range row.Diffs {
		if !seen[d.Field] && ((side == "a" && d.AbsentA) || (side == "b" && d.AbsentB)) {
			out = append(out, CellField{Label: fieldLabel(d.Field), Changed: true, Absent: true})
		}
	}
	return out
}

// clipRunes keeps the first n runes of s.
func clipRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// clipStart keeps the last n runes of s.
func clipStart(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return "…" + string(r[len(r)-n:])
	}
	return s
}

// compareURL is the comparison of a with b (traces, or runs).
func compareURL(runs bool, a, b string) string {
	base := "/compare"
	if runs {
		base = "/compare/runs"
	}
	q := url.Values{}
	if a != "" {
		q.Set("a", a)
	}
	if b != "" {
		q.Set("b", b)
	}
	if len(q) == 0 {
		return base
	}
	return base + "?" + q.Encode()
}

func fieldsCompared(runs bool) string {
	if runs {
		return "tools, arguments, results and model answers"
	}
	return "tools, arguments, results, documents and model answers (as far as the spans carry them)"
}

func pickerPlaceholder(runs bool) string {
	if runs {
		return "FILE.jsonl/RUN-ID"
	}
	return "trace id or a prefix of one"
}

func pickerWhat(runs bool) string {
	if runs {
		return "Runs"
	}
	return "Traces"
}

// diffPieces cuts a differing field for one side: the shared start (its
// end), the part that differs, the shared end (its start).
func diffPieces(d stepdiff.FieldDiff, side string) (pre, mid, suf string) {
	p, a, b, s := d.Split()
	mid = a
	if side == "b" {
		mid = b
	}
	return clipStart(p, cellContext), clipRunes(mid, cellMax), clipRunes(s, cellContext)
}

func markClass(side string) string {
	if side == "a" {
		return "del"
	}
	return "ins"
}
