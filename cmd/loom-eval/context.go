package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/loomwork/loomwork/agents/contextlayer"
)

// runContext measures the context layer's strategies on a synthetic run.
func (m *Main) runContext(ctx context.Context, args []string) error {
	fs := m.newFlagSet("context", "context [--budgets 2000,4000,8000,16000] [--steps 40] [--format text|json|markdown] [--json] [--out FILE] [--estimate]")
	budgetsFlag := fs.String("budgets", "2000,4000,8000,16000", "comma-separated token budgets")
	steps := fs.Int("steps", 40, "tool calls in the synthetic run")
	outFmt := m.addOutputFlags(fs, "text", "json", "markdown")
	out := fs.String("out", "", "write to this file instead of stdout")
	estimate := fs.Bool("estimate", false, "count with the bytes/4 estimate instead of the o200k_base tokenizer")
	seed := fs.Uint64("seed", 1, "seed for the synthetic run")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var budgets []int
	for _, s := range strings.Split(*budgetsFlag, ",") {
		b, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || b <= 0 {
			return usageError("--budgets: %q is not a positive integer", s)
		}
		budgets = append(budgets, b)
	}
	if *steps < 3 {
		return usageError("--steps must be at least 3 (the identifier sits in step 3), got %d", *steps)
	}
	format, err := outFmt.Format()
	if err != nil {
		return err
	}
	var counter contextlayer.Counter = contextlayer.Estimate{}
	if !*estimate {
		tok, err := contextlayer.NewTokenizer()
		if err != nil {
			return err
		}
		counter = tok
	}
	run := contextlayer.Synthetic(*steps, 3, *seed)
	rows, err := contextlayer.Measure(ctx, counter, run, contextlayer.StrategyNames(), budgets)
	if err != nil {
		return err
	}
	w := m.Stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return fmt.Errorf("create %s: %w", *out, err)
		}
		defer f.Close()
		w = f
	}
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	case "markdown":
		cmd := "loom-eval context --format markdown --out docs/context.md"
		return contextlayer.WriteMarkdown(w, counter, run, rows, cmd)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STRATEGY\tBUDGET\tHISTORY\tIDENTIFIER\tTOKENS\tPIN TOKENS")
	for _, r := range rows {
		id := "lost"
		if r.IdentifierRetained {
			id = "kept"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f%%\t%s\t%d\t%d\n", r.Strategy, r.Budget, 100*r.HistoryRetained, id, r.TokensUsed, r.PinTokens)
	}
	return tw.Flush()
}
