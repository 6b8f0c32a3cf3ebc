package web

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/retrieval"
	"github.com/loomwork/loomwork/retrieval/ablation"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/gate"
	"github.com/loomwork/loomwork/scorer/report"
)

const hostileTraceID = "a1b2c3d4e5f60718293a4b5c6d7e8f90"

func ptrBool(b bool) *bool { return &b }

// writeReport scores a small baseline and a candidate in which case c2
// regresses, and writes the comparison as `loom-eval score --format json`
// would.
func writeReport(t testing.TB, dir string) string {
	t.Helper()
	var cases []datasets.Case
	for _, id := range []string{"c1", "c2", "c3", "c4"} {
		cases = append(cases, datasets.Case{ID: id, Task: "answer question " + id + " <b>from the docs</b>", RequiredEvidence: []string{"docs/setup.md#install"}})
	}
	trials := func(fail map[string]bool) []datasets.Trial {
		var out []datasets.Trial
		for _, c := range cases {
			for k := 0; k < 3; k++ {
				ok := !fail[c.ID]
				tr := datasets.Trial{CaseID: c.ID, Trial: k, ModelLabel: "scripted", Success: ptrBool(ok), TraceID: hostileTraceID,
					EvidenceRetrieved: []string{"docs/setup.md#install"}}
				if ok {
					tr.EvidenceCited = []string{"docs/setup.md#install"}
				}
				out = append(out, tr)
			}
		}
		return out
	}
	cfg := scorer.DefaultConfig()
	base, err := scorer.Score(cases, trials(map[string]bool{"c4": true}), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cand, err := scorer.Score(cases, trials(map[string]bool{"c2": true, "c4": true}), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := scorer.Compare(base, cand, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := gate.Parse([]byte(`{"max_new_failures": 0}`))
	if err != nil {
		t.Fatal(err)
	}
	rep := &report.Report{Suite: cand, Baseline: base, Comparison: cmp, Gate: gate.Evaluate(pol, cand, cmp)}
	p := filepath.Join(dir, "candidate-vs-baseline.json")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := report.Write(f, report.JSON, rep); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeAblation(t testing.TB, dir string) {
	t.Helper()
	rep := ablation.Report{Dataset: "mkdocs-material", Seed: 7, Bootstrap: 1000, Modes: []retrieval.Mode{retrieval.ModeBM25, retrieval.ModeDense}}
	rep.Queries.Gold, rep.Queries.Silver, rep.Queries.Total = 20, 47, 67
	for _, m := range rep.Modes {
		rep.Rows = append(rep.Rows, ablation.Row{Variant: ablation.Excluded, Mode: m, Kind: "gold", N: 20,
			Metrics: map[string]ablation.Stat{"ndcg@10": {Mean: 0.41, Lo: 0.3, Hi: 0.5}, "recall@10": {Mean: 0.6, Lo: 0.4, Hi: 0.8}}})
		rep.Latency = append(rep.Latency, ablation.LatencyRow{Variant: ablation.Excluded, Mode: m, N: 20, P50: 1.2, P95: 3.4, Mean: 1.5})
	}
	b, _ := json.Marshal(rep)
	if err := os.WriteFile(filepath.Join(dir, "mkdocs.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func fileServer(t *testing.T) (*httptest.Server, FileSources) {
	st, _ := seeded(t)
	files := FileSources{RunsDir: t.TempDir(), ReportsDir: t.TempDir(), AblationsDir: t.TempDir()}
	journal, err := os.ReadFile(filepath.Join("..", "replay", "testdata", "good.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(files.RunsDir, "good.jsonl"), journal, 0o644)
	writeReport(t, files.ReportsDir)
	writeAblation(t, files.AblationsDir)
	srv, err := New(Config{}, Deps{Traces: st, Files: &files})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts, files
}

func TestReportPageShowsDeltasIntervalsNewFailuresAndLinksTraces(t *testing.T) {
	ts, _ := fileServer(t)
	code, body := get(t, ts, "/reports")
	if code != 200 || !strings.Contains(body, "candidate-vs-baseline.json") || !strings.Contains(body, "scripted model") {
		t.Fatalf("reports list: %d", code)
	}
	code, body = get(t, ts, "/reports/candidate-vs-baseline.json")
	if code != 200 {
		t.Fatalf("report page: %d", code)
	}
	for _, want := range []string{"Against the baseline", "regressed", "McNemar", "new failures", "/traces/" + hostileTraceID, "Gate:", "regression", "scripted model", "&lt;b&gt;from the docs"} {
		if !strings.Contains(body, want) {
			t.Errorf("report page lacks %q", want)
		}
	}
	if strings.Contains(body, "<b>from the docs") {
		t.Error("case task markup not escaped")
	}
	for path, want := range map[string]int{"/reports/..%2F..%2Fetc%2Fpasswd": 400, "/reports/nope.json": 404, "/reports/.hidden.json": 400} {
		if code, _ := get(t, ts, path); code != want {
			t.Errorf("GET %s = %d, want %d", path, code, want)
		}
	}
}

func TestRunPagesListJournalsAndShowStepsInOrder(t *testing.T) {
	ts, files := fileServer(t)
	code, body := get(t, ts, "/runs")
	if code != 200 || !strings.Contains(body, "good.jsonl") || !strings.Contains(body, "scripted model") {
		t.Fatalf("runs list: %d\n%.300s", code, body)
	}
	// Follow the first run link.
	i := strings.Index(body, `href="/runs/good.jsonl/`)
	if i < 0 {
		t.Fatal("no run link")
	}
	link := body[i+6 : i+6+strings.Index(body[i+6:], `"`)]
	code, body = get(t, ts, link)
	if code != 200 {
		t.Fatalf("run page %s: %d", link, code)
	}
	for _, want := range []string{"run_started", "model_request", "model_response", "tool_call", "tool_result", "run_finished"} {
		if !strings.Contains(body, want) {
			t.Errorf("run page lacks %s", want)
		}
	}
	if strings.Index(body, "run_started") > strings.Index(body, "run_finished") {
		t.Error("steps out of order")
	}
	_ = files
}

func TestAblationPageShowsTableAndChart(t *testing.T) {
	ts, _ := fileServer(t)
	code, body := get(t, ts, "/ablations/mkdocs.json")
	if code != 200 || !strings.Contains(body, `id="ablation-table"`) || !strings.Contains(body, "0.410 [0.300, 0.500]") {
		t.Fatalf("ablation page: %d", code)
	}
	code, svg := get(t, ts, "/ablations/mkdocs.json/chart.svg")
	if code != 200 || !strings.Contains(svg, "<svg") {
		t.Fatalf("chart: %d %.100s", code, svg)
	}
}
