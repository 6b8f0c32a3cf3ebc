package experiment

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/gate"
	"github.com/loomwork/loomwork/scorer/report"
	"github.com/loomwork/loomwork/store"
)

// DefaultPolicy is the gate an experiment applies against --against
// without --policy: the calibrated policy committed as
// baselines/policy.json (a test keeps the two equal).
const DefaultPolicy = `{
  "confidence": 0.95,
  "regression": {"metric": "pass_rate", "margin": 0},
  "case_regressions": {"alpha": 0.025, "correction": "holm", "max": 0},
  "scripted_exact": true,
  "fail_on_missing": true
}
`

// ParseDefaultPolicy parses DefaultPolicy.
func ParseDefaultPolicy() (*gate.Policy, error) {
	return gate.ParseNamed([]byte(DefaultPolicy), "the default policy (baselines/policy.json)")
}

// Side is one experiment read back for scoring.
type Side struct {
	Dir    string
	Record *datasets.Experiment
	Trials []datasets.Trial
	// Source names the trials in reports when they are not a folder's
	// trials file (an experiment read from a store); Cases is then the
	// case file kept with it (nil: read the record's path; see CasesOf).
	Source string
	Cases  []datasets.Case
	// Notes say what could not be read (a store that does not open: the
	// trials are then scored on what they recorded).
	Notes []string
}

// Load reads an experiment folder's record and trials and, when reader is
// nil, opens the experiment's store read-only to attach each trial's spans
// (trace graders and rollups read them). A store that does not open, or a
// trace it does not hold, leaves the trials as recorded, with a note.
func Load(ctx context.Context, dir string, reader store.Reader, open OpenStore) (*Side, error) {
	rec, err := ReadRecord(dir)
	if err != nil {
		return nil, err
	}
	trials, err := datasets.LoadTrials(filepath.Join(dir, TrialsFile))
	if err != nil {
		return nil, err
	}
	s := &Side{Dir: dir, Record: rec, Trials: trials}
	if reader == nil && rec.Store != "" && open != nil {
		st, err := open(ctx, rec.Store)
		if err != nil {
			s.Notes = append(s.Notes, fmt.Sprintf("%s: store %s did not open (%v): scored on the recorded fields", rec.ID, rec.Store, err))
			return s, nil
		}
		defer st.Shutdown(context.WithoutCancel(ctx))
		reader = st
	}
	if reader != nil {
		with := append([]datasets.Trial(nil), trials...)
		if err := scorer.ResolveTraces(ctx, reader, with); err != nil {
			s.Notes = append(s.Notes, fmt.Sprintf("%s: %v: scored on the recorded fields", rec.ID, err))
		} else {
			s.Trials = with
		}
	}
	return s, nil
}

// OpenStore opens a trace store by its URL, read-only (cmd/loom-eval
// passes storeurl's opener; this package opens none itself).
type OpenStore func(ctx context.Context, url string) (store.Store, error)

// Evaluate scores cand (against base, gated by policy when base is set)
// through report.Evaluate, the pipeline of `loom-eval score` and `gate`.
func Evaluate(ctx context.Context, cfg scorer.Config, cases []datasets.Case, casesFile string, cand, base *Side, policy *gate.Policy, in report.Inputs) (*report.Report, error) {
	in.Cases, in.CasesFile = cases, casesFile
	in.Candidate = report.Trials{Source: cand.source(), Trials: cand.Trials}
	if base != nil {
		in.Baseline = report.Trials{Source: base.source(), Trials: base.Trials}
		in.Policy = policy
	}
	r, err := report.Evaluate(ctx, cfg, in)
	if err != nil {
		return nil, err
	}
	for _, s := range []*Side{cand, base} {
		if s != nil && r.Suite != nil {
			r.Suite.Notes = append(r.Suite.Notes, s.Notes...)
		}
	}
	return r, nil
}

func (s *Side) source() string {
	if s.Source != "" {
		return s.Source
	}
	return filepath.Join(s.Dir, TrialsFile)
}

// CaseRow is one case of a side-by-side comparison.
type CaseRow struct {
	CaseID string   `json:"case_id"`
	Change string   `json:"change"`
	A      CaseSide `json:"a"`
	B      CaseSide `json:"b"`
	// AdjustedP is the per-case test's adjusted p-value (see docs/scoring.md).
	AdjustedP float64 `json:"adjusted_p"`
}

// CaseSide is one experiment's trials of a case (TraceIDs in trial
// order).
type CaseSide struct {
	Passes int     `json:"passes"`
	Trials int     `json:"trials"`
	Score  float64 `json:"score"`
	// MeanCostUSD and MeanDurationMS are per trial; nil when unknown.
	MeanCostUSD    *float64 `json:"mean_cost_usd"`
	MeanDurationMS *float64 `json:"mean_duration_ms"`
	TraceIDs       []string `json:"trace_ids"`
	// Answer is the agent's answer in the case's first trial.
	Answer string `json:"answer"`
}

// Rows pairs a comparison's cases with both sides' costs, latencies and
// trace ids.
func Rows(cmp *scorer.Comparison, a, b []datasets.Trial) []CaseRow {
	var rows []CaseRow
	for _, p := range cmp.Pairs {
		row := CaseRow{CaseID: p.CaseID, Change: p.Change, AdjustedP: p.AdjustedP,
			A: CaseSide{Passes: p.BasePasses, Trials: p.BaseTrials, Score: p.BaseScore},
			B: CaseSide{Passes: p.CandPasses, Trials: p.CandTrials, Score: p.CandScore}}
		fill(&row.A, p.CaseID, a)
		fill(&row.B, p.CaseID, b)
		rows = append(rows, row)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].CaseID < rows[j].CaseID })
	return rows
}

func fill(s *CaseSide, caseID string, trials []datasets.Trial) {
	var cost, dur float64
	var nCost, nDur, n int
	costKnown := true
	first := -1
	var ids []datasets.Trial // trace ids in trial order, whatever the file's order
	for _, t := range trials {
		if t.CaseID != caseID {
			continue
		}
		n++
		if (first < 0 || t.Trial < first) && t.Transcript != nil {
			first, s.Answer = t.Trial, t.Transcript.Answer
		}
		ids = append(ids, datasets.Trial{Trial: t.Trial, TraceID: t.TraceID})
		if t.CostUSD != nil {
			cost += *t.CostUSD
			nCost++
		} else {
			costKnown = false
		}
		if t.DurationMS != nil {
			dur += *t.DurationMS
			nDur++
		}
	}
	sort.SliceStable(ids, func(i, j int) bool { return ids[i].Trial < ids[j].Trial })
	for _, t := range ids {
		s.TraceIDs = append(s.TraceIDs, t.TraceID)
	}
	if n > 0 && costKnown && nCost > 0 {
		v := cost / float64(nCost)
		s.MeanCostUSD = &v
	}
	if nDur > 0 {
		v := dur / float64(nDur)
		s.MeanDurationMS = &v
	}
}
