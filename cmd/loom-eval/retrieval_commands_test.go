package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/internal/testtier"
)

func retrievalCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	err := m.Run(context.Background(), args)
	code = ExitOK
	var ee *ExitError
	if errors.As(err, &ee) {
		code = ee.Code
	} else if err != nil {
		code = ExitRuntimeErr
	}
	if err != nil && code != ExitOK {
		errb.WriteString(err.Error())
	}
	return out.String(), errb.String(), code
}

const tinyDataset = "../../retrieval/testdata/tiny"

func TestAblateCommandWritesReportChartAndModel(t *testing.T) {
	testtier.Slow(t)
	out := t.TempDir()
	stdout, stderr, code := retrievalCLI(t, "ablate", "--dataset", tinyDataset, "--folds", "2", "--bootstrap", "200",
		"--lsa-dims", "8", "--with-leaky", "--format", "json", "--out", out, "--cache", filepath.Join(out, "index"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Rows []struct {
			Variant, Mode, Kind string
		} `json:"rows"`
		Leakage []any `json:"leakage"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v", err)
	}
	// 2 variants × 5 modes × 2 kinds.
	if len(rep.Rows) != 20 || len(rep.Leakage) != 10 {
		t.Errorf("rows %d leakage %d", len(rep.Rows), len(rep.Leakage))
	}
	for _, f := range []string{"report.json", "report.md", "ndcg.svg", "reranker.json"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	if !strings.Contains(stderr, "ablate: excluded/bm25 done") {
		t.Errorf("no progress on stderr: %s", stderr)
	}
}

func TestAblateCommandUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ablate", "--dataset", tinyDataset, "--json", "--format", "markdown"}, "--json and --format markdown disagree"},
		{[]string{"ablate", "stray-argument", "--dataset", tinyDataset}, `unexpected argument "stray-argument"`},
		{[]string{"ablate", "--dataset", tinyDataset, "--format", "pdf"}, "--format must be one of text, json, markdown"},
		{[]string{"ablate", "--dataset", tinyDataset, "--modes", "bm25,magic"}, `unknown mode "magic"`},
		{[]string{"ablate", "--dataset", tinyDataset, "--no-exclude-own", "--with-leaky"}, "exclude each other"},
		{[]string{"ablate", "--dataset", "testdata/no-such-dataset"}, "issues.jsonl"},
		{[]string{"ablate", "--dataset", tinyDataset, "--statistics", "some"}, "--statistics must be held-out, full or both"},
		{[]string{"ablate", "--dataset", tinyDataset, "--no-exclude-own", "--statistics", "both"}, "--no-exclude-own runs only the leaky variant"},
		{[]string{"ablate", "--dataset", tinyDataset, "--statistics", "full", "--stat-folds", "3"}, "--statistics full has none"},
		{[]string{"ablate", "--dataset", tinyDataset, "--stat-folds", "1"}, "--stat-folds must be >= 2"},
		{[]string{"ablate", "--dataset", tinyDataset, "--stat-folds", "3", "--embed-url", "http://127.0.0.1:1/v1"}, "is not fitted on the corpus"},
		{[]string{"ablate", "--dataset", tinyDataset, "--keep-trained"}, "--keep-trained only applies with --reranker"},
		{[]string{"ablate", "--dataset", tinyDataset, "--reranker", "x.json", "--modes", "bm25"}, "rerank mode, which --modes leaves out"},
		{[]string{"ablate", "--dataset", tinyDataset, "--reranker", "x.json", "--folds", "3"}, "--reranker scores a saved one and trains nothing"},
		{[]string{"ablate", "--dataset", tinyDataset, "--reranker", "testdata/no-such-reranker.json"}, "no-such-reranker.json"},
	} {
		_, stderr, code := retrievalCLI(t, c.args...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

func TestDatasetsMineThenCheckRoundTrips(t *testing.T) {
	fx := "../../retrieval/judged/testdata/mine"
	out := filepath.Join(t.TempDir(), "mined")
	stdout, stderr, code := retrievalCLI(t, "datasets", "mine", "--docs", filepath.Join(fx, "docs"),
		"--docs-url-prefix", "https://example.org/proj/", "--maintainers", filepath.Join(fx, "maintainers.txt"),
		"--issues", filepath.Join(fx, "issues.jsonl"), "--aliases", filepath.Join(fx, "aliases.tsv"),
		"--skip", "contributing/,blog/", "--out", out)
	if code != 0 {
		t.Fatalf("mine: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "mined 5 judgements (4 gold, 1 silver) over 4 query issues") {
		t.Errorf("mine output: %s", stdout)
	}
	stdout, stderr, code = retrievalCLI(t, "datasets", "check", "--dataset", out, "--docs-url-prefix", "https://example.org/proj/",
		"--aliases", filepath.Join(fx, "aliases.tsv"))
	if code != 0 || !strings.Contains(stdout, "5 of 5 reproduced") {
		t.Errorf("check: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

func TestDatasetsCheckFailsWhenALinkDisagrees(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"issues.jsonl"} {
		data, _ := os.ReadFile(filepath.Join(tinyDataset, f))
		os.WriteFile(filepath.Join(dir, f), data, 0o644)
	}
	os.CopyFS(filepath.Join(dir, "docs"), os.DirFS(filepath.Join(tinyDataset, "docs")))
	q, _ := os.ReadFile(filepath.Join(tinyDataset, "qrels.jsonl"))
	// Judge issue 101 on the search page while its link says colors.
	bad := strings.Replace(string(q), `"doc": "docs/setup/changing-the-colors.md", "anchor": "primary-color"`, `"doc": "docs/setup/setting-up-search.md", "anchor": ""`, 1)
	os.WriteFile(filepath.Join(dir, "qrels.jsonl"), []byte(bad), 0o644)
	stdout, _, code := retrievalCLI(t, "datasets", "check", "--dataset", dir, "--docs-url-prefix", "https://example.org/quillpress/")
	if code != ExitFailure || !strings.Contains(stdout, "9 of 10 reproduced") || !strings.Contains(stdout, "issue 101") {
		t.Errorf("exit %d, output %s", code, stdout)
	}
}

// ablate --out writes a reranker.json that ablate --reranker scores
// without retraining: on the same set the queries it was trained on are
// left out (and said so), on the gold split nothing is; a malformed file
// is refused with exit 2 naming the file and the field.
func TestAblateScoresASavedReranker(t *testing.T) {
	testtier.Slow(t)
	dir := t.TempDir()
	common := []string{"--dataset", tinyDataset, "--folds", "2", "--bootstrap", "200", "--lsa-dims", "8", "--cache", filepath.Join(dir, "index")}
	train := filepath.Join(dir, "train")
	if _, stderr, code := retrievalCLI(t, append([]string{"ablate", "--out", train, "--format", "json"}, common...)...); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	model := filepath.Join(train, "reranker.json")
	var m struct {
		Version   int      `json:"version"`
		Queries   []string `json:"trained_on_queries"`
		TrainedOn struct {
			Dataset, CorpusSHA256, QrelsSHA256, Statistics string
		} `json:"trained_on"`
	}
	data, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil || m.Version != 2 || len(m.Queries) != 7 || m.TrainedOn.Dataset != "tiny" || m.TrainedOn.Statistics != "held-out" {
		t.Fatalf("reranker.json: %v %+v", err, m)
	}

	score := func(args ...string) (string, string, int) {
		return retrievalCLI(t, append(append([]string{"ablate", "--reranker", model, "--out", ""}, args...), "--dataset", tinyDataset,
			"--bootstrap", "200", "--lsa-dims", "8", "--cache", filepath.Join(dir, "index"))...)
	}
	stdout, stderr, code := score("--format", "markdown")
	if code != 0 {
		t.Fatalf("score: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Saved reranker " + model + ", not retrained: trained on tiny (fold gold, 7 queries",
		"7 of this set's 10 judged queries were in its training set and are excluded from every mode's metrics (3 scored)", "| rerank | 3 |"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("markdown lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "7 of 10 judged queries were in its training set (excluded)") {
		t.Errorf("stderr: %s", stderr)
	}
	stdout, _, code = score("--format", "text", "--keep-trained")
	if code != 0 || !strings.Contains(stdout, "are INCLUDED (--keep-trained): the rerank numbers are leaky") {
		t.Errorf("kept: exit %d\n%s", code, stdout)
	}

	// The other split: only the gold judgements.
	q, _ := os.ReadFile(filepath.Join(tinyDataset, "qrels.jsonl"))
	var gold []string
	for _, line := range strings.Split(string(q), "\n") {
		if strings.Contains(line, `"kind": "gold"`) {
			gold = append(gold, line)
		}
	}
	goldQrels := filepath.Join(dir, "gold.jsonl")
	os.WriteFile(goldQrels, []byte(strings.Join(gold, "\n")+"\n"), 0o644)
	stdout, stderr, code = score("--qrels", goldQrels, "--format", "json")
	if code != 0 {
		t.Fatalf("gold split: exit %d: %s", code, stderr)
	}
	var rep struct {
		Saved struct {
			Overlap []any `json:"overlap"`
			Judged  int   `json:"judged_queries"`
		} `json:"saved_reranker"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Saved.Overlap) != 0 || rep.Saved.Judged != 3 {
		t.Errorf("gold split: %v %+v", err, rep)
	}

	// A set of nothing but the training queries is refused.
	var silver []string
	for _, line := range strings.Split(string(q), "\n") {
		if strings.Contains(line, `"kind": "silver"`) {
			silver = append(silver, line)
		}
	}
	silverQrels := filepath.Join(dir, "silver.jsonl")
	os.WriteFile(silverQrels, []byte(strings.Join(silver, "\n")+"\n"), 0o644)
	if _, stderr, code := score("--qrels", silverQrels); code != ExitUsage || !strings.Contains(stderr, "every judged query was in the saved reranker's training set") {
		t.Errorf("training queries only: exit %d: %s", code, stderr)
	}

	// Malformed files: exit 2, naming the file and the field.
	bad := filepath.Join(dir, "bad.json")
	for _, c := range []struct{ from, to, want string }{
		{`"bias":`, `"bias_term":`, `unknown field "bias_term"`},
		{`"seed": 1,`, `"seed": "1",`, `field "trained_on.seed": a JSON string is not a uint64`},
		{`"version": 2`, `"version": 1`, `field "version": 1 is the format before training provenance`},
	} {
		os.WriteFile(bad, []byte(strings.Replace(string(data), c.from, c.to, 1)), 0o644)
		_, stderr, code := retrievalCLI(t, "ablate", "--dataset", tinyDataset, "--reranker", bad, "--out", "")
		if code != ExitUsage || !strings.Contains(stderr, bad) || !strings.Contains(stderr, c.want) {
			t.Errorf("%s → %s: exit %d: %s", c.from, c.to, code, stderr)
		}
	}
	// A model from another embedder: exit 2, naming the field.
	if _, stderr, code := retrievalCLI(t, "ablate", "--dataset", tinyDataset, "--reranker", model, "--lsa-dims", "6", "--out", "",
		"--cache", filepath.Join(dir, "index")); code != ExitUsage || !strings.Contains(stderr, `field "trained_on.embedder"`) {
		t.Errorf("another embedder: exit %d: %s", code, stderr)
	}
}
