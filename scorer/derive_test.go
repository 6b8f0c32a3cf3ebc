package scorer

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

var deriveT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func deriveSpan(id, parent, op string, start, end int) store.Span {
	return store.Span{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: id, ParentSpanID: parent, Operation: op, Name: op,
		StartTime: deriveT0.Add(time.Duration(start) * time.Millisecond), EndTime: deriveT0.Add(time.Duration(end) * time.Millisecond), StatusCode: store.StatusUnset}
}

// researchTrace is a scripted research run, its spans out of start order.
func researchTrace() []store.Span {
	root := deriveSpan("r", "", "invoke_agent", 0, 1000)
	ret := deriveSpan("q", "r", "retrieval", 10, 50)
	ret.RetrievedDocs = []string{"docs/a.md", "docs/b.md"}
	search := deriveSpan("t1", "r", "execute_tool", 60, 100)
	search.ToolName = "search"
	fetch := deriveSpan("t2", "r", "execute_tool", 110, 150)
	fetch.Name = "execute_tool fetch"
	c := deriveSpan("c", "r", "chat", 200, 900)
	c.RequestModel, c.HasUsage, c.InputTokens, c.OutputTokens = "gpt-4o-mini", true, 1000, 100
	c.CitedDocs = []string{"docs/b.md"}
	c.Attributes = store.Attributes{semconv.AttrModelLabel: "scripted"}
	return []store.Span{c, fetch, root, search, ret}
}

func TestDeriveFromTraceReadsToolsEvidenceAndLabel(t *testing.T) {
	d, err := DeriveFromTrace(researchTrace(), pricing.Default())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.ToolsCalled, []string{"search", "fetch"}) {
		t.Errorf("tools = %v", d.ToolsCalled)
	}
	if !reflect.DeepEqual(d.EvidenceRetrieved, []string{"docs/a.md", "docs/b.md"}) || !reflect.DeepEqual(d.EvidenceCited, []string{"docs/b.md"}) {
		t.Errorf("evidence retrieved %v cited %v", d.EvidenceRetrieved, d.EvidenceCited)
	}
	if d.ModelLabel != datasets.LabelScripted || d.Model != "gpt-4o-mini" || !d.Success || d.Rollup.DurationMS != 1000 ||
		d.Rollup.TokensIn+d.Rollup.TokensOut != 1100 || d.Rollup.CostUSD == nil {
		t.Errorf("derived = %+v", d)
	}
}

func TestDeriveFromTraceRefusesEmptyAndMixedTraces(t *testing.T) {
	if _, err := DeriveFromTrace(nil, nil); err == nil {
		t.Error("no spans: no error")
	}
	spans := researchTrace()
	spans[1].TraceID = "0af7651916cd43dd8448eb211c80319c"
	if _, err := DeriveFromTrace(spans, nil); err == nil || !strings.Contains(err.Error(), "0af7651916cd43dd8448eb211c80319c") {
		t.Errorf("spans of two traces: err = %v", err)
	}
}

func TestTrialSuccessFromAttributeThenRootStatus(t *testing.T) {
	spans := researchTrace()
	for i := range spans {
		if spans[i].SpanID == "r" {
			spans[i].StatusCode = store.StatusError
		}
	}
	d, _ := DeriveFromTrace(spans, nil)
	if d.Success {
		t.Errorf("root status error gave success (%s)", d.SuccessFrom)
	}
	for i := range spans {
		if spans[i].SpanID == "r" {
			spans[i].Attributes = store.Attributes{semconv.AttrTaskSuccess: true}
		}
	}
	d, _ = DeriveFromTrace(spans, nil)
	if !d.Success || !strings.Contains(d.SuccessFrom, semconv.AttrTaskSuccess) {
		t.Errorf("attribute ignored: %v (%s)", d.Success, d.SuccessFrom)
	}
}

// A trial that carries only its spans goes through the decoder and is
// scored on what the spans say; a scripted trace cannot be scored as live.
func TestTrialWithOnlyInlineSpansRoundTripsAndScoresFromThem(t *testing.T) {
	tr := datasets.Trial{CaseID: "c1", ModelLabel: datasets.LabelScripted, Spans: researchTrace()}
	b, _ := json.Marshal(tr)
	got, err := datasets.ReadTrials(strings.NewReader(string(b)+"\n"), "roundtrip")
	if err != nil {
		t.Fatalf("decoder rejects a trial with inline spans: %v\n%s", err, b)
	}
	if len(got[0].Spans) != 5 || got[0].CostUSD != nil || got[0].Success != nil {
		t.Fatalf("round trip = %+v", got[0])
	}
	c := datasets.Case{ID: "c1", Task: "t", ExpectedTools: []string{"search", "fetch"}, RequiredEvidence: []string{"docs/b.md"}}
	cfg := testConfig()
	cfg.Prices = pricing.Default()
	ts, err := ScoreTrial(&c, &got[0], cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !ts.Passed || ts.Score != 1 || ts.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || ts.Model != "gpt-4o-mini" ||
		*ts.DurationMS != 1000 || *ts.Tokens != 1100 || ts.CostUSD == nil {
		t.Errorf("score from spans = %+v", ts)
	}
	got[0].ModelLabel = datasets.LabelLive
	if _, err := ScoreTrial(&c, &got[0], cfg); err == nil || !strings.Contains(err.Error(), "scripted") {
		t.Errorf("a scripted trace was scored with label live: err = %v", err)
	}
}
