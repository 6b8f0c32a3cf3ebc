package tracecases_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/tracecases"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// run describes one agent run to store as a trace, shaped as an OTel
// GenAI SDK sends it (the typed fields are what the collector's mapping
// derives from the attributes).
type run struct {
	id       int // the trace id's distinguishing digit(s)
	at       time.Duration
	service  string
	agent    string
	caseID   any // nil: not set
	trial    any // nil: not set
	task     string
	taskAttr string // semconv.AttrInputMessages (default) or "input.value" or "chat" (on the first chat span only)
	answer   string
	tools    []string
	cited    []string
	scripted bool
	rootAttr map[string]any
	resource map[string]any
}

func traceID(n int) string { return fmt.Sprintf("%08x%024x", 0x4bf90000+n, n) }

func (r run) spans() []store.Span {
	tid := traceID(r.id)
	start := t0.Add(r.at)
	sid := func(k int) string { return fmt.Sprintf("%016x", r.id*100+k) }
	svc := r.service
	if svc == "" {
		svc = "toy"
	}
	res := store.Attributes{"service.name": svc}
	for k, v := range r.resource {
		res[k] = v
	}
	msgs := func(role, text string) string {
		return fmt.Sprintf(`[{"role":%q,"parts":[{"type":"text","content":%q}]}]`, role, text)
	}
	root := store.Span{TraceID: tid, SpanID: sid(1), Name: "invoke_agent " + r.agent, Kind: "internal",
		StartTime: start, EndTime: start.Add(time.Second), StatusCode: store.StatusUnset, ServiceName: svc,
		Operation: semconv.OpInvokeAgent, AgentName: r.agent, ResourceAttributes: res,
		Attributes: store.Attributes{semconv.AttrOperationName: semconv.OpInvokeAgent}}
	if r.agent != "" {
		root.Attributes[semconv.AttrAgentName] = r.agent
	}
	if r.caseID != nil {
		root.Attributes[semconv.AttrCaseID] = r.caseID
	}
	if r.trial != nil {
		root.Attributes[semconv.AttrTrial] = r.trial
	}
	for k, v := range r.rootAttr {
		root.Attributes[k] = v
	}
	chat := store.Span{TraceID: tid, SpanID: sid(2), ParentSpanID: root.SpanID, Name: "chat toy-model", Kind: "client",
		StartTime: start.Add(10 * time.Millisecond), EndTime: start.Add(100 * time.Millisecond), StatusCode: store.StatusUnset,
		ServiceName: svc, Operation: semconv.OpChat, RequestModel: "toy-model", ResponseModel: "toy-model-1",
		HasUsage: true, InputTokens: 100, OutputTokens: 20,
		Attributes: store.Attributes{semconv.AttrOperationName: semconv.OpChat, semconv.AttrRequestModel: "toy-model"}}
	if r.scripted {
		chat.Attributes[semconv.AttrModelLabel] = datasets.LabelScripted
	}
	if r.task != "" {
		switch r.taskAttr {
		case "", semconv.AttrInputMessages:
			root.Attributes[semconv.AttrInputMessages] = msgs("user", r.task)
		case "chat":
			chat.Attributes[semconv.AttrInputMessages] = `[{"role":"system","content":"be brief"},{"role":"user","content":` + fmt.Sprintf("%q", r.task) + `}]`
		default:
			root.Attributes[r.taskAttr] = r.task
		}
	}
	if r.answer != "" {
		root.Attributes[semconv.AttrOutputMessages] = msgs("assistant", r.answer)
	}
	if len(r.cited) > 0 {
		cs := make([]any, len(r.cited))
		for i, c := range r.cited {
			cs[i] = c
		}
		root.Attributes[semconv.AttrCitations] = cs
		root.CitedDocs = r.cited
	}
	out := []store.Span{root, chat}
	for i, name := range r.tools {
		at := start.Add(time.Duration(200+100*i) * time.Millisecond)
		out = append(out, store.Span{TraceID: tid, SpanID: sid(10 + i), ParentSpanID: root.SpanID, Name: "execute_tool " + name,
			Kind: "internal", StartTime: at, EndTime: at.Add(50 * time.Millisecond), StatusCode: store.StatusUnset,
			ServiceName: svc, Operation: semconv.OpExecuteTool, ToolName: name,
			Attributes: store.Attributes{semconv.AttrOperationName: semconv.OpExecuteTool, semconv.AttrToolName: name}})
	}
	return out
}

