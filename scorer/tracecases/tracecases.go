// Package tracecases turns stored traces into cases and trials: the
// trace → dataset loop for agents that are not on Loomwork's runtime and
// only send OTLP spans (`loom-eval cases from-traces`).
//
// Each trace that matches a Filter becomes one trial, with its trace id as
// provenance, of the case its root span names with loomwork.case.id
// (semconv.AttrCaseID); a trace without one becomes a case of its own,
// "trace-" and the first 12 hex digits of its id, and the Report lists it.
// A case's task is its first trace's input, read as graders read it
// (grade.TranscriptFromSpans: the root's first user message, else
// OpenInference's input.value, else the first model call's), and its
// expected tools and required evidence are what its traces did: the
// distinct tools they called and the evidence they cited, tagged
// "from-traces" so the user knows to review them. The scorer's
// fields (duration, cost, tokens, success, tools) are not copied into the
// trial: `loom-eval score --store URL` derives them from the same trace.
//
// The package reads through Reader (a part of the store contract) and does
// no I/O of its own. Its output is deterministic: cases sorted by id,
// trials by case and trial number, fields in the datasets types' order, so
// the same store gives the same bytes.
package tracecases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/grade"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// Reader is the part of a trace store Build reads: the trace list (its
// time, service and agent filters) and each listed trace's spans.
type Reader interface {
	ListTraces(ctx context.Context, q store.TraceQuery) (store.TracePage, error)
	GetTrace(ctx context.Context, traceID string) ([]store.Span, error)
}

// Filter selects the traces to read.
type Filter struct {
	// Since and Until bound the trace's start: Since <= start < Until. Zero
	// means unbounded.
	Since, Until time.Time
	// Service and Agent match exactly, as `loom-eval traces list` does: a
	// trace matches when any of its spans has that service or agent name.
	Service, Agent string
	// Attributes must all hold on the root span: the span attribute (else
	// the resource attribute) of that key, written as text (an int in
	// decimal, a bool as true/false), equals the value.
	Attributes map[string]string
	// Limit reads at most this many matching traces, the most recent ones;
	// 0 reads them all.
	Limit int
}

// Validate reports every problem with f, naming the field.
func (f Filter) Validate() error {
	var errs []error
	if f.Limit < 0 {
		errs = append(errs, fmt.Errorf("limit %d is negative", f.Limit))
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		errs = append(errs, fmt.Errorf("until %s is not after since %s", f.Until.Format(time.RFC3339Nano), f.Since.Format(time.RFC3339Nano)))
	}
	for k := range f.Attributes {
		if strings.TrimSpace(k) == "" {
			errs = append(errs, errors.New("attributes: an empty key"))
		}
	}
	return errors.Join(errs...)
}

// TagFromTraces is the tag of every case Build writes: its task, expected
// tools and required evidence are what the traces did, to be reviewed.
const TagFromTraces = "from-traces"

// Where a case's trial numbers came from (CaseReport.TrialsFrom).
const (
	TrialsByStart = "start order"
	TrialsByAttr  = semconv.AttrTrial
)

// Report says what Build read and what it made of it, including what the
// user should review.
type Report struct {
	// Listed is how many traces the store listed for the time, service and
	// agent filters; AttrFilteredOut how many of those the attribute
	// filter left out; Read how many became trials.
	Listed          int `json:"traces_listed"`
	AttrFilteredOut int `json:"traces_filtered_out_by_attributes"`
	Read            int `json:"traces_read"`
	Cases           int `json:"cases"`
	Trials          int `json:"trials"`
	// LimitReached: Filter.Limit stopped the reading; older traces may
	// match too.
	LimitReached bool `json:"limit_reached"`
	// WithoutCaseID lists the traces whose root has no loomwork.case.id,
	// each with the case id it was given.
	WithoutCaseID []Unmarked `json:"without_case_id"`
	// WithoutTask lists the cases none of whose traces carries the task
	// (content capture is off in most SDKs by default): their task is a
	// placeholder to replace.
	WithoutTask []string     `json:"cases_without_task"`
	PerCase     []CaseReport `json:"per_case"`
}

