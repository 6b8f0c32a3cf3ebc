package ci

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/runtime/bookkeeper"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/replay"
)

// ReplayResult is step 1.
type ReplayResult struct {
	Passed   bool     `json:"passed"`
	Journals []string `json:"journals"`
	Runs     int      `json:"runs"`
	// Divergences are the runs that did not reproduce their journal, one
	// entry per run, in journal order.
	Divergences []Divergence `json:"divergences"`
	// TrialsFile holds one trial record per replayed run, a diverged one
	// with its divergence field (only when Config.WorkDir is kept).
	TrialsFile string  `json:"trials_file,omitempty"`
	DurationMS float64 `json:"duration_ms"`
}

// Divergence is one replayed run that did not reproduce its journal,
// mapped to its case.
type Divergence struct {
	CaseID string `json:"case_id"`
	Trial  int    `json:"trial"`
	RunID  string `json:"run_id"`
	File   string `json:"file"`
	Line   int    `json:"line,omitempty"` // the journal line of the first departure
	// Code is the divergence code (journal.CodeMismatch, CodeExtra,
	// CodeMissing, CodeResultDiffers) or "error" for a run the engine
	// could not replay.
	Code    string `json:"code"`
	Message string `json:"message"`
	// ResultDiffs counts the re-executed tools whose result differed.
	ResultDiffs int `json:"result_diffs,omitempty"`
}

// CodeError marks a run the replay engine could not replay at all.
const CodeError = "error"

func replayAll(ctx context.Context, cfg Config, in *inputs, work string) (ReplayResult, error) {
	out := ReplayResult{Journals: in.journalFiles, Divergences: []Divergence{}}
	reg := runtime.NewRegistry()
	for _, register := range []func(*runtime.Registry) error{
		bookkeeper.Register,
		func(r *runtime.Registry) error { return research.Register(r, research.Config{Index: cfg.Index}) },
		func(r *runtime.Registry) error {
			return coding.Register(r, coding.Config{Sandbox: cfg.Sandbox, WorkRoot: filepath.Join(work, "replay-workspaces")})
		},
	} {
		if err := register(reg); err != nil {
			return out, fmt.Errorf("ci: replay: %w", err)
		}
	}
	dbs := filepath.Join(work, "replay-db")
	if err := os.MkdirAll(dbs, 0o755); err != nil {
		return out, fmt.Errorf("ci: replay: %w", err)
	}
	eng, err := replay.New(replay.Config{Registry: reg, WorkDir: dbs, Logger: cfg.Logger})
	if err != nil {
		return out, fmt.Errorf("ci: replay: %w", err)
	}
	var trials []datasets.Trial
	for _, runs := range in.runs {
		for _, run := range runs {
			rep, err := eng.Replay(ctx, run)
			out.Runs++
			if err != nil {
				if ctx.Err() != nil {
					return out, err
				}
				// The engine could not replay the run at all (an agent
				// not registered, a journal not opening with
				// run_started): the journal is not reproduced either.
				d := Divergence{CaseID: rep.CaseID, Trial: rep.Trial, RunID: run.ID, File: run.File, Code: CodeError, Message: err.Error()}
				if d.CaseID == "" {
					d.CaseID = run.ID
				}
				out.Divergences = append(out.Divergences, d)
				continue
			}
			t := replay.TrialRecord(&rep, false)
			t.Divergence = replay.Diverged(&rep, true)
			trials = append(trials, t)
			if t.Divergence == "" {
				continue
			}
			d := Divergence{CaseID: t.CaseID, Trial: rep.Trial, RunID: rep.RunID, File: rep.File, Message: t.Divergence, ResultDiffs: len(rep.ResultDiffs)}
			if rep.Divergence != nil {
				d.Code, d.Line = rep.Divergence.Code, rep.DivergeLine
			} else {
				d.Code, d.Line = rep.ResultDiffs[0].Code, rep.ResultDiffs[0].Line
			}
			out.Divergences = append(out.Divergences, d)
		}
	}
	out.Passed = len(out.Divergences) == 0
	path := filepath.Join(work, "replay.trials.jsonl")
	if err := writeTrials(path, trials); err != nil {
		return out, err
	}
	if cfg.WorkDir != "" {
		out.TrialsFile = path
	}
	return out, nil
}

// writeTrials writes trial records as JSONL, each validated first: a
// record the scorer would refuse is the recipe's bug, not the user's.
func writeTrials(path string, trials []datasets.Trial) error {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for i := range trials {
		if err := trials[i].Validate(); err != nil {
			return fmt.Errorf("ci: trial %d of case %s: %w", trials[i].Trial, trials[i].CaseID, err)
		}
		if err := enc.Encode(trials[i]); err != nil {
			return fmt.Errorf("ci: write %s: %w", path, err)
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("ci: write trials: %w", err)
	}
	return nil
}

// summary counts divergences by code, e.g. "LWR1200 ×3, LWR1100 ×1".
func summary(ds []Divergence) string {
	var codes []string
	n := map[string]int{}
	for _, d := range ds {
		if n[d.Code] == 0 {
			codes = append(codes, d.Code)
		}
		n[d.Code]++
	}
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s ×%d", c, n[c])
	}
	return strings.Join(parts, ", ")
}
