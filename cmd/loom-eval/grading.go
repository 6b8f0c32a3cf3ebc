package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/graders"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/grade"
)

// gradingFlags say how graders run: code graders in the sandbox (started
// only when a case has one), model graders through a judge.
type gradingFlags struct {
	judge, judgeConfig string
	regrade            bool
}

func (g *gradingFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&g.judge, "judge", "", `judge for model and pairwise graders: "scripted" (the deterministic rule judge, labelled scripted in every grade; see docs/scoring.md), or a scripted test judge: "scripted-position-biased" (always prefers what it reads first) or "scripted-random" (answers at random, seed 1); --judge-config for a provider`)
	fs.StringVar(&g.judgeConfig, "judge-config", "", "judge config JSON (provider, model, base_url, api_key_env, budget_usd; docs/scoring.md): model graders ask that provider through the gateway")
	fs.BoolVar(&g.regrade, "regrade", false, "rerun code and model graders even on trials that carry their verdicts")
}

// env builds the grading environment for cases; stop releases what it
// started (the sandbox).
func (g *gradingFlags) env(ctx context.Context, stderr io.Writer, getenv func(string) string, cases []datasets.Case) (grade.Env, func(), error) {
	env := grade.Env{Regrade: g.regrade}
	stop := func() {}
	switch {
	case g.judge != "" && g.judgeConfig != "":
		return env, stop, usageError("--judge and --judge-config: give one (the scripted judge, or a provider's config)")
	case g.judge == "scripted":
		env.Judge = grade.ScriptedJudge{}
	case g.judge == "scripted-position-biased":
		env.Judge = grade.ScriptedJudge{Model: g.judge, Decide: grade.PositionBiasedJudge}
	case g.judge == "scripted-random":
		env.Judge = grade.ScriptedJudge{Model: g.judge, Decide: grade.RandomJudge(rand.New(rand.NewPCG(1, 1)))}
	case g.judge != "":
		return env, stop, usageError("--judge: %q: want \"scripted\", \"scripted-position-biased\" or \"scripted-random\" (a provider's judge comes from --judge-config FILE)", g.judge)
	case g.judgeConfig != "":
		cfg, err := graders.LoadJudgeConfig(g.judgeConfig)
		if err != nil {
			return env, stop, usageError("--judge-config: %v", err)
		}
		j, err := graders.NewJudge(cfg, graders.JudgeOptions{Getenv: getenv})
		if err != nil {
			return env, stop, usageError("--judge-config %s: %v", g.judgeConfig, err)
		}
		env.Judge = j
	}
	needCode := false
	for _, c := range cases {
		for _, gr := range c.Graders {
			needCode = needCode || gr.Type == datasets.GraderCode
		}
	}
	if needCode {
		// The runner starts on the first code grader that runs (a suite
		// whose code verdicts are all recorded starts nothing).
		lazy, stopSandbox := lazySandbox(ctx)
		env.Code = &graders.Sandbox{Runner: lazy, Limits: coding.Limits()}
		stop = func() {
			if err := stopSandbox(); err != nil {
				fmt.Fprintln(stderr, "loom-eval: sandbox shutdown:", err)
			}
		}
	}
	return env, stop, nil
}
