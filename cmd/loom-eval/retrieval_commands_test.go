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
