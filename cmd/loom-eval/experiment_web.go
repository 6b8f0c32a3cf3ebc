package main

import (
	"context"

	"github.com/loomwork/loomwork/baselines/experiment"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/web"
)

// webExperiments is the UI's web.ExperimentComparer: the experiments the
// served store keeps, compared by experiment.Compare under the default
// policy, the path `experiment compare --store` takes.
type webExperiments struct{ r experiment.StoreReader }

// newWebExperiments is nil (the UI then says it cannot compare) for a
// store that keeps no experiments.
func newWebExperiments(st store.Store) web.ExperimentComparer {
	r, ok := st.(experiment.StoreReader)
	if !ok {
		return nil
	}
	return webExperiments{r: r}
}

// CompareExperiments implements web.ExperimentComparer.
func (w webExperiments) CompareExperiments(ctx context.Context, ids []string) (*web.ExperimentComparison, error) {
	sides := make([]*experiment.Side, len(ids))
	for i, id := range ids {
		s, err := experiment.LoadStored(ctx, w.r, id)
		if err != nil {
			return nil, err
		}
		sides[i] = s
	}
	policy, err := experiment.ParseDefaultPolicy()
	if err != nil {
		return nil, err
	}
	cfg, err := experimentScoreConfig("")
	if err != nil {
		return nil, err
	}
	c, err := experiment.Compare(ctx, cfg, sides, policy)
	if err != nil {
		return nil, err
	}
	out := &web.ExperimentComparison{Experiments: c.Experiments, Comparison: c.Report.Comparison, Gate: c.Report.Gate, DatasetWarnings: c.DatasetWarnings}
	for _, row := range c.Cases {
		r := web.ExperimentCaseRow{CaseID: row.CaseID, Changes: row.Changes}
		for _, sd := range row.Sides {
			r.Sides = append(r.Sides, web.ExperimentCaseSide{Passes: sd.Passes, Trials: sd.Trials, Score: sd.Score,
				MeanCostUSD: sd.MeanCostUSD, MeanDurationMS: sd.MeanDurationMS, TraceIDs: sd.TraceIDs, Answer: sd.Answer})
		}
		out.Cases = append(out.Cases, r)
	}
	return out, nil
}