// Unmarked is a trace without loomwork.case.id.
type Unmarked struct {
	TraceID string `json:"trace_id"`
	CaseID  string `json:"case_id"`
	// Why says what the root had instead (nothing, or a value that is not
	// a case id).
	Why string `json:"why"`
}

// CaseReport is one case as Build made it.
type CaseReport struct {
	ID string `json:"id"`
	// Traces are the case's trace ids in trial order.
	Traces     []string `json:"traces"`
	TrialsFrom string   `json:"trials_from"`
	// ExpectedTools and RequiredEvidence are what the case got from the
	// traces (a union over them when there are several).
	ExpectedTools    []string `json:"expected_tools"`
	RequiredEvidence []string `json:"required_evidence"`
	// Answer is the first trace's final answer ("" when its content was
	// not captured): what the agent said, for a reviewer to judge, never
	// copied into the case as its expected answer.
	Answer string `json:"answer,omitempty"`
	// Notes say where the traces disagreed and what was kept.
	Notes []string `json:"notes,omitempty"`
}

// UnmarkedCaseID is the case id of a trace whose root has no
// loomwork.case.id: "trace-" and the first 12 hex digits of its id.
func UnmarkedCaseID(traceID string) string {
	return "trace-" + traceID[:min(12, len(traceID))]
}

// read is one trace as Build uses it.
type read struct {
	traceID  string
	start    time.Time
	caseID   string
	marked   bool
	caseWhy  string // why the root has no usable case id
	trial    int    // -1: no usable loomwork.trial
	trialWhy string
	task     string
	answer   string
	agent    string
	label    string
	model    string
	tools    []string // distinct, sorted
	cited    []string // distinct, sorted
}

// Build reads the traces f selects and returns their cases and trials. An
// error from the store, or a listed trace the store cannot return, is an
// error naming the trace; nothing is built on a partial read.
func Build(ctx context.Context, r Reader, f Filter) ([]datasets.Case, []datasets.Trial, Report, error) {
	var rep Report
	if err := f.Validate(); err != nil {
		return nil, nil, rep, fmt.Errorf("cases from traces: filter: %w", err)
	}
	var reads []read
	q := store.TraceQuery{Start: f.Since, End: f.Until, Service: f.Service, Agent: f.Agent,
		SortBy: store.SortStart, Limit: store.MaxPageSize}
pages:
	for {
		page, err := r.ListTraces(ctx, q)
		if err != nil {
			return nil, nil, rep, fmt.Errorf("cases from traces: list traces: %w", err)
		}
		for _, sum := range page.Traces {
			if f.Limit > 0 && len(reads) == f.Limit {
				rep.LimitReached = true
				break pages
			}
			rep.Listed++
			spans, err := r.GetTrace(ctx, sum.TraceID)
			if err != nil {
				return nil, nil, rep, fmt.Errorf("cases from traces: trace %s: %w", sum.TraceID, err)
			}
			rd, ok, err := readTrace(spans, f.Attributes)
			if err != nil {
				return nil, nil, rep, fmt.Errorf("cases from traces: trace %s: %w", sum.TraceID, err)
			}
			if !ok {
				rep.AttrFilteredOut++
				continue
			}
			reads = append(reads, rd)
		}
		if page.NextPageToken == "" {
			break
		}
		q.PageToken = page.NextPageToken
	}
	cases, trials := assemble(reads, &rep)
	return cases, trials, rep, nil
}

// MaxSelected bounds how many traces one FromTraces call reads.
const MaxSelected = 500

// TraceGetter is the part of a trace store FromTraces reads.
type TraceGetter interface {
	GetTrace(ctx context.Context, traceID string) ([]store.Span, error)
}

