package contextlayer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/llm"
)

// SyntheticRun is a long tool-using conversation with known facts in it, for
// measuring what a strategy keeps.
type SyntheticRun struct {
	Input Input
	// Facts are one per step ("step-N: …"); a strategy retains a step's
	// history when its fact is still in the context.
	Facts []string
	// Identifier is the one fact the final answer needs. It sits deep in a
	// tool result payload (row 12 of step 3), where shrinking cuts it.
	Identifier string
}

// Synthetic builds a run of steps tool calls. The identifier is placed in
// step idStep (1-based), row 12 of its result. Deterministic under seed.
func Synthetic(steps, idStep int, seed uint64) SyntheticRun {
	rng := rand.New(rand.NewPCG(seed, 0x10e3))
	run := SyntheticRun{Identifier: "INC-40721"}
	run.Input.System = "You are an on-call SRE agent. Use the tools to investigate, then answer with the incident ticket id and your evidence."
	msgs := []llm.Message{{Role: llm.RoleUser, Content: "Checkout latency regressed overnight. Find which incident ticket the regression belongs to and report it with the evidence you used."}}
	for s := 1; s <= steps; s++ {
		id := fmt.Sprintf("call_%02d", s)
		args, _ := json.Marshal(map[string]any{"shard": s, "window": "1h"})
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id, Name: "query_logs", Arguments: args}}})
		p99 := 30 + rng.IntN(60)
		fact := fmt.Sprintf("step-%d: shard %d p99 latency %dms", s, s, p99)
		run.Facts = append(run.Facts, fact)
		var rows []string
		for r := 1; r <= 20; r++ {
			row := fmt.Sprintf(`{"ts":"2026-11-29T03:%02d:%02d","host":"web-%d-%d","latency_ms":%d,"status":200,"trace":"%016x"`,
				s, r, s, r, 20+rng.IntN(80), rng.Uint64())
			if s == idStep && r == 12 {
				row += `,"note":"correlates with change freeze exception, see ` + run.Identifier + `"`
			}
			rows = append(rows, row+"}")
		}
		content := fmt.Sprintf(`{"step":%d,"summary":%q,"rows":[%s]}`, s, fact, strings.Join(rows, ","))
		msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: id, ToolName: "query_logs", Content: content})
	}
	run.Input.Messages = msgs
	return run
}

// MeasureRow is one strategy at one budget.
type MeasureRow struct {
	Strategy           string  `json:"strategy"`
	Budget             int     `json:"budget"`
	HistoryRetained    float64 `json:"history_retained"` // fraction of step facts still present
	IdentifierRetained bool    `json:"identifier_retained"`
	TokensUsed         int     `json:"tokens_used"`
	TokensBefore       int     `json:"tokens_before"`
	PinTokens          int     `json:"pin_tokens"` // tokens the restored-pins block costs
	OverBudget         bool    `json:"over_budget"`
}

// Measure runs every strategy at every budget over run. progress, when
// not nil, receives a line as each (strategy, budget) is measured:
// "context: NAME at B tokens (N/M): …".
func Measure(ctx context.Context, c Counter, run SyntheticRun, strategies []string, budgets []int, progress io.Writer) ([]MeasureRow, error) {
	var rows []MeasureRow
	for _, name := range strategies {
		for _, b := range budgets {
			began := time.Now()
			cfg, err := Preset(name, b)
			if err != nil {
				return nil, err
			}
			layer, err := New(cfg, c, nil)
			if err != nil {
				return nil, err
			}
			out, err := layer.Apply(ctx, run.Input)
			if err != nil {
				return nil, fmt.Errorf("%s at %d tokens: %w", name, b, err)
			}
			text := flatten(out)
			kept := 0
			for _, f := range run.Facts {
				if strings.Contains(text, f) {
					kept++
				}
			}
			row := MeasureRow{
				Strategy: name, Budget: b,
				HistoryRetained:    float64(kept) / float64(len(run.Facts)),
				IdentifierRetained: strings.Contains(text, run.Identifier),
				TokensUsed:         out.Report.TokensAfter,
				TokensBefore:       out.Report.TokensBefore,
				OverBudget:         out.Report.OverBudget,
			}
			if len(out.Report.PinsRestored) > 0 {
				lines := []string{PinsPrefix + " kept from compacted steps]"}
				for _, p := range out.Report.PinsRestored {
					lines = append(lines, "- "+p.Value+" ("+p.Source+")")
				}
				row.PinTokens = c.Count(strings.Join(lines, "\n"))
			}
			rows = append(rows, row)
			if progress != nil {
				fmt.Fprintf(progress, "context: %s at %d tokens (%d/%d): history %.0f%%, identifier %s (%.1f s)\n", name, b,
					len(rows), len(strategies)*len(budgets), 100*row.HistoryRetained, map[bool]string{true: "kept", false: "lost"}[row.IdentifierRetained],
					time.Since(began).Seconds())
			}
		}
	}
	return rows, nil
}