func openStore(t *testing.T, runs ...run) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "traces.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Shutdown(context.Background()) })
	var spans []store.Span
	for _, r := range runs {
		spans = append(spans, r.spans()...)
	}
	if err := st.WriteSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	return st
}

func build(t *testing.T, r tracecases.Reader, f tracecases.Filter) ([]datasets.Case, []datasets.Trial, tracecases.Report) {
	t.Helper()
	cases, trials, rep, err := tracecases.Build(context.Background(), r, f)
	if err != nil {
		t.Fatal(err)
	}
	return cases, trials, rep
}

func jsonl[T any](t *testing.T, items []T) string {
	t.Helper()
	var b bytes.Buffer
	if err := tracecases.WriteJSONL(&b, items); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// suite is a realistic mix: a case run three times whose runs did not all
// do the same, a case run once, a run without a case id, a run of another
// service.
var suite = []run{
	{id: 1, at: 0, agent: "calc", caseID: "mean", task: "What is the mean of 1, 2 and 4?", answer: "2.33",
		tools: []string{"calculator"}, cited: []string{"formulas/mean.md"}, scripted: true},
	{id: 2, at: 2 * time.Minute, agent: "calc", caseID: "mean", task: "What is the mean of 1, 2 and 4?", answer: "2.3",
		tools: []string{"calculator", "search", "calculator"}, cited: []string{"formulas/mean.md", "formulas/avg.md"}, scripted: true},
	{id: 3, at: time.Minute, agent: "calc", caseID: "mean", task: "What is the mean of 1, 2 and 4?", answer: "2.33",
		tools: []string{"calculator"}, cited: []string{"formulas/mean.md"}, scripted: true},
	{id: 4, at: 30 * time.Second, agent: "calc", caseID: "sum", task: "What is 2 + 2?", answer: "4", tools: []string{"calculator"}},
	{id: 5, at: 3 * time.Minute, agent: "calc", task: "Unmarked question", answer: "?"},
	{id: 6, at: 4 * time.Minute, service: "other", agent: "writer", caseID: "essay", task: "Write an essay."},
}

func TestBuildMakesOneTrialPerTraceAndOneCasePerCaseID(t *testing.T) {
	st := openStore(t, suite...)
	cases, trials, rep := build(t, st, tracecases.Filter{})

	var ids []string
	for _, c := range cases {
		ids = append(ids, c.ID)
	}
	unmarked := tracecases.UnmarkedCaseID(traceID(5))
	if unmarked != "trace-4bf900050000" {
		t.Fatalf("UnmarkedCaseID = %q", unmarked)
	}
	if want := []string{"essay", "mean", "sum", unmarked}; !slices.Equal(ids, want) {
		t.Fatalf("case ids = %v, want %v (sorted)", ids, want)
	}
	mean := cases[1]
	if mean.Task != "What is the mean of 1, 2 and 4?" {
		t.Errorf("mean task = %q", mean.Task)
	}
	if !slices.Equal(mean.ExpectedTools, []string{"calculator", "search"}) {
		t.Errorf("mean expected tools = %v, want the distinct union [calculator search]", mean.ExpectedTools)
	}
	if !slices.Equal(mean.RequiredEvidence, []string{"formulas/avg.md", "formulas/mean.md"}) || mean.EvidenceMatch != datasets.EvidenceAny {
		t.Errorf("mean evidence = %v match %q, want the union with match any (the traces cited different ids)", mean.RequiredEvidence, mean.EvidenceMatch)
	}
	if !slices.Equal(mean.Tags, []string{tracecases.TagFromTraces}) {
		t.Errorf("mean tags = %v", mean.Tags)
	}
	sum := cases[2]
	if sum.EvidenceMatch != "" || sum.RequiredEvidence != nil || !slices.Equal(sum.ExpectedTools, []string{"calculator"}) {
		t.Errorf("sum case = %+v", sum)
	}
	for _, c := range cases {
		if err := c.Validate(); err != nil {
			t.Errorf("case %s does not validate: %v", c.ID, err)
		}
	}

	// Trials: per case in root start order (trace 1 at 0, 3 at 1m, 2 at 2m).
	type tr struct {
		c     string
		n     int
		trace string
		label string
	}
	var got []tr
	for _, x := range trials {
		got = append(got, tr{x.CaseID, x.Trial, x.TraceID, x.ModelLabel})
		if err := x.Validate(); err != nil {
			t.Errorf("trial %s/%d does not validate: %v", x.CaseID, x.Trial, err)
		}
	}
	want := []tr{
		{"essay", 0, traceID(6), datasets.LabelLive},
		{"mean", 0, traceID(1), datasets.LabelScripted},
		{"mean", 1, traceID(3), datasets.LabelScripted},
		{"mean", 2, traceID(2), datasets.LabelScripted},
		{"sum", 0, traceID(4), datasets.LabelLive},
		{unmarked, 0, traceID(5), datasets.LabelLive},
	}
	if !slices.Equal(got, want) {
		t.Errorf("trials =\n%v\nwant\n%v", got, want)
	}
	if trials[1].Agent != "calc" || trials[1].Model != "toy-model-1" || trials[0].Agent != "writer" {
		t.Errorf("trial agent/model = %q/%q, %q", trials[1].Agent, trials[1].Model, trials[0].Agent)
	}

	if rep.Listed != 6 || rep.Read != 6 || rep.Cases != 4 || rep.Trials != 6 || rep.LimitReached {
		t.Errorf("report counts = %+v", rep)
	}
	if len(rep.WithoutCaseID) != 1 || rep.WithoutCaseID[0].TraceID != traceID(5) || rep.WithoutCaseID[0].CaseID != unmarked ||
		!strings.Contains(rep.WithoutCaseID[0].Why, "has no "+semconv.AttrCaseID) {
		t.Errorf("without case id = %+v", rep.WithoutCaseID)
	}
	var meanRep tracecases.CaseReport
	for _, cr := range rep.PerCase {
		if cr.ID == "mean" {
			meanRep = cr
		}
	}
	notes := strings.Join(meanRep.Notes, "\n")
	if !slices.Equal(meanRep.Traces, []string{traceID(1), traceID(3), traceID(2)}) || meanRep.TrialsFrom != tracecases.TrialsByStart ||
		!strings.Contains(notes, "3 traces called different tools: expected_tools is their union") ||
		!strings.Contains(notes, "cited different evidence") {
		t.Errorf("mean report = %+v", meanRep)
	}
}

func TestBuildFilters(t *testing.T) {
	runs := []run{
		{id: 1, at: 0, agent: "calc", caseID: "a", task: "q", resource: map[string]any{"service.version": "1"}},
		{id: 2, at: time.Hour, agent: "calc", caseID: "a", task: "q", resource: map[string]any{"service.version": "2"}},
		{id: 3, at: 2 * time.Hour, agent: "calc", caseID: "b", task: "q", rootAttr: map[string]any{"run.id": "r2", "attempt": int64(3)},
			resource: map[string]any{"service.version": "2"}},
		{id: 4, at: 3 * time.Hour, service: "other", agent: "writer", caseID: "c", task: "q"},
	}
	st := openStore(t, runs...)
	traces := func(trials []datasets.Trial) []string {
		var ids []string
		for _, tr := range trials {
			ids = append(ids, tr.TraceID)
		}
		slices.Sort(ids)
		return ids
	}
	for _, tc := range []struct {
		name   string
		f      tracecases.Filter
		want   []string
		listed int
	}{
		{"since", tracecases.Filter{Since: t0.Add(time.Hour)}, []string{traceID(2), traceID(3), traceID(4)}, 3},
		{"until", tracecases.Filter{Until: t0.Add(time.Hour)}, []string{traceID(1)}, 1},
		{"since and until", tracecases.Filter{Since: t0.Add(time.Hour), Until: t0.Add(2 * time.Hour)}, []string{traceID(2)}, 1},
		{"service", tracecases.Filter{Service: "other"}, []string{traceID(4)}, 1},
		{"agent", tracecases.Filter{Agent: "calc"}, []string{traceID(1), traceID(2), traceID(3)}, 3},
		{"resource attribute", tracecases.Filter{Attributes: map[string]string{"service.version": "2"}}, []string{traceID(2), traceID(3)}, 4},
		{"span attributes, an int as text", tracecases.Filter{Attributes: map[string]string{"run.id": "r2", "attempt": "3"}}, []string{traceID(3)}, 4},
		{"no match", tracecases.Filter{Attributes: map[string]string{"run.id": "r9"}}, nil, 4},
		{"limit keeps the most recent", tracecases.Filter{Agent: "calc", Limit: 2}, []string{traceID(2), traceID(3)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, trials, rep := build(t, st, tc.f)
			if got := traces(trials); !slices.Equal(got, tc.want) {
				t.Errorf("traces = %v, want %v", got, tc.want)
			}
			if rep.Listed != tc.listed || rep.Read != len(tc.want) || rep.AttrFilteredOut != tc.listed-len(tc.want) {
				t.Errorf("report listed %d read %d filtered out %d, want %d, %d, %d", rep.Listed, rep.Read, rep.AttrFilteredOut, tc.listed, len(tc.want), tc.listed-len(tc.want))
			}
			if rep.LimitReached != (tc.f.Limit > 0) {
				t.Errorf("limit reached = %v", rep.LimitReached)
			}
		})
	}

	// Bad filters are errors naming the field, before the store is read.
	for _, f := range []tracecases.Filter{
		{Limit: -1},
		{Since: t0.Add(time.Hour), Until: t0},
		{Attributes: map[string]string{" ": "x"}},
	} {
		if _, _, _, err := tracecases.Build(context.Background(), st, f); err == nil || !strings.Contains(err.Error(), "filter") {
			t.Errorf("Build(%+v) error = %v, want a filter error", f, err)
		}
	}
}

func TestBuildIsDeterministic(t *testing.T) {
	// The same traces written in another order, into another store, give
	// the same bytes; so does a second build.
	rev := slices.Clone(suite)
	slices.Reverse(rev)
	a, b := openStore(t, suite...), openStore(t, rev...)
	ca, ta, _ := build(t, a, tracecases.Filter{})
	ca2, ta2, _ := build(t, a, tracecases.Filter{})
	cb, tb, _ := build(t, b, tracecases.Filter{})
	for _, other := range [][2]string{{jsonl(t, ca2), jsonl(t, ta2)}, {jsonl(t, cb), jsonl(t, tb)}} {
		if jsonl(t, ca) != other[0] || jsonl(t, ta) != other[1] {
			t.Fatalf("builds differ:\n%s%s\nvs\n%s%s", jsonl(t, ca), jsonl(t, ta), other[0], other[1])
		}
	}
	// The files read back strictly as they were built.
	cs, err := datasets.ReadCases(strings.NewReader(jsonl(t, ca)), "cases.jsonl")
	if err != nil || len(cs) != len(ca) {
		t.Fatalf("ReadCases: %v (%d cases)", err, len(cs))
	}
	ts, err := datasets.ReadTrials(strings.NewReader(jsonl(t, ta)), "trials.jsonl")
	if err != nil || len(ts) != len(ta) {
		t.Fatalf("ReadTrials: %v (%d trials)", err, len(ts))
	}
	if first := strings.SplitN(jsonl(t, ta), "\n", 2)[0]; first != `{"case_id":"essay","trial":0,"model_label":"live","model":"toy-model-1","agent":"writer","trace_id":"`+traceID(6)+`"}` {
		t.Errorf("first trial line = %s", first)
	}
}

func TestTaskComesFromTheRootThenTheFirstModelCall(t *testing.T) {
	st := openStore(t,
		run{id: 1, caseID: "genai", task: "from gen_ai.input.messages"},
		run{id: 2, at: time.Second, caseID: "openinference", task: "from input.value", taskAttr: "input.value"},
		run{id: 3, at: 2 * time.Second, caseID: "chat", task: "from the chat span", taskAttr: "chat"},
		run{id: 4, at: 3 * time.Second, caseID: "none"},
		run{id: 5, at: 4 * time.Second, caseID: "later", task: "first"},
		run{id: 6, at: 5 * time.Second, caseID: "later", task: "second"},
	)
	cases, _, rep := build(t, st, tracecases.Filter{})
	tasks := map[string]string{}
	for _, c := range cases {
		tasks[c.ID] = c.Task
	}
	for id, want := range map[string]string{"genai": "from gen_ai.input.messages", "openinference": "from input.value", "chat": "from the chat span", "later": "first"} {
		if tasks[id] != want {
			t.Errorf("case %s task = %q, want %q", id, tasks[id], want)
		}
	}
	if !strings.Contains(tasks["none"], "no task in the traces") || !strings.Contains(tasks["none"], traceID(4)) {
		t.Errorf("case without a task: task = %q, want a placeholder naming the trace", tasks["none"])
	}
	if !slices.Equal(rep.WithoutTask, []string{"none"}) {
		t.Errorf("report without task = %v", rep.WithoutTask)
	}
	for _, cr := range rep.PerCase {
		if cr.ID == "later" && !strings.Contains(strings.Join(cr.Notes, " "), `has another task ("second"); kept trace `+traceID(5)) {
			t.Errorf("later notes = %v", cr.Notes)
		}
	}
}

func TestTrialNumbersFromTheAttributeWhenEveryTraceGivesADistinctOne(t *testing.T) {
	st := openStore(t,
		run{id: 1, at: 0, caseID: "a", trial: int64(2), task: "q"},
		run{id: 2, at: time.Second, caseID: "a", trial: int64(0), task: "q"},
		run{id: 3, at: 2 * time.Second, caseID: "a", trial: int64(1), task: "q"},
		run{id: 4, at: 0, caseID: "b", trial: int64(0), task: "q"},
		run{id: 5, at: time.Second, caseID: "b", trial: int64(0), task: "q"},
		run{id: 6, at: 0, caseID: "c", trial: "first", task: "q"},
		run{id: 7, at: 0, caseID: int64(42), task: "q"},
		run{id: 8, at: 0, caseID: "", task: "q"},
	)
	_, trials, rep := build(t, st, tracecases.Filter{})
	got := map[string]int{}
	for _, tr := range trials {
		got[tr.TraceID] = tr.Trial
	}
	for trace, want := range map[string]int{traceID(1): 2, traceID(2): 0, traceID(3): 1, traceID(4): 0, traceID(5): 1, traceID(6): 0} {
		if got[trace] != want {
			t.Errorf("trace %s: trial %d, want %d", trace, got[trace], want)
		}
	}
	byID := map[string]tracecases.CaseReport{}
	for _, cr := range rep.PerCase {
		byID[cr.ID] = cr
	}
	if byID["a"].TrialsFrom != tracecases.TrialsByAttr || byID["b"].TrialsFrom != tracecases.TrialsByStart {
		t.Errorf("trials from: a %q, b %q", byID["a"].TrialsFrom, byID["b"].TrialsFrom)
	}
	if n := strings.Join(byID["b"].Notes, " "); !strings.Contains(n, "both say "+semconv.AttrTrial+" 0") {
		t.Errorf("b notes = %q", n)
	}
	if n := strings.Join(byID["c"].Notes, " "); !strings.Contains(n, semconv.AttrTrial+" first is not a trial number") {
		t.Errorf("c notes = %q", n)
	}
	if _, ok := byID["42"]; !ok {
		t.Errorf("an int case id is taken in decimal: cases %v", rep.PerCase)
	}
	if len(rep.WithoutCaseID) != 1 || rep.WithoutCaseID[0].TraceID != traceID(8) || !strings.Contains(rep.WithoutCaseID[0].Why, "empty") {
		t.Errorf("without case id = %+v", rep.WithoutCaseID)
	}
}

func TestBuildReportsStoreErrors(t *testing.T) {
	st := openStore(t, suite...)
	if err := st.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := tracecases.Build(context.Background(), st, tracecases.Filter{})
	if err == nil || !strings.Contains(err.Error(), "list traces") {
		t.Fatalf("Build on a closed store: %v, want the list error", err)
	}
}

func TestGradersFileMergesOntoCases(t *testing.T) {
	st := openStore(t, suite...)
	cases, _, _ := build(t, st, tracecases.Filter{})
	file := `{"case_id": "mean", "graders": [{"type": "number", "expected": 2.333333, "abs_tol": 0.005}, {"type": "tool_called", "tool": "calculator"}]}

{"case_id": "sum", "graders": [{"type": "contains", "value": "4"}]}
`
	sets, err := tracecases.ReadGraders(strings.NewReader(file), "graders.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != 2 || sets[1].Line != 3 {
		t.Fatalf("sets = %+v", sets)
	}
	if err := tracecases.MergeGraders(cases, sets, "graders.jsonl"); err != nil {
		t.Fatal(err)
	}
	if len(cases[1].Graders) != 2 || cases[1].Graders[0].Type != datasets.GraderNumber || *cases[1].Graders[0].AbsTol != 0.005 ||
		len(cases[2].Graders) != 1 || len(cases[0].Graders) != 0 {
		t.Errorf("graders merged = %+v / %+v / %+v", cases[0].Graders, cases[1].Graders, cases[2].Graders)
	}
	// The merged cases load back with their graders.
	back, err := datasets.ReadCases(strings.NewReader(jsonl(t, cases)), "cases.jsonl")
	if err != nil || len(back[1].Graders) != 2 {
		t.Fatalf("read back: %v", err)
	}

	for _, tc := range []struct{ file, want string }{
		{`{"case_id": "nope", "graders": [{"type": "contains", "value": "x"}]}`, `graders.jsonl:1: field "case_id": no case "nope" came from the traces read (cases: essay, mean, sum, trace-`},
		{`{"case_id": "mean", "graders": [{"type": "number", "expcted": 1}]}`, `graders.jsonl:1: json: unknown field "expcted"`},
		{`{"case_id": "mean", "graders": [{"type": "number"}]}`, `graders.jsonl:1: case "mean": field "graders[0].expected": required for a number grader`},
		{`{"case_id": "mean", "graders": [{"type": "contains", "value": "x", "abs_tol": 1}]}`, `field "graders[0].abs_tol": does not apply to a contains grader`},
		{`{"case_id": "mean"}`, `graders.jsonl:1: field "graders": required field is missing`},
		{`{"case_id": "mean", "graders": []}`, `graders.jsonl:1: field "graders": an empty list`},
		{`{"case_id": "mean", "case_id": "sum", "graders": []}`, `graders.jsonl:1: field "case_id": given twice`},
		{"{\"case_id\": \"sum\", \"graders\": [{\"type\": \"contains\", \"value\": \"4\"}]}\n{\"case_id\": \"sum\", \"graders\": [{\"type\": \"contains\", \"value\": \"4\"}]}", `graders.jsonl:2: field "case_id": case "sum" is also on line 1`},
		{`{"case_id": "mean", "graders": [{"type": "contains", "value": "x"}]} {}`, `graders.jsonl:1: trailing data`},
		{`[1]`, `graders.jsonl:1: want one JSON object`},
	} {
		err := func() error {
			sets, err := tracecases.ReadGraders(strings.NewReader(tc.file), "graders.jsonl")
			if err != nil {
				return err
			}
			return tracecases.MergeGraders(slices.Clone(cases), sets, "graders.jsonl")
		}()
		var le *datasets.LineError
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &le) {
			t.Errorf("graders file %s: error %v, want a line error containing %q", tc.file, err, tc.want)
		}
	}
}

