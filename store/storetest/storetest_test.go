package storetest

import (
	"reflect"
	"testing"

	"github.com/loomwork/loomwork/store"
)

func TestGenerateTracesIsDeterministicAndWellFormed(t *testing.T) {
	a := GenerateTraces(30, 10, 7)
	b := GenerateTraces(30, 10, 7)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different spans")
	}
	if reflect.DeepEqual(a, GenerateTraces(30, 10, 8)) {
		t.Fatal("different seeds gave the same spans")
	}
	if len(a) != 300 {
		t.Fatalf("%d spans, want 300", len(a))
	}
	seen := map[string]bool{}
	m := newRefModel()
	m.add(a...)
	for _, sp := range a {
		if len(sp.TraceID) != 32 || len(sp.SpanID) != 16 || seen[sp.TraceID+sp.SpanID] {
			t.Fatalf("bad or duplicate ids %s/%s", sp.TraceID, sp.SpanID)
		}
		seen[sp.TraceID+sp.SpanID] = true
		if sp.EndTime.Before(sp.StartTime) {
			t.Fatalf("span %s ends before it starts", sp.SpanID)
		}
		if n := len(sp.Attributes); n < 8 || n > 16 {
			t.Fatalf("span %s has %d attributes, want a realistic ~14", sp.Name, n)
		}
	}
	for _, rt := range m.summaries() {
		if rt.sum.RootName == "" || rt.sum.SpanCount != 10 || rt.sum.ModelCalls == 0 || rt.sum.ToolCalls == 0 {
			t.Fatalf("trace %s is not agent-shaped: %+v", rt.sum.TraceID, rt.sum)
		}
	}
}

func TestFixtureCoversWhatTheSuiteClaims(t *testing.T) {
	spans := loadFixture(t, "agent_traces.json")
	var zeroCost, nilCost, events, links, retrieved bool
	for _, sp := range spans {
		switch {
		case sp.CostUSD == nil:
			nilCost = true
		case *sp.CostUSD == 0:
			zeroCost = true
		}
		events = events || len(sp.Events) > 0
		links = links || len(sp.Links) > 0
		retrieved = retrieved || (len(sp.RetrievedDocs) > 0 && len(sp.CitedDocs) > 0)
	}
	if !zeroCost || !nilCost || !events || !links || !retrieved {
		t.Fatalf("fixture lacks a case: zero cost %v, nil cost %v, events %v, links %v, docs %v", zeroCost, nilCost, events, links, retrieved)
	}
	attrs := fixtureTrace(spans, fxResearch)[0].Attributes
	for key, want := range map[string]any{"int": int64(42), "double_whole": 3.0, "bool_true": true, "html": "<script>alert('x')</script>"} {
		if !reflect.DeepEqual(attrs[key], want) {
			t.Errorf("attribute %s = %#v (%T), want %#v (%T)", key, attrs[key], attrs[key], want, want)
		}
	}
	if _, ok := attrs["nested"].(map[string]any); !ok {
		t.Errorf("attribute nested is %T, want a map", attrs["nested"])
	}
	if _, ok := attrs["str_array"].([]any); !ok {
		t.Errorf("attribute str_array is %T, want an array", attrs["str_array"])
	}
	_ = store.Attributes(attrs)
}
