// Command gencases writes the baseline case file: one research case per
// gold query of a judged dataset (required evidence: the judged pages; the
// query's own issue excluded through the issue:N tag) and one coding case
// per scripted solution of the coding policy (required evidence: the value
// the program must print). scripts/baselines.sh record runs it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
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
			Budgets: datasets.Budgets{Tokens: i64(60000)},
			Tags:    []string{"research", "gold", fmt.Sprintf("issue:%d", q.Issue)},
		})
	}
	for _, s := range coding.Solutions() {
		cases = append(cases, datasets.Case{
			ID: s.ID, Task: s.Task,
			ExpectedTools:    []string{"write_file", "run_python"},
			RequiredEvidence: []string{"output:" + s.Expected},
			Budgets:          datasets.Budgets{Tokens: i64(20000)},
			MustPass:         true,
			Tags:             []string{"coding"},
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
