package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/internal/stepdiff"
)

// compareServer serves the two support traces (and the seeded ones) and,
// as runs, replay/testdata/good.jsonl next to a copy whose calculator call
// asked for another product.
func compareServer(t *testing.T) (*httptest.Server, FileSources) {
	t.Helper()
	st, _ := seeded(t)
	a, b := supportTraces()
	if err := st.WriteSpans(context.Background(), append(a, b...)); err != nil {
		t.Fatal(err)
	}
	files := FileSources{RunsDir: t.TempDir(), ReportsDir: t.TempDir()}
	good, err := os.ReadFile(filepath.Join("..", "replay", "testdata", "good.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(files.RunsDir, "good.jsonl"), good, 0o644)
	// The other run: the same journal but for its calculator call, which
	// asked 2 × 1200 and got 2400 (the hash chain rebuilt, so it reads).
	runs, err := journal.ReadJSONLFile(filepath.Join(files.RunsDir, "good.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var chain []journal.Event
	for i, e := range runs[0].Events {
		payload := e.Payload
		switch e.Seq {
		case 8:
			payload = json.RawMessage(`{"arguments":{"a":2,"b":1200,"op":"mul"},"id":"call_2","name":"calculator"}`)
			e.ArgsHash = "sha256:" + strings.Repeat("ab", 32)
		case 9:
			payload = json.RawMessage(`{"content":"2400"}`)
		}
		var prev *journal.Event
		if i > 0 {
			prev = &chain[i-1]
		}
		ne, err := journal.Next(e.RunID, prev, journal.Record{Kind: e.Kind, Step: e.Step, Tool: e.Tool, CallID: e.CallID, ArgsHash: e.ArgsHash, Label: e.Label, Payload: payload}, e.Time)
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, ne)
	}
	f, err := os.Create(filepath.Join(files.RunsDir, "other.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := journal.WriteJSONL(f, chain); err != nil {
		t.Fatal(err)
	}
	f.Close()
	srv, err := New(Config{}, Deps{Traces: st, Files: &files, Labels: filepath.Join(t.TempDir(), "labels.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts, files
}

func TestCompareTwoTracesFindsTheFirstDivergenceAtTheToolCall(t *testing.T) {
	ts, _ := compareServer(t)
	// By prefix, as elsewhere.
	code, body := get(t, ts, "/api/v1/compare?a="+supportTraceA[:10]+"&b="+supportTraceB[:10])
	if code != 200 {
		t.Fatalf("compare API: %d %s", code, body)
	}
	var v struct {
		A, B struct {
			Ref    string `json:"ref"`
			CaseID string `json:"case_id"`
			Trial  int    `json:"trial"`
		}
		stepdiff.Diff
		SameCase bool `json:"same_case"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if v.A.Ref != supportTraceA || v.B.Ref != supportTraceB || !v.SameCase || v.A.Trial != 0 || v.B.Trial != 1 {
		t.Fatalf("sides %+v %+v same case %v", v.A, v.B, v.SameCase)
	}
	// A: chat, search, retrieval, chat, fetch, chat. B inserts a chat, a
	// search and its retrieval.
	if len(v.Diff.A) != 6 || len(v.Diff.B) != 9 || v.OnlyA != 0 || v.OnlyB != 3 {
		t.Fatalf("steps %d/%d, only-a %d only-b %d", len(v.Diff.A), len(v.Diff.B), v.OnlyA, v.OnlyB)
	}
	first := v.Rows[v.First]
	if v.First != 1 || first.Status != stepdiff.Changed || v.Diff.A[first.A].Kind != stepdiff.KindTool || v.Diff.A[first.A].Name != "search_docs" {
		t.Fatalf("first divergence at row %d: %+v", v.First, first)
	}
	var fields []string
	for _, d := range first.Diffs {
		fields = append(fields, d.Field)
	}
	if strings.Join(fields, ",") != "result" {
		t.Fatalf("the search differs in %v, want its result only (same arguments)", fields)
	}

	code, page := get(t, ts, "/compare?a="+supportTraceA+"&b="+supportTraceB)
	for _, want := range []string{"First divergence at step 2", "tool call search_docs: result differs", "blog/2023-refund-changes.md",
		`class="only_b diff"`, "case refund-annual-plan", "/traces/" + supportTraceA + "?span="} {
		if code != 200 || !strings.Contains(page, want) {
			t.Errorf("compare page (%d) lacks %q", code, want)
		}
	}
}

func TestCompareRefusesBadSidesNamingTheParameter(t *testing.T) {
	ts, _ := compareServer(t)
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/api/v1/compare?a=" + supportTraceA, http.StatusBadRequest, "parameter b: required"},
		{"/api/v1/compare?a=xyz&b=" + supportTraceB, http.StatusBadRequest, "parameter a"},
		{"/api/v1/compare?a=" + supportTraceA + "&b=" + strings.Repeat("f0", 16), http.StatusNotFound, "parameter b"},
		{"/api/v1/compare/runs?a=good.jsonl&b=other.jsonl/x", http.StatusBadRequest, `is not FILE/RUN`},
		{"/api/v1/compare/runs?a=good.jsonl/bookkeeper-case-lunch-t0&b=../x.jsonl/r", http.StatusBadRequest, "parameter b"},
		{"/api/v1/compare/runs?a=good.jsonl/bookkeeper-case-lunch-t0&b=good.jsonl/nope", http.StatusNotFound, `parameter b: run`},
	} {
		code, body := get(t, ts, c.path)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want %d with %q", c.path, code, body, c.code, c.want)
		}
	}
}

func TestComparePickerListsTheSameCaseFirst(t *testing.T) {
	ts, _ := compareServer(t)
	code, page := get(t, ts, "/compare?a="+supportTraceA[:8])
	if code != 200 {
		t.Fatalf("picker: %d", code)
	}
	i := strings.Index(page, `<tbody><tr>`)
	if i < 0 || !strings.Contains(page[i:i+300], "b="+supportTraceB) || !strings.Contains(page[i:i+600], "same case") {
		t.Fatalf("the first candidate is not trial 1 of the same case:\n%s", page)
	}
}

func TestCompareTwoRunsInTheJournalsVocabulary(t *testing.T) {
	ts, _ := compareServer(t)
	code, body := get(t, ts, "/api/v1/compare/runs?a=good.jsonl/bookkeeper-case-lunch-t0&b=other.jsonl/bookkeeper-case-lunch-t0")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var v struct{ stepdiff.Diff }
	json.Unmarshal([]byte(body), &v)
	first := v.Rows[v.First]
	if v.First != 3 || len(first.Diffs) != 2 || first.Diffs[0].Field != journal.StepFieldArgsHash || first.Diffs[0].Code != journal.CodeMismatch ||
		first.Diffs[1].Code != journal.CodeResultDiffers || first.Diffs[0].B != `{"a":2,"b":1200,"op":"mul"}` {
		t.Fatalf("first divergence %d: %+v", v.First, first)
	}
	code, page := get(t, ts, "/compare/runs?a=good.jsonl/bookkeeper-case-lunch-t0&b=other.jsonl/bookkeeper-case-lunch-t0")
	for _, want := range []string{"First divergence at step 4", "LWR1100", "LWR1200", "/runs/good.jsonl/bookkeeper-case-lunch-t0#seq-8"} {
		if code != 200 || !strings.Contains(page, want) {
			t.Errorf("runs compare page (%d) lacks %q", code, want)
		}
	}
	// The run page links its steps' anchors and the comparison.
	code, page = get(t, ts, "/runs/good.jsonl/bookkeeper-case-lunch-t0")
	if code != 200 || !strings.Contains(page, `id="seq-8"`) || !strings.Contains(page, "/compare/runs?a=good.jsonl%2Fbookkeeper-case-lunch-t0") {
		t.Fatalf("run page (%d) lacks the step anchors or the compare link", code)
	}
	// A run against itself: no divergence.
	code, page = get(t, ts, "/compare/runs?a=good.jsonl/bookkeeper-case-lunch-t0&b=good.jsonl/bookkeeper-case-lunch-t0")
	if code != 200 || !strings.Contains(page, "No divergence") || !strings.Contains(page, "A and B are the same run") {
		t.Fatalf("self comparison (%d)", code)
	}
}
