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

// designStr names a design's shape in a table row.
func designStr(d Design) string {
	s := fmt.Sprintf("%d × %d", d.Cases, d.Trials)
	if d.ICC > 0 {
		s += fmt.Sprintf(", ICC %g", d.ICC)
	}
	if d.Groups > 0 {
		s += fmt.Sprintf(", %d groups", d.Groups)
		if d.ShockSD > 0 {
			s += fmt.Sprintf(", shock %g", d.ShockSD)
		}
	}
	return s
}

// checksStr lists one policy's failures per check with Wilson intervals.
func checksStr(o PolicyOutcome) string {
	if len(o.Checks) == 0 {
		return "none"
	}
	var parts []string
	for _, c := range o.Checks {
		b := ""
		if c.Bound != nil {
			b = fmt.Sprintf(" (≤ %s)", pct(*c.Bound))
		}
		parts = append(parts, fmt.Sprintf("%s %s [%s, %s]%s", c.Check, pct(c.Rate), pct(c.Lower), pct(c.Upper), b))
	}
	return strings.Join(parts, "; ")
}

func verdictStr(o PolicyOutcome) string {
	if o.Holds == nil {
		return "—"
	}
	if *o.Holds {
		return "holds"
	}
	return "**" + o.Verdict + "**"
}

// WriteMarkdown writes the calibration table (docs/scoring.md embeds it).
func (r *Result) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d seeded baseline/candidate pairs per row (seed %d); case pass probability p ~ U(%g, %g), candidate p + effect; "+
		"ICC ρ: each run draws a case's probability from Beta(p(1−ρ)/ρ, (1−p)(1−ρ)/ρ) (ρ = 1: a case's trials in a run all agree); "+
		"groups: cases declare one of G groups, and with a shock each group's probabilities move by N(0, SD²) on the logit scale per run; trials labelled live; %.0f%% intervals. "+
		"Fails: how often the gate failed (at effect 0 the false-alarm rate, below 0 the detection rate), 95%% Wilson interval.\n\n",
		r.Reps, r.Seed, r.DifficultyLo, r.DifficultyHi, 100*r.Level)
	b.WriteString("| cases × trials | effect |")
	for _, o := range r.Cells[0].Outcomes {
		fmt.Fprintf(&b, " `%s` fails |", o.Policy)
	}
	b.WriteString(" failing checks (first policy) | Fisher on raw trials would flag a case | case test can fire | paired interval covers | covers without groups | percentile bootstrap covers | suite rate covers | median MDE | requirement (first policy) | verdict |\n|---|---:|")
	for range r.Cells[0].Outcomes {
		b.WriteString("---:|")
	}
	b.WriteString("---|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, c := range r.Cells {
		fmt.Fprintf(&b, "| %s | %+.2f |", designStr(c.Design), c.Effect)
		for _, o := range c.Outcomes {
			fmt.Fprintf(&b, " %s [%s, %s] |", pct(o.Rate), pct(o.Lower), pct(o.Upper))
		}
		o := c.Outcomes[0]
		rate := pct(c.RateCoverage)
		if c.ShockSD > 0 {
			rate += " (not required)"
		}
		fmt.Fprintf(&b, " %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", checksStr(o), optPct(c.FisherCaseAlarms), pct(c.CaseTestCanFire),
			pct(c.DeltaCoverage), optPct(c.NaiveCoverage), optPct(c.BootstrapCoverage), rate, mdeStr(c.MedianMDE), o.Required, verdictStr(o))
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
	fmt.Fprintf(&b, "%-28s %7s", "DESIGN", "EFFECT")
	for i := range r.Cells[0].Outcomes {
		fmt.Fprintf(&b, " %22s", fmt.Sprintf("[%d] FAILS", i+1))
	}
	fmt.Fprintf(&b, " %8s %8s %9s %9s %9s %9s %10s  %s\n", "FISHER", "CAN FIRE", "COVERAGE", "NO GROUP", "BOOTSTRAP", "RATE COV", "MEDIAN MDE", "REQUIREMENT")
	for _, c := range r.Cells {
		fmt.Fprintf(&b, "%-28s %+7.2f", designStr(c.Design), c.Effect)
		for _, o := range c.Outcomes {
			fmt.Fprintf(&b, " %22s", pct(o.Rate)+" ["+pct(o.Lower)+", "+pct(o.Upper)+"]")
		}
		req := ""
		if o := c.Outcomes[0]; o.Holds != nil {
			req = o.Required + ": " + o.Verdict
		}
		fmt.Fprintf(&b, " %8s %8s %9s %9s %9s %9s %10s  %s\n", optPct(c.FisherCaseAlarms), pct(c.CaseTestCanFire), pct(c.DeltaCoverage), optPct(c.NaiveCoverage), optPct(c.BootstrapCoverage), pct(c.RateCoverage), mdeStr(c.MedianMDE), req)
		if o := c.Outcomes[0]; len(o.Checks) > 0 {
			fmt.Fprintf(&b, "%-36s failing checks [1]: %s\n", "", checksStr(o))
		}
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
