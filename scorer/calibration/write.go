package calibration

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

func pct(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }

func optPct(v *float64) string {
	if v == nil {
		return "-"
	}
	return pct(*v)
}

func mdeStr(v float64) string {
	if math.IsInf(v, 1) || v > 1 {
		return "none (> 1)"
	}
	return fmt.Sprintf("%.3f", v)
}

// WriteMarkdown writes the calibration table (docs/scoring.md embeds it).
func (r *Result) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d seeded baseline/candidate pairs per row (seed %d); case pass probability p ~ U(%g, %g), candidate p + effect, trials Bernoulli, labelled live; %.0f%% intervals.\n\n",
		r.Reps, r.Seed, r.DifficultyLo, r.DifficultyHi, 100*r.Level)
	b.WriteString("| cases × trials | effect |")
	for _, o := range r.Cells[0].Outcomes {
		fmt.Fprintf(&b, " `%s` fails |", o.Policy)
	}
	b.WriteString(" requirement (first policy) | holds | paired interval covers | percentile bootstrap covers | suite rate covers | median MDE |\n|---|---:|")
	for range r.Cells[0].Outcomes {
		b.WriteString("---:|")
	}
	b.WriteString("---|---|---:|---:|---:|---:|\n")
	for _, c := range r.Cells {
		fmt.Fprintf(&b, "| %d × %d | %+.2f |", c.Cases, c.Trials, c.Effect)
		for _, o := range c.Outcomes {
			fmt.Fprintf(&b, " %s [%s, %s] |", pct(o.Rate), pct(o.Lower), pct(o.Upper))
		}
		o := c.Outcomes[0]
		req, holds := "—", "—"
		if o.Holds != nil {
			req, holds = o.Required, map[bool]string{true: "yes", false: "**no**"}[*o.Holds]
		}
		fmt.Fprintf(&b, " %s | %s | %s | %s | %s | %s |\n", req, holds, pct(c.DeltaCoverage), optPct(c.BootstrapCoverage), pct(c.RateCoverage), mdeStr(c.MedianMDE))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteText writes the same table for a terminal.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Calibration: %d pairs per design, seed %d, p ~ U(%g, %g), %.0f%% intervals\n", r.Reps, r.Seed, r.DifficultyLo, r.DifficultyHi, 100*r.Level)
	for i, o := range r.Cells[0].Outcomes {
		fmt.Fprintf(&b, "policy [%d]: %s\n", i+1, o.Policy)
	}
	fmt.Fprintf(&b, "%-10s %7s", "DESIGN", "EFFECT")
	for i := range r.Cells[0].Outcomes {
		fmt.Fprintf(&b, " %14s", fmt.Sprintf("[%d] FAILS", i+1))
	}
	fmt.Fprintf(&b, " %9s %9s %9s %10s  %s\n", "COVERAGE", "BOOTSTRAP", "RATE COV", "MEDIAN MDE", "REQUIREMENT")
	for _, c := range r.Cells {
		fmt.Fprintf(&b, "%-10s %+7.2f", fmt.Sprintf("%d×%d", c.Cases, c.Trials), c.Effect)
		for _, o := range c.Outcomes {
			fmt.Fprintf(&b, " %14s", pct(o.Rate))
		}
		req := ""
		if o := c.Outcomes[0]; o.Holds != nil {
			req = o.Required + map[bool]string{true: ": holds", false: ": VIOLATED"}[*o.Holds]
		}
		fmt.Fprintf(&b, " %9s %9s %9s %10s  %s\n", pct(c.DeltaCoverage), optPct(c.BootstrapCoverage), pct(c.RateCoverage), mdeStr(c.MedianMDE), req)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteText writes a plan for a terminal.
func (p *Plan) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Plan: detect a pass-rate drop of %g (realized %.3f) with %.0f%% power; simulated from %d baseline cases, %d pairs per design, seed %d\n",
		p.Drop, p.RealizedDrop, 100*p.Power, p.BaselineCases, p.Reps, p.Seed)
	fmt.Fprintf(&b, "%7s %7s %8s %17s %13s %11s\n", "CASES", "TRIALS", "POWER", "95% INTERVAL", "FALSE ALARMS", "MEDIAN MDE")
	for _, r := range p.Rows {
		fmt.Fprintf(&b, "%7d %7d %8s %17s %13s %11s\n", r.Cases, r.Trials, pct(r.Power), "["+pct(r.Lower)+", "+pct(r.Upper)+"]", pct(r.FalseAlarms), mdeStr(r.MedianMDE))
	}
	ts := make([]int, 0, len(p.Smallest))
	seen := map[int]bool{}
	for _, r := range p.Rows {
		if !seen[r.Trials] {
			seen[r.Trials] = true
			ts = append(ts, r.Trials)
		}
	}
	sort.Ints(ts)
	for _, t := range ts {
		if n := p.Smallest[t]; n > 0 {
			fmt.Fprintf(&b, "with %d trials per case: %d cases reach %.0f%% power (%d trials in all)\n", t, n, 100*p.Power, n*t)
		} else {
			fmt.Fprintf(&b, "with %d trials per case: no design tried reaches %.0f%% power\n", t, 100*p.Power)
		}
	}
	for _, a := range p.Assumptions {
		fmt.Fprintf(&b, "assumes: %s\n", a)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