func flatten(o Output) string {
	var b strings.Builder
	b.WriteString(o.System)
	for _, m := range o.Messages {
		b.WriteString("\n")
		b.WriteString(m.Content)
	}
	return b.String()
}

// WriteMarkdown writes the measurement as the docs/context.md page.
func WriteMarkdown(w io.Writer, c Counter, run SyntheticRun, rows []MeasureRow, command string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Context layer: what each strategy keeps\n\n")
	fmt.Fprintf(&b, "Generated by `%s`; do not edit by hand.\n\n", command)
	fmt.Fprintf(&b, "A synthetic run of %d tool calls (each result a JSON payload of 20 log rows plus a one-line finding, `step-N: …`) "+
		"with one required identifier, `%s`, in row 12 of step 3's result. The untouched run counts %d tokens (%s). "+
		"Each strategy is applied once, before the next model call, at each budget.\n\n",
		len(run.Facts), run.Identifier, ConversationTokens(c, run.Input.System, run.Input.Messages), c.Name())
	b.WriteString("- **history retained**: share of the per-step findings still present in the context;\n")
	b.WriteString("- **identifier**: whether `" + run.Identifier + "` is still present;\n")
	b.WriteString("- **tokens**: what the assembled request counts (system + messages), and what the restored-pins block costs.\n\n")
	b.WriteString("| strategy | budget | history retained | identifier | tokens used | pin block tokens |\n|---|---:|---:|:---:|---:|---:|\n")
	for _, r := range rows {
		id := "lost"
		if r.IdentifierRetained {
			id = "kept"
		}
		over := ""
		if r.OverBudget {
			over = " (over budget)"
		}
		fmt.Fprintf(&b, "| %s | %d | %.0f%% | %s | %d%s | %d |\n", r.Strategy, r.Budget, 100*r.HistoryRetained, id, r.TokensUsed, over, r.PinTokens)
	}
	b.WriteString("\n## What the numbers say\n\n")
	for _, budget := range uniqueBudgets(rows) {
		var parts []string
		for _, r := range rows {
			if r.Budget != budget {
				continue
			}
			id := "loses the identifier"
			if r.IdentifierRetained {
				id = "keeps the identifier"
			}
			parts = append(parts, fmt.Sprintf("%s keeps %.0f%% of the history and %s", r.Strategy, 100*r.HistoryRetained, id))
		}
		fmt.Fprintf(&b, "- At %d tokens: %s.\n", budget, strings.Join(parts, "; "))
	}
	b.WriteString("\nThe reference build reported that at 4,000 tokens truncation loses the identifier and 88% of the history, " +
		"shrink + summarise keeps the history and still loses the identifier, and only pinning keeps both for about forty tokens. " +
		"The rows above are this implementation's own measurement; where they differ, these are the numbers to trust for this code.\n")
	b.WriteString("\nWhy pinning needs the untouched conversation: shrinking keeps the first rows of each payload, so the identifier in row 12 " +
		"is gone after step 1; pins are therefore collected before shrinking (see `collectPins` in `agents/contextlayer/pins.go`).\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func uniqueBudgets(rows []MeasureRow) []int {
	var out []int
	seen := map[int]bool{}
	for _, r := range rows {
		if !seen[r.Budget] {
			seen[r.Budget] = true
			out = append(out, r.Budget)
		}
	}
	return out
}
