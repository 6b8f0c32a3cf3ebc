package grade

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
)

// ErrNoBackend marks a case whose grader needs a backend the Env lacks (a
// code grader without a sandbox, a model grader without a judge).
var ErrNoBackend = errors.New("grader backend not configured")

// Input is what one grader sees of one trial.
type Input struct {
	Case  *datasets.Case
	Trial *datasets.Trial
	// Transcript is nil when neither the trial, its journal nor its spans
	// gave one (answer graders then fail, saying so).
	Transcript *datasets.Transcript
	Facts      scorer.Facts
}

// Summary says what grading did.
type Summary struct {
	Trials   int // trials whose case has graders
	Graded   int // verdicts reached by running a grader
	Recorded int // code and model verdicts kept from the trial (not rerun)
	// Redecided counts the recorded model and pairwise verdicts decided
	// again from their recorded judge replies (Redecide; no model called).
	Redecided int
	Notes     []string
}

// Trials grades every trial whose case has graders and writes the
// verdicts to trial.Grades, in the case's order. Deterministic graders
// always run; a code or model grader's verdict the trial already carries
// (same name and type) is kept unless env.Regrade, and a model or
// pairwise verdict that records its judge replies is decided again from
// them under the current rules (Redecide), without calling a model. A trial naming a case
// not in cases is left alone (Score reports it). A grader that needs a
// backend env lacks fails the whole call with ErrNoBackend: a grade is
// never skipped silently.
func Trials(ctx context.Context, env Env, cases []datasets.Case, trials []datasets.Trial) (Summary, error) {
	var sum Summary
	byID := make(map[string]*datasets.Case, len(cases))
	for i := range cases {
		byID[cases[i].ID] = &cases[i]
	}
	p := progress{w: env.Progress}
	for i := range trials {
		if c := byID[trials[i].CaseID]; c != nil && runsCostly(env, c, &trials[i]) {
			p.total++
		}
	}
	p.start()
	for i := range trials {
		t := &trials[i]
		c := byID[t.CaseID]
		if c == nil || len(c.Graders) == 0 {
			continue
		}
		costly := runsCostly(env, c, t)
		if err := gradeTrial(ctx, env, c, t, &sum); err != nil {
			return sum, err
		}
		if costly {
			p.graded(c, t)
		}
	}
	return sum, nil
}

// gradeTrial grades one trial of case c (see Trials), counting in sum.
func gradeTrial(ctx context.Context, env Env, c *datasets.Case, t *datasets.Trial, sum *Summary) error {
	sum.Trials++
	f, err := scorer.TrialFacts(t, env.Prices)
	if err != nil {
		return err
	}
	in := Input{Case: c, Trial: t, Transcript: t.Transcript, Facts: f}
	if in.Transcript == nil && len(t.Spans) > 0 {
		tr := TranscriptFromSpans(t.Spans)
		in.Transcript = &tr
	}
	recorded := make(map[string]datasets.Grade, len(t.Grades))
	for _, g := range t.Grades {
		recorded[g.Name] = g
	}
	out := make([]datasets.Grade, 0, len(c.Graders))
	for j := range c.Graders {
		g := &c.Graders[j]
		name := g.DisplayName()
		if old, ok := recorded[name]; ok && keeps(env, g, old) {
			old.Required = g.IsRequired()
			if redone, note := Redecide(g, &old); redone {
				sum.Redecided++
				if note != "" {
					sum.Notes = append(sum.Notes, fmt.Sprintf("trial %d of case %q: grader %q: %s", t.Trial, t.CaseID, name, note))
				}
			}
			out = append(out, old)
			sum.Recorded++
			continue
		}
		gr, err := One(ctx, env, g, in)
		if err != nil {
			return fmt.Errorf("grade trial %d of case %q%s: grader %q: %w", t.Trial, t.CaseID, lineSuffix(t.Line), name, err)
		}
		out = append(out, gr)
		sum.Graded++
	}
	for _, g := range t.Grades {
		if !hasGrader(c, g.Name) {
			sum.Notes = append(sum.Notes, fmt.Sprintf("trial %d of case %q: grade %q dropped: the case has no grader of that name", t.Trial, t.CaseID, g.Name))
		}
	}
	t.Grades = out
	return nil
}

// keeps reports whether grader g's recorded verdict old is kept rather
// than run again: a code or model verdict of the same type, unless
// env.Regrade.
func keeps(env Env, g *datasets.Grader, old datasets.Grade) bool {
	return old.Type == g.Type && costly(g.Type) && !env.Regrade
}

