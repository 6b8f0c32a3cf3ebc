// Command gencases writes the baseline case file: one research case per
// gold query of a judged dataset (required evidence: the judged pages; the
// query's own issue excluded through the issue:N tag; graded on a judged
// page cited, with retrieval as an optional grader) and one coding case per
// task of the coding suite (graded by its hidden tests,
// graders/ID.py beside the case file, run in the sandbox against the
// solution.py the run wrote). scripts/baselines.sh record runs it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/retrieval/judged"
)

func main() {
	dataset := flag.String("dataset", "datasets/mkdocs-material", "judged dataset folder (run from the repository root)")
	out := flag.String("out", "baselines/cases.jsonl", "case file to write")
	flag.Parse()
	if err := run(*dataset, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gencases:", err)
		os.Exit(1)
	}
}

func run(dataset, out string) error {
	ds, err := judged.Load(dataset, "")
	if err != nil {
		return err
	}
	i64 := func(n int64) *int64 { return &n }
	optional := false
	var cases []datasets.Case
	for _, q := range ds.Queries {
		if len(q.Gold) == 0 {
			continue
		}
		var pages []string
		for _, j := range q.Gold {
			if !slices.Contains(pages, j.Doc) {
				pages = append(pages, j.Doc)
			}
		}
		cases = append(cases, datasets.Case{
			ID: q.ID, Task: q.Text,
			ExpectedTools:    []string{"search_docs", "read_doc"},
			RequiredEvidence: pages, EvidenceMatch: datasets.EvidenceAny,
			// Success is a judged page cited; whether one was retrieved is
			// reported as a rate of its own and decides nothing.
			Graders: []datasets.Grader{
				{Type: datasets.GraderEvidenceCited, Name: "judged_page_cited"},
				{Type: datasets.GraderEvidenceRetrieved, Name: "judged_page_retrieved", Required: &optional},
			},
			Budgets: datasets.Budgets{Tokens: i64(60000)},
			Tags:    []string{"research", "gold", fmt.Sprintf("issue:%d", q.Issue)},
		})
	}
	for _, s := range coding.Solutions() {
		file := path.Join("graders", s.ID+".py")
		if _, err := os.Stat(filepath.Join(filepath.Dir(out), filepath.FromSlash(file))); err != nil {
			return fmt.Errorf("coding case %s: its hidden tests: %w", s.ID, err)
		}
		cases = append(cases, datasets.Case{
			ID: s.ID, Task: s.Task,
			ExpectedTools: []string{"write_file", "run_python"},
			Graders: []datasets.Grader{
				{Type: datasets.GraderCode, Name: "hidden_tests", File: file},
				{Type: datasets.GraderToolCalled, Name: "ran_the_code", Tool: "run_python", Required: &optional},
			},
			Budgets: datasets.Budgets{Tokens: i64(codingTokens)},
			// Must-pass only where the scripted play passes every trial: a
			// must-pass case that fails by design would fail every gate.
			MustPass: passesEveryTrial(s),
			Tags:     []string{"coding"},
		})
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	enc.SetEscapeHTML(false)
	for _, c := range cases {
		if err := c.Validate(); err != nil {
			f.Close()
			return fmt.Errorf("case %s: %w", c.ID, err)
		}
		if err := enc.Encode(c); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// codingTokens is a coding case's token budget: the longest scripted play
// (four attempts, nine model calls) stays under it with room to spare.
const codingTokens = 20000

// passesEveryTrial reports whether the scripted play of s passes its hidden
// tests on every trial (no flaw on any).
func passesEveryTrial(s coding.Solution) bool {
	return s.Flaw == "" && s.Slip == nil
}
