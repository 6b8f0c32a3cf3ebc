package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/graders"
	"github.com/loomwork/loomwork/agents/sandbox"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/grade"
)

// gradingFlags say how graders run: code graders in the sandbox (started
// only when a case has one), model graders through a judge.
type gradingFlags struct {
	judge   string
	regrade bool
}

func (g *gradingFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&g.judge, "judge", "", `judge for model and pairwise graders: "scripted" (the deterministic rule judge, labelled scripted in every grade; see docs/scoring.md)`)
	fs.BoolVar(&g.regrade, "regrade", false, "rerun code and model graders even on trials that carry their verdicts")
}

// env builds the grading environment for cases; stop releases what it
// started (the sandbox).
func (g *gradingFlags) env(ctx context.Context, stderr io.Writer, cases []datasets.Case) (grade.Env, func(), error) {
	env := grade.Env{Regrade: g.regrade}
	stop := func() {}
	switch g.judge {
	case "":
	case "scripted":
		env.Judge = grade.ScriptedJudge{}
	default:
		return env, stop, usageError("--judge: %q: want \"scripted\"", g.judge)
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
		lazy := &coding.LazySandbox{Config: sandbox.Config{HelperArgs: []string{"sandbox"}}}
		env.Code = &graders.Sandbox{Runner: lazy, Limits: coding.Limits()}
		stop = func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
			defer cancel()
			if err := lazy.Shutdown(sctx); err != nil {
				fmt.Fprintln(stderr, "loom-eval: sandbox shutdown:", err)
			}
		}
	}
	return env, stop, nil
}