// runsCostly reports whether grading trial t of case c runs a code or
// model grader (one whose verdict it does not carry): what takes time.
func runsCostly(env Env, c *datasets.Case, t *datasets.Trial) bool {
	for j := range c.Graders {
		g := &c.Graders[j]
		if !costly(g.Type) {
			continue
		}
		kept := false
		for _, old := range t.Grades {
			kept = kept || (old.Name == g.DisplayName() && keeps(env, g, old))
		}
		if !kept {
			return true
		}
	}
	return false
}

// progress writes Env.Progress's lines: one when grading starts, one per
// trial whose code or model graders ran ("grade: N/M trials graded").
type progress struct {
	w           io.Writer
	done, total int
}

func (p *progress) start() {
	if p.w != nil && p.total > 0 {
		fmt.Fprintf(p.w, "grade: running the code and model graders of %d trial(s) (the sandbox, the judge); recorded verdicts are kept…\n", p.total)
	}
}

func (p *progress) graded(c *datasets.Case, t *datasets.Trial) {
	p.done++
	if p.w == nil {
		return
	}
	var verdicts []string
	for j := range c.Graders {
		g := &c.Graders[j]
		for _, gr := range t.Grades {
			if gr.Name == g.DisplayName() && costly(g.Type) {
				verdicts = append(verdicts, gr.Name+" "+map[bool]string{true: "passed", false: "failed"}[gr.Passed])
			}
		}
	}
	fmt.Fprintf(p.w, "grade: %d/%d trials graded (case %s trial %d: %s)\n", p.done, p.total, t.CaseID, t.Trial, strings.Join(verdicts, ", "))
}

// costly graders run outside the process (a sandbox, a judge model): a
// recorded verdict is kept rather than paid for again.
func costly(typ string) bool {
	return typ == datasets.GraderCode || typ == datasets.GraderModel || typ == datasets.GraderPairwise
}

func hasGrader(c *datasets.Case, name string) bool {
	for i := range c.Graders {
		if c.Graders[i].DisplayName() == name {
			return true
		}
	}
	return false
}

// One runs one grader on one trial. An error means the grader could not be
// run at all (no backend, a cancelled context); a grader that ran but
// could not reach a verdict returns a failed grade with Error set.
func One(ctx context.Context, env Env, g *datasets.Grader, in Input) (datasets.Grade, error) {
	gr := datasets.Grade{Name: g.DisplayName(), Type: g.Type, Required: g.IsRequired()}
	var err error
	switch g.Type {
	case datasets.GraderEquals, datasets.GraderContains, datasets.GraderRegex, datasets.GraderJSONSchema, datasets.GraderNumber:
		textGrader(g, in, &gr)
	case datasets.GraderEvidenceCited, datasets.GraderEvidenceRetrieved:
		evidenceGrader(g, in, &gr)
	case datasets.GraderToolCalled:
		toolGrader(g, in, &gr)
	case datasets.GraderTrace:
		traceGrader(g, in, &gr)
	case datasets.GraderCode:
		if env.Code == nil {
			return gr, fmt.Errorf("%w: a code grader runs in the sandbox, and none is configured (loom-eval starts one when it runs as root)", ErrNoBackend)
		}
		err = codeGrader(ctx, env.Code, g, in, &gr)
	case datasets.GraderModel:
		if env.Judge == nil {
			return gr, fmt.Errorf("%w: a model grader needs a judge (--judge scripted, or --judge-config FILE for a provider)", ErrNoBackend)
		}
		err = modelGrader(ctx, env.Judge, g, in, &gr)
	case datasets.GraderPairwise:
		if env.Judge == nil {
			return gr, fmt.Errorf("%w: a pairwise grader needs a judge (--judge scripted, or --judge-config FILE for a provider)", ErrNoBackend)
		}
		err = pairwiseGrader(ctx, env.Judge, g, in, &gr)
	default:
		return gr, fmt.Errorf("unknown grader type %q", g.Type)
	}
	if err != nil {
		return gr, err
	}
	if gr.Error != "" {
		gr.Passed, gr.Score = false, 0
	}
	return gr, nil
}

func lineSuffix(line int) string {
	if line > 0 {
		return fmt.Sprintf(" (line %d)", line)
	}
	return ""
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