func TestFromTracesBuildsTheSelectedTracesOnly(t *testing.T) {
	st := openStore(t, suite...)
	ctx := context.Background()
	// Traces 1 and 3 (case mean), 5 (no case id), and 1 again.
	cases, trials, rep, err := tracecases.FromTraces(ctx, st, []string{traceID(3), traceID(1), traceID(5), traceID(1)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range cases {
		ids = append(ids, c.ID)
	}
	if want := []string{"mean", tracecases.UnmarkedCaseID(traceID(5))}; !slices.Equal(ids, want) {
		t.Fatalf("case ids %v, want %v", ids, want)
	}
	if len(trials) != 3 || rep.Read != 3 || rep.Listed != 3 {
		t.Fatalf("%d trials, report %+v: want each selected trace read once", len(trials), rep)
	}
	// The per-case report carries the agent's answer for a reviewer, and
	// the case does not: an answer is not an expected answer.
	if rep.PerCase[0].Answer != "2.33" || len(cases[0].Graders) != 0 {
		t.Fatalf("mean: answer %q, graders %+v", rep.PerCase[0].Answer, cases[0].Graders)
	}
	if !slices.Equal(rep.PerCase[0].Traces, []string{traceID(1), traceID(3)}) {
		t.Fatalf("mean traces %v, want 1 then 3 (start order)", rep.PerCase[0].Traces)
	}
	if _, _, _, err := tracecases.FromTraces(ctx, st, []string{traceID(1), traceID(99)}); err == nil || !strings.Contains(err.Error(), traceID(99)) {
		t.Fatalf("a trace the store lacks: %v, want an error naming it", err)
	}
	if _, _, _, err := tracecases.FromTraces(ctx, st, nil); err == nil {
		t.Fatal("no trace selected: no error")
	}
}
