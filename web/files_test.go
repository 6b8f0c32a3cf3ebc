package web

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/retrieval/ablation/result"
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
	rep := result.Report{Dataset: "mkdocs-material", Seed: 7, Bootstrap: 1000, Modes: []string{"bm25", "dense"}}
	rep.Queries.Gold, rep.Queries.Silver, rep.Queries.Total = 20, 47, 67
	for _, m := range rep.Modes {
		rep.Rows = append(rep.Rows, result.Row{Variant: result.Excluded, Mode: m, Kind: "gold", N: 20,
			Metrics: map[string]result.Stat{"ndcg@10": {Mean: 0.41, Lo: 0.3, Hi: 0.5}, "recall@10": {Mean: 0.6, Lo: 0.4, Hi: 0.8}}})
		rep.Latency = append(rep.Latency, result.LatencyRow{Variant: result.Excluded, Mode: m, N: 20, P50: 1.2, P95: 3.4, Mean: 1.5})
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

func TestReportPageShowsDeltasIntervalsVerdictsAndLinksTraces(t *testing.T) {
	ts, _ := fileServer(t)
	code, body := get(t, ts, "/reports")
	if code != 200 || !strings.Contains(body, "candidate-vs-baseline.json") || !strings.Contains(body, "scripted model") {
		t.Fatalf("reports list: %d", code)
	}
	code, body = get(t, ts, "/reports/candidate-vs-baseline.json")
	if code != 200 {
		t.Fatalf("report page: %d", code)
	}
	for _, want := range []string{"Against the baseline", "regressed", "McNemar", "pass rate delta", "smallest drop detected", "evidence cited", "Trials passed", "/traces/" + hostileTraceID, "Gate:", "regression", "scripted model", "&lt;b&gt;from the docs"} {
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

// copyFile copies src into dir as name, keeping only the first n bytes
// when n > 0 (a truncated, broken copy).
func copyFile(t *testing.T, src, dir, name string, n int) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 && n < len(b) {
		b = b[:n]
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func filesOnly(t *testing.T, files FileSources) *httptest.Server {
	t.Helper()
	st, _ := seeded(t)
	srv, err := New(Config{}, Deps{Traces: st, Files: &files})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts
}

// section returns the part of a page from the element with the id to the
// end of its first closing tag, or "" when there is none.
func section(body, id, closing string) string {
	i := strings.Index(body, `id="`+id+`"`)
	if i < 0 {
		return ""
	}
	j := strings.Index(body[i:], closing)
	if j < 0 {
		return body[i:]
	}
	return body[i : i+j]
}

func TestReportsListShowsTheReportListsAGatePolicyAsAnOtherFileAndShowsABrokenReportsError(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, filepath.Join("..", "baselines", "report.json"), dir, "report.json", 0)
	copyFile(t, filepath.Join("..", "baselines", "policy.json"), dir, "policy.json", 0)
	// Cut mid-document; where the cut falls depends on the committed
	// report, so the test wants the decode error, not its wording.
	copyFile(t, filepath.Join("..", "baselines", "report.json"), dir, "broken.json", 2000)
	os.WriteFile(filepath.Join(dir, "notes.json"), []byte(`{"author": "me"}`), 0o644)
	ts := filesOnly(t, FileSources{ReportsDir: dir})

	code, body := get(t, ts, "/reports")
	if code != 200 {
		t.Fatalf("GET /reports = %d", code)
	}
	table := section(body, "report-table", "</table>")
	if !strings.Contains(table, `href="/reports/report.json"`) || strings.Count(table, `class="fail"`) != 1 {
		t.Errorf("report table should list report.json and one error:\n%s", table)
	}
	if !strings.Contains(table, "broken.json") || !strings.Contains(table, "report broken.json: not a loom-eval score JSON report: ") {
		t.Errorf("report table does not show the broken report's error:\n%s", table)
	}
	if strings.Contains(table, "policy.json") || strings.Contains(table, "notes.json") {
		t.Errorf("report table lists a file that is not a report:\n%s", table)
	}
	others := section(body, "other-files", "</section>")
	for _, want := range []string{"policy.json</span> — a gate policy", "notes.json</span> — JSON of a kind this UI does not read"} {
		if !strings.Contains(others, want) {
			t.Errorf("other files lack %q:\n%s", want, others)
		}
	}
	if strings.Contains(others, "report.json") || strings.Contains(others, "broken.json") {
		t.Errorf("other files list a report:\n%s", others)
	}

	code, body = get(t, ts, "/reports/policy.json")
	if code != 400 || !strings.Contains(body, "policy.json is a gate policy, not a score report") {
		t.Errorf("GET /reports/policy.json = %d, want 400 saying it is a gate policy", code)
	}
	if code, _ := get(t, ts, "/reports/report.json"); code != 200 {
		t.Errorf("GET /reports/report.json = %d", code)
	}
}

func TestRunsListShowsJournalsListsTrialRecordsAsOtherFilesAndShowsBrokenJournalsAndReplayReports(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join("..", "replay", "testdata", "good.jsonl")
	copyFile(t, good, dir, "good.jsonl", 0)
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimRight(string(b), "\n"), "\n")
	// Without its seal line the journal is truncated.
	os.WriteFile(filepath.Join(dir, "cut.jsonl"), []byte(strings.Join(lines[:len(lines)-1], "")), 0o644)
	copyFile(t, filepath.Join("..", "baselines", "baseline.trials.jsonl"), dir, "trials.jsonl", 0)
	os.WriteFile(filepath.Join(dir, "replay.json"), []byte(`{"reports": [{"run_id": "x"`), 0o644)
	ts := filesOnly(t, FileSources{RunsDir: dir})

	code, body := get(t, ts, "/runs")
	if code != 200 || !strings.Contains(section(body, "run-table", "</table>"), `href="/runs/good.jsonl/`) {
		t.Fatalf("GET /runs = %d, no good.jsonl run:\n%.2000s", code, body)
	}
	for _, want := range []string{"cut.jsonl", "journal truncated", "replay report replay.json"} {
		if !strings.Contains(body, `<p class="note fail">`) || !strings.Contains(body, want) {
			t.Errorf("runs page does not show the error %q", want)
		}
	}
	others := section(body, "other-files", "</section>")
	if !strings.Contains(others, "trials.jsonl</span> — trial records") {
		t.Errorf("other files lack the trial records:\n%s", others)
	}
	if strings.Contains(body, "corrupt journal: "+filepath.Join(dir, "trials.jsonl")) {
		t.Error("trial records shown as a corrupt journal")
	}
	i := strings.Index(body, `href="/runs/good.jsonl/`)
	link := body[i+6 : i+6+strings.Index(body[i+6:], `"`)]
	if code, page := get(t, ts, link); code != 200 || !strings.Contains(page, "replay report replay.json") {
		t.Errorf("GET %s = %d, or it does not show the broken replay report's error", link, code)
	}
	if code, body := get(t, ts, "/runs/trials.jsonl/x"); code != 400 || !strings.Contains(body, "trials.jsonl is trial records, not a journal") {
		t.Errorf("GET /runs/trials.jsonl/x = %d, want 400 saying what it is", code)
	}
}

func TestAblationsListShowsTheResultListsTheRerankerModelAsAnOtherFileAndShowsABrokenResultsError(t *testing.T) {
	dir := t.TempDir()
	writeAblation(t, dir)
	copyFile(t, filepath.Join(dir, "mkdocs.json"), dir, "broken.json", 300)
	copyFile(t, filepath.Join("..", "baselines", "ablation", "reranker.json"), dir, "reranker.json", 0)
	ts := filesOnly(t, FileSources{AblationsDir: dir})

	code, body := get(t, ts, "/ablations")
	if code != 200 {
		t.Fatalf("GET /ablations = %d", code)
	}
	list := section(body, "ablation-list", "</ul>")
	if !strings.Contains(list, `href="/ablations/mkdocs.json"`) || !strings.Contains(list, "67 judged queries") {
		t.Errorf("ablation list lacks mkdocs.json:\n%s", list)
	}
	if !strings.Contains(list, "broken.json") || !strings.Contains(list, "ablation broken.json: not a loom-eval ablate JSON result: unexpected end of JSON input") {
		t.Errorf("ablation list does not show the broken result's error:\n%s", list)
	}
	if strings.Contains(list, "reranker.json") {
		t.Errorf("ablation list shows the reranker model:\n%s", list)
	}
	if others := section(body, "other-files", "</section>"); !strings.Contains(others, "reranker.json</span> — a reranker model") {
		t.Errorf("other files lack the reranker model:\n%s", others)
	}
	if code, body := get(t, ts, "/ablations/reranker.json"); code != 400 || !strings.Contains(body, "reranker.json is a reranker model, not an ablation result") {
		t.Errorf("GET /ablations/reranker.json = %d, want 400 saying what it is", code)
	}
}

// TestTheDemoDirectoriesShowRealContent serves what `make demo` serves:
// --runs-dir baselines/journals --reports-dir baselines --ablations-dir
// baselines/ablation.
func TestTheDemoDirectoriesShowRealContent(t *testing.T) {
	testtier.Slow(t)
	base := filepath.Join("..", "baselines")
	ts := filesOnly(t, FileSources{RunsDir: filepath.Join(base, "journals"), ReportsDir: base, AblationsDir: filepath.Join(base, "ablation")})
	for _, tc := range []struct {
		path, wantID string
		want         []string
	}{
		{"/runs", "run-table", []string{`href="/runs/research.jsonl/`, `href="/runs/coding.jsonl/`}},
		{"/reports", "report-table", []string{`href="/reports/report.json"`}},
		{"/ablations", "ablation-list", []string{`href="/ablations/report.json"`, "mkdocs-material · 75 judged queries"}},
	} {
		code, body := get(t, ts, tc.path)
		if code != 200 {
			t.Errorf("GET %s = %d", tc.path, code)
			continue
		}
		got := section(body, tc.wantID, "</")
		for _, want := range tc.want {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s lacks %q (%.200s)", tc.path, want, got)
			}
		}
		if strings.Contains(body, `class="fail">`) && tc.path != "/runs" || strings.Contains(body, `class="note fail"`) {
			t.Errorf("GET %s shows an error:\n%s", tc.path, body)
		}
	}
	if _, body := get(t, ts, "/reports"); !strings.Contains(section(body, "other-files", "</section>"), "policy.json</span> — a gate policy") {
		t.Error("the demo's reports page does not list policy.json as a gate policy")
	}
	for _, path := range []string{"/reports/report.json", "/ablations/report.json", "/ablations/report.json/chart.svg"} {
		if code, _ := get(t, ts, path); code != 200 {
			t.Errorf("GET %s = %d", path, code)
		}
	}
}

// An ablation result is a file the UI did not write: a mode named with
// markup is shown as text in the chart and the page, and a result with no
// modes is a 400 naming the file and the problem, not a crash.
func TestAblationChartEscapesModesAndDrawsAnEmptyResult(t *testing.T) {
	ts, files := fileServer(t)
	hostile := `<script>alert("x")</script>`
	rep := result.Report{Dataset: `set <b>x</b>`, Seed: 7, Modes: []string{hostile}}
	rep.Queries.Gold, rep.Queries.Total = 1, 1
	rep.Rows = []result.Row{{Variant: result.Excluded, Mode: hostile, Kind: "gold", N: 1,
		Metrics: map[string]result.Stat{"ndcg@10": {Mean: 0.5, Lo: 0.4, Hi: 0.6}}}}
	for name, r := range map[string]result.Report{"hostile.json": rep, "empty.json": {Dataset: "nothing", Seed: 1}} {
		b, _ := json.Marshal(r)
		if err := os.WriteFile(filepath.Join(files.AblationsDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/ablations/" + name + "/chart.svg", "/ablations/" + name} {
			code, body := get(t, ts, path)
			if name == "empty.json" {
				if code != 400 || !strings.Contains(body, "ablation empty.json: no result rows") {
					t.Errorf("GET %s: %d, want 400 naming the file and the problem: %.300s", path, code, body)
				}
				continue
			}
			if code != 200 {
				t.Fatalf("GET %s: %d %.200s", path, code, body)
			}
			if strings.Contains(body, "<script>alert") || strings.Contains(body, "<b>x</b>") {
				t.Errorf("GET %s writes the result's markup unescaped", path)
			}
		}
	}
}

// TestRunsListDecodesAJournalOnlyWhenItChanged: the runs list keeps each
// journal's rows until the file changes, so a second request decodes
// nothing, a changed file is decoded again (and shows its new runs), and
// a removed one leaves the list.
func TestRunsListDecodesAJournalOnlyWhenItChanged(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(filepath.Join("..", "replay", "testdata", "good.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a.jsonl", "b.jsonl"} {
		if err := os.WriteFile(filepath.Join(dir, n), good, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := seeded(t)
	srv, err := New(Config{}, Deps{Traces: st, Files: &FileSources{RunsDir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	list := func() string {
		t.Helper()
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", "/runs", nil))
		if rec.Code != 200 {
			t.Fatalf("GET /runs = %d", rec.Code)
		}
		return rec.Body.String()
	}
	first := list()
	if srv.runsMemo.decodes != 2 {
		t.Fatalf("first list decoded %d journals, want 2", srv.runsMemo.decodes)
	}
	if again := list(); srv.runsMemo.decodes != 2 || again != first {
		t.Errorf("second list decoded %d journals in all (want still 2) or showed another page", srv.runsMemo.decodes)
	}
	// Replace a.jsonl with a tampered copy: it is decoded again, and the
	// list shows its error instead of its run.
	runs, err := journal.ReadJSONLFile(filepath.Join(dir, "a.jsonl"))
	if err != nil || len(runs) == 0 {
		t.Fatalf("the fixture: %d runs (%v)", len(runs), err)
	}
	bad, err := os.ReadFile(filepath.Join("..", "replay", "testdata", "bad-tampered.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // a modification time of its own, even on a coarse clock
	if err := os.WriteFile(filepath.Join(dir, "a.jsonl"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	changed := list()
	if srv.runsMemo.decodes != 3 {
		t.Errorf("after a.jsonl changed: %d decodes in all, want 3", srv.runsMemo.decodes)
	}
	if strings.Count(changed, runs[0].ID) >= strings.Count(first, runs[0].ID) || !strings.Contains(changed, "a.jsonl") {
		t.Errorf("the list does not show a.jsonl's change: run %s appears %d times (before %d)", runs[0].ID, strings.Count(changed, runs[0].ID), strings.Count(first, runs[0].ID))
	}
	if err := os.Remove(filepath.Join(dir, "b.jsonl")); err != nil {
		t.Fatal(err)
	}
	list()
	if n := len(srv.runsMemo.files); n != 1 {
		t.Errorf("the memo keeps %d files after b.jsonl was removed, want 1", n)
	}
}