// FromTraces is Build over traces chosen by id (a person's selection in
// the UI) rather than by a filter: every id must be a stored trace, and
// each is read once however often it is given.
func FromTraces(ctx context.Context, r TraceGetter, traceIDs []string) ([]datasets.Case, []datasets.Trial, Report, error) {
	var rep Report
	if len(traceIDs) == 0 {
		return nil, nil, rep, errors.New("cases from traces: no trace selected")
	}
	if len(traceIDs) > MaxSelected {
		return nil, nil, rep, fmt.Errorf("cases from traces: %d traces selected, at most %d at a time", len(traceIDs), MaxSelected)
	}
	seen := map[string]bool{}
	var reads []read
	for _, id := range traceIDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		rep.Listed++
		spans, err := r.GetTrace(ctx, id)
		if err != nil {
			return nil, nil, rep, fmt.Errorf("cases from traces: trace %s: %w", id, err)
		}
		rd, _, err := readTrace(spans, nil)
		if err != nil {
			return nil, nil, rep, fmt.Errorf("cases from traces: trace %s: %w", id, err)
		}
		reads = append(reads, rd)
	}
	cases, trials := assemble(reads, &rep)
	return cases, trials, rep, nil
}

// assemble groups reads into cases (one per case id, sorted) and trials,
// filling rep's counts and per-case reports.
func assemble(reads []read, rep *Report) ([]datasets.Case, []datasets.Trial) {
	rep.Read = len(reads)
	for _, rd := range reads {
		if !rd.marked {
			rep.WithoutCaseID = append(rep.WithoutCaseID, Unmarked{TraceID: rd.traceID, CaseID: rd.caseID, Why: rd.caseWhy})
		}
	}
	sort.Slice(rep.WithoutCaseID, func(i, j int) bool { return rep.WithoutCaseID[i].TraceID < rep.WithoutCaseID[j].TraceID })

	byCase := map[string][]read{}
	for _, rd := range reads {
		byCase[rd.caseID] = append(byCase[rd.caseID], rd)
	}
	ids := make([]string, 0, len(byCase))
	for id := range byCase {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var (
		cases  []datasets.Case
		trials []datasets.Trial
	)
	for _, id := range ids {
		rs := byCase[id]
		sort.Slice(rs, func(i, j int) bool {
			if !rs[i].start.Equal(rs[j].start) {
				return rs[i].start.Before(rs[j].start)
			}
			return rs[i].traceID < rs[j].traceID
		})
		c, ts, cr := buildCase(id, rs)
		if !hasTask(rs) {
			rep.WithoutTask = append(rep.WithoutTask, id)
		}
		cases = append(cases, c)
		trials = append(trials, ts...)
		rep.PerCase = append(rep.PerCase, cr)
	}
	rep.Cases, rep.Trials = len(cases), len(trials)
	return cases, trials
}

func hasTask(rs []read) bool {
	for _, r := range rs {
		if r.task != "" {
			return true
		}
	}
	return false
}

// buildCase makes one case and its trials from its traces, in start order.
func buildCase(id string, rs []read) (datasets.Case, []datasets.Trial, CaseReport) {
	cr := CaseReport{ID: id, TrialsFrom: TrialsByStart}
	c := datasets.Case{ID: id, Tags: []string{TagFromTraces}}

	// The task: the first trace's that has one.
	for _, r := range rs {
		if r.task == "" {
			continue
		}
		if c.Task == "" {
			c.Task = r.task
			continue
		}
		if r.task != c.Task {
			cr.Notes = append(cr.Notes, fmt.Sprintf("trace %s has another task (%q); kept trace %s's", r.traceID, clip(r.task, 60), firstWithTask(rs)))
		}
	}
	if c.Task == "" {
		c.Task = fmt.Sprintf("(no task in the traces of this case, e.g. trace %s: its root span has no %s or input.value and no model call has a user message; write the task here)", rs[0].traceID, semconv.AttrInputMessages)
		cr.Notes = append(cr.Notes, "no trace carries the task (content capture off?): the case's task is a placeholder to replace")
	}

	// Expected tools and required evidence: the union, sorted.
	tools, cited := map[string]bool{}, map[string]bool{}
	citedDiffer := false
	for _, r := range rs {
		for _, t := range r.tools {
			tools[t] = true
		}
		for _, e := range r.cited {
			cited[e] = true
		}
		if !slices.Equal(r.cited, rs[0].cited) {
			citedDiffer = true
		}
	}
	c.ExpectedTools = sortedKeys(tools)
	c.RequiredEvidence = sortedKeys(cited)
	if len(rs) > 1 {
		for _, r := range rs {
			if !slices.Equal(r.tools, c.ExpectedTools) {
				cr.Notes = append(cr.Notes, fmt.Sprintf("the %d traces called different tools: expected_tools is their union", len(rs)))
				break
			}
		}
		if citedDiffer {
			c.EvidenceMatch = datasets.EvidenceAny
			cr.Notes = append(cr.Notes, fmt.Sprintf("the %d traces cited different evidence: required_evidence is their union, with evidence_match \"any\"", len(rs)))
		}
	}
	cr.ExpectedTools, cr.RequiredEvidence = nonNil(c.ExpectedTools), nonNil(c.RequiredEvidence)

	// Trial numbers: loomwork.trial when every trace gives a distinct one,
	// else start order.
	numbers := make([]int, len(rs))
	byAttr, seen := true, map[int]string{}
	var why []string
	for i, r := range rs {
		numbers[i] = i
		switch {
		case r.trial < 0:
			byAttr = false
			if r.trialWhy != "" {
				why = append(why, fmt.Sprintf("trace %s: %s", r.traceID, r.trialWhy))
			}
		case seen[r.trial] != "":
			byAttr = false
			why = append(why, fmt.Sprintf("traces %s and %s both say %s %d", seen[r.trial], r.traceID, semconv.AttrTrial, r.trial))
		default:
			seen[r.trial] = r.traceID
		}
	}
	if byAttr {
		cr.TrialsFrom = TrialsByAttr
		for i, r := range rs {
			numbers[i] = r.trial
		}
	} else if len(seen) > 0 || len(why) > 0 {
		cr.Notes = append(cr.Notes, fmt.Sprintf("%s not used, trials numbered in start order: %s", semconv.AttrTrial, strings.Join(why, "; ")))
	}

	trials := make([]datasets.Trial, len(rs))
	for i, r := range rs {
		trials[i] = datasets.Trial{CaseID: id, Trial: numbers[i], ModelLabel: r.label, Model: r.model, Agent: r.agent, TraceID: r.traceID}
	}
	sort.Slice(trials, func(i, j int) bool { return trials[i].Trial < trials[j].Trial })
	for _, t := range trials {
		cr.Traces = append(cr.Traces, t.TraceID)
	}
	for _, r := range rs {
		if r.answer != "" {
			cr.Answer = r.answer
			break
		}
	}
	return c, trials, cr
}

func firstWithTask(rs []read) string {
	for _, r := range rs {
		if r.task != "" {
			return r.traceID
		}
	}
	return ""
}

// readTrace reads one trace; ok is false when the attribute filter leaves
// it out.
func readTrace(spans []store.Span, attrs map[string]string) (read, bool, error) {
	if len(spans) == 0 {
		return read{}, false, errors.New("the store returned no spans")
	}
	root := scorer.RootSpan(spans)
	rs := &spans[root]
	for k, want := range attrs {
		v, ok := rs.Attributes[k]
		if !ok {
			v, ok = rs.ResourceAttributes[k]
		}
		if got, scalar := attrText(v); !ok || !scalar || got != want {
			return read{}, false, nil
		}
	}
	d, err := scorer.DeriveFromTrace(spans, nil)
	if err != nil {
		return read{}, false, err
	}
	rd := read{traceID: rs.TraceID, start: rs.StartTime, trial: -1, label: d.ModelLabel, model: d.Model}
	rd.caseID, rd.marked, rd.caseWhy = caseIDOf(rs)
	if !rd.marked {
		rd.caseID = UnmarkedCaseID(rs.TraceID)
	} else {
		rd.trial, rd.trialWhy = trialOf(rs)
	}
	rd.agent = rs.AgentName
	if rd.agent == "" {
		for _, i := range startOrder(spans) {
			if a := spans[i].AgentName; a != "" {
				rd.agent = a
				break
			}
		}
	}
	// The task as graders read it (grade.TranscriptFromSpans): the root's
	// first user message, else its input.value, else the first model
	// call's first user message.
	tr := grade.TranscriptFromSpans(spans)
	rd.task = strings.TrimSpace(tr.Task)
	rd.answer = strings.TrimSpace(tr.Answer)
	rd.tools = distinctSorted(d.ToolsCalled)
	rd.cited = distinctSorted(d.EvidenceCited)
	return rd, true, nil
}

// caseIDOf reads loomwork.case.id from the root: a non-empty string (an
// int is taken in decimal). why says what was wrong when ok is false.
func caseIDOf(root *store.Span) (id string, ok bool, why string) {
	v, present := root.Attributes[semconv.AttrCaseID]
	if !present {
		return "", false, fmt.Sprintf("the root span %q has no %s", root.Name, semconv.AttrCaseID)
	}
	switch x := v.(type) {
	case string:
		if s := strings.TrimSpace(x); s != "" {
			return s, true, ""
		}
		return "", false, fmt.Sprintf("the root span %q has an empty %s", root.Name, semconv.AttrCaseID)
	case int64:
		return strconv.FormatInt(x, 10), true, ""
	}
	return "", false, fmt.Sprintf("the root span %q has a %s that is not a string (%T)", root.Name, semconv.AttrCaseID, v)
}

// trialOf reads loomwork.trial from the root: a non-negative int (a double
// with an integral value is accepted). -1 and why when unusable, -1 and ""
// when absent.
func trialOf(root *store.Span) (int, string) {
	v, present := root.Attributes[semconv.AttrTrial]
	if !present {
		return -1, ""
	}
	switch x := v.(type) {
	case int64:
		if x >= 0 && x <= math.MaxInt32 {
			return int(x), ""
		}
	case float64:
		if x >= 0 && x <= math.MaxInt32 && x == math.Trunc(x) {
			return int(x), ""
		}
	}
	return -1, fmt.Sprintf("%s %v is not a trial number (a non-negative int)", semconv.AttrTrial, v)
}

// attrText writes a scalar attribute value as the attribute filter
// compares it.
func attrText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int64:
		return strconv.FormatInt(x, 10), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}

