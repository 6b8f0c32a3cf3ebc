package ci

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// freshAll runs both reference agents (step 2) with their spans exported
// to an in-process collector, which it returns still holding them (the
// rollup step drains it).
func freshAll(ctx context.Context, cfg Config, in *inputs, work string, p progress, res *Result) (*traceCollector, error) {
	tc, err := startTraceCollector(ctx, cfg.Logger)
	if err != nil {
		return nil, err
	}
	for _, a := range in.plan() {
		done := p.start("fresh run: %s agent, scripted policy, %d case(s) × %d trial(s)", a.agent, len(a.cases), in.trials)
		ar, err := freshRun(ctx, cfg, in, a, work, tc.tp)
		if err != nil {
			tc.close(ctx)
			return nil, err
		}
		ar.DurationMS = done("%d run(s), %d identical to the committed journal, %d error(s)", ar.Runs, ar.Unchanged, len(ar.Errors))
		res.Fresh.add(ar)
	}
	res.Fresh.Skipped = in.unplanned()
	return tc, nil
}

// checkRollups drains the collector, rolls up every fresh run's trace and
// the SDK trace files, and compares them with the committed rollups.
func checkRollups(ctx context.Context, dir string, tc *traceCollector, fresh FreshResult) (RollupResult, error) {
	path := filepath.Join(dir, RollupsFile)
	res := RollupResult{File: path, Diffs: []RollupDiff{}}
	now, err := currentRollups(ctx, dir, tc, fresh, &res)
	if err != nil {
		return res, err
	}
	committed, err := readRollups(path)
	if err != nil {
		return res, err
	}
	res.Diffs = compareRollups(committed, now)
	res.Passed = len(res.Diffs) == 0
	return res, nil
}

func currentRollups(ctx context.Context, dir string, tc *traceCollector, fresh FreshResult, res *RollupResult) ([]RollupRecord, error) {
	byTrace, err := tc.finish(ctx)
	if err != nil {
		return nil, err
	}
	runs := runTraces(fresh.trials, fresh.traceOf, fresh.usageOf)
	now, traces, err := rollupRecords(dir, runs, byTrace)
	if err != nil {
		return nil, err
	}
	res.Runs, res.Traces = len(runs), traces
	return now, nil
}

// checkRerank scores the committed reranker again (step 6).
func checkRerank(ctx context.Context, cfg Config) (RerankResult, error) {
	path := filepath.Join(cfg.Dir, RerankFile)
	res := RerankResult{File: path, Changed: []RerankChange{}}
	committed, err := readRerank(path)
	if err != nil {
		return res, err
	}
	now, err := computeRerank(ctx, cfg.Dir, cfg.Dataset, cfg.Retrieval)
	if err != nil {
		return res, err
	}
	res.Queries = len(now.Queries)
	res.Changed = compareRerank(committed, now)
	res.Passed = len(res.Changed) == 0
	return res, nil
}

// Recorded says what Record wrote.
type Recorded struct {
	Rollups, Rerank, Judge string
	Runs, Traces, Queries  int
	Verdicts               int
}

// Record writes the recipe's derived baselines into cfg.Dir from the
// current code — rollups.jsonl (a fresh run's rollups and the SDK trace
// files'), rerank.json (the committed reranker on the gold queries) and
// judge.jsonl (the judge graders' verdicts on the committed trials) — as
// `scripts/baselines.sh record` does after recording the journals and
// trials. Nothing is compared; Config.Policy is not needed.
func Record(ctx context.Context, cfg Config) (*Recorded, error) {
	if err := cfg.validate(false); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	in, err := readInputs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "loomwork-ci-record-")
	if err != nil {
		return nil, fmt.Errorf("ci: %w", err)
	}
	defer os.RemoveAll(work)
	p := progress{w: cfg.Progress, now: cfg.Now}
	res := &Result{Fresh: FreshResult{}}
	tc, err := freshAll(ctx, cfg, in, work, p, res)
	if err != nil {
		return nil, err
	}
	if len(res.Fresh.Errors) > 0 {
		tc.close(ctx)
		e := res.Fresh.Errors[0]
		return nil, fmt.Errorf("ci: record: %d fresh run(s) stopped with an error, e.g. %s trial %d: %s", len(res.Fresh.Errors), e.CaseID, e.Trial, e.Message)
	}
	var rr RollupResult
	rollups, err := currentRollups(ctx, cfg.Dir, tc, res.Fresh, &rr)
	if err != nil {
		return nil, err
	}
	out := &Recorded{Rollups: filepath.Join(cfg.Dir, RollupsFile), Rerank: filepath.Join(cfg.Dir, RerankFile),
		Judge: filepath.Join(cfg.Dir, JudgeFile), Runs: rr.Runs, Traces: rr.Traces}
	if err := writeJSONLines(out.Rollups, rollups); err != nil {
		return nil, err
	}
	rk, err := computeRerank(ctx, cfg.Dir, cfg.Dataset, cfg.Retrieval)
	if err != nil {
		return nil, err
	}
	out.Queries = len(rk.Queries)
	if err := writeRerank(out.Rerank, rk); err != nil {
		return nil, err
	}
	jv, err := judgeVerdicts(ctx, in)
	if err != nil {
		return nil, err
	}
	out.Verdicts = len(jv)
	if err := writeJSONLines(out.Judge, jv); err != nil {
		return nil, err
	}
	return out, nil
}