func startOrder(spans []store.Span) []int {
	order := make([]int, len(spans))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return spans[order[a]].StartTime.Before(spans[order[b]].StartTime) })
	return order
}

func distinctSorted(v []string) []string {
	m := map[string]bool{}
	for _, s := range v {
		m[s] = true
	}
	return sortedKeys(m)
}

func sortedKeys(m map[string]bool) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// WriteJSONL writes items one JSON object a line, as datasets reads them
// back (cases or trials), without HTML escaping so a task reads as it was
// asked.
func WriteJSONL[T any](w io.Writer, items []T) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range items {
		if err := enc.Encode(&items[i]); err != nil {
			return fmt.Errorf("write line %d: %w", i+1, err)
		}
	}
	return nil
}

// TrialRef is what a trace's root span says it is a trial of, read as
// Build reads it.
type TrialRef struct {
	TraceID  string `json:"trace_id"`
	RootName string `json:"root_name"`
	// CaseID is the root's loomwork.case.id; "" when Marked is false.
	CaseID string `json:"case_id,omitempty"`
	Marked bool   `json:"marked"`
	// CaseWhy says what the root had instead of a case id, when unmarked.
	CaseWhy string `json:"case_why,omitempty"`
	// Trial is the root's loomwork.trial, -1 when it has none usable
	// (Build then numbers the case's traces in start order).
	Trial    int    `json:"trial"`
	TrialWhy string `json:"trial_why,omitempty"`
}

// TrialOf reads which case and trial a trace is from its root span
// (scorer.RootSpan): loomwork.case.id and loomwork.trial, with what is
// wrong when they are missing or unusable.
func TrialOf(spans []store.Span) TrialRef {
	root := scorer.RootSpan(spans)
	if root < 0 {
		return TrialRef{Trial: -1, CaseWhy: "the trace has no spans"}
	}
	rs := &spans[root]
	ref := TrialRef{TraceID: rs.TraceID, RootName: rs.Name, Trial: -1}
	ref.CaseID, ref.Marked, ref.CaseWhy = caseIDOf(rs)
	if ref.Marked {
		ref.Trial, ref.TrialWhy = trialOf(rs)
		if ref.Trial < 0 && ref.TrialWhy == "" {
			ref.TrialWhy = fmt.Sprintf("the root span %q has no %s", rs.Name, semconv.AttrTrial)
		}
	}
	return ref
}
