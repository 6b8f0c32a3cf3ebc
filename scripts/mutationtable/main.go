// Command mutationtable turns the results of scripts/mutations.sh into the
// mutation table of docs/scoring.md: for each deliberate regression in
// scripts/mutations/NAME.patch, whether `loom-eval ci` failed, which part
// caught it (replay divergences by code, fresh-run errors, the gate checks
// that failed) and the cases it named. A mutation the recipe did not catch
// is listed with the patch's "If not caught:" explanation.
//
//	go run ./scripts/mutationtable --results DIR --patches scripts/mutations [--doc docs/scoring.md] [NAME...]
//
// DIR holds NAME.json (`loom-eval ci --json`) and NAME.rc (its exit code)
// per mutation. With --doc the table replaces what is between the markers
// <!-- mutations:begin --> and <!-- mutations:end -->; without it the table
// is printed.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Markers delimit the generated table in the doc.
const (
	BeginMarker = "<!-- mutations:begin -->"
	EndMarker   = "<!-- mutations:end -->"
)

// Patch is one deliberate regression and the header lines that describe it.
type Patch struct {
	Name, Subject, Layer, IfNotCaught string
}

// ReadPatch reads the header of scripts/mutations/NAME.patch: the lines
// before the diff, "Mutation:", "Layer:" and optional "If not caught:".
func ReadPatch(path string) (Patch, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Patch{}, err
	}
	p := Patch{Name: strings.TrimSuffix(filepath.Base(path), ".patch")}
	head, _, found := strings.Cut(string(b), "\ndiff --git ")
	if !found {
		return p, fmt.Errorf("%s: no \"diff --git\" line: not a patch", path)
	}
	for _, line := range strings.Split(head, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		switch k {
		case "Mutation":
			p.Subject = v
		case "Layer":
			p.Layer = v
		case "If not caught":
			p.IfNotCaught = v
		}
	}
	if p.Subject == "" || p.Layer == "" {
		return p, fmt.Errorf("%s: the header needs \"Mutation: …\" and \"Layer: …\" lines before the diff", path)
	}
	return p, nil
}

// Patches lists the patches of dir, sorted by name.
func Patches(dir string) ([]Patch, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.patch"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []Patch
	for _, p := range paths {
		pt, err := ReadPatch(p)
		if err != nil {
			return nil, err
		}
		out = append(out, pt)
	}
	return out, nil
}

// ciReport is the part of `loom-eval ci --json` the table reads
// (baselines/ci.Result; scripts import nothing of the module).
type ciReport struct {
	Passed bool     `json:"passed"`
	Failed []string `json:"failed"`
	Replay struct {
		Runs        int `json:"runs"`
		Divergences []struct {
			CaseID string `json:"case_id"`
			Code   string `json:"code"`
		} `json:"divergences"`
	} `json:"replay"`
	Fresh struct {
		Runs    int `json:"runs"`
		Changed []struct {
			CaseID string `json:"case_id"`
		} `json:"changed"`
		Errors []struct {
			CaseID string `json:"case_id"`
		} `json:"errors"`
	} `json:"fresh"`
	Gate struct {
		FailedChecks []string `json:"failed_checks"`
		Worse        []struct {
			CaseID string `json:"case_id"`
		} `json:"worse"`
		MustPassFailing []string `json:"must_pass_failing"`
	} `json:"gate"`
	Verdicts struct {
		Changed []verdictChange `json:"changed"`
	} `json:"verdicts"`
	Rescore struct {
		Passed  bool `json:"passed"`
		Changed []struct {
			CaseID string `json:"case_id"`
		} `json:"changed"`
		Verdicts []verdictChange `json:"verdicts"`
	} `json:"rescore"`
	Rollups struct {
		Runs   int `json:"runs"`
		Traces int `json:"traces"`
		Diffs  []struct {
			CaseID string `json:"case_id"`
			File   string `json:"file"`
			Field  string `json:"field"`
		} `json:"diffs"`
	} `json:"rollups"`
	Reranker struct {
		Queries int `json:"queries"`
		Changed []struct {
			QueryID string `json:"query_id"`
		} `json:"changed"`
	} `json:"reranker"`
}

type verdictChange struct {
	CaseID    string `json:"case_id"`
	Grader    string `json:"grader"`
	Direction string `json:"direction"`
}

// verdictText says "**5 verdicts regressed** (grader ×5), **2 improved** (…)".
func verdictText(vs []verdictChange, all map[string]bool) string {
	var parts []string
	for _, dir := range []string{"regressed", "improved"} {
		n := 0
		graders := map[string]int{}
		var order []string
		for _, v := range vs {
			if v.Direction != dir {
				continue
			}
			n++
			all[v.CaseID] = true
			if graders[v.Grader] == 0 {
				order = append(order, v.Grader)
			}
			graders[v.Grader]++
		}
		if n == 0 {
			continue
		}
		var gs []string
		for _, g := range order {
			gs = append(gs, fmt.Sprintf("`%s` ×%d", g, graders[g]))
		}
		parts = append(parts, fmt.Sprintf("**%d %s** (%s)", n, dir, strings.Join(gs, ", ")))
	}
	return strings.Join(parts, ", ")
}

// Outcome is one mutation's row.
type Outcome struct {
	Patch   Patch
	Exit    int
	Caught  bool
	Replay  string   // what strict replay found
	Gate    string   // what the fresh run and the gate found
	Rescore string   // what rescoring the committed baseline found
	Derived string   // what the rollup and reranker steps found
	Cases   []string // every case the recipe named
}

// ReadOutcome reads DIR/NAME.rc and DIR/NAME.json.
func ReadOutcome(dir string, p Patch) (Outcome, error) {
	o := Outcome{Patch: p}
	rc, err := os.ReadFile(filepath.Join(dir, p.Name+".rc"))
	if err != nil {
		return o, err
	}
	if o.Exit, err = strconv.Atoi(strings.TrimSpace(string(rc))); err != nil {
		return o, fmt.Errorf("%s.rc: %w", p.Name, err)
	}
	if o.Exit != 0 && o.Exit != 1 {
		// 2 (bad input) or 3 (operational): the recipe did not run to a
		// verdict, which is no proof either way.
		return o, fmt.Errorf("mutation %s: loom-eval ci exited %d (no verdict); see %s.err", p.Name, o.Exit, p.Name)
	}
	b, err := os.ReadFile(filepath.Join(dir, p.Name+".json"))
	if err != nil {
		return o, err
	}
	var r ciReport
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&r); err != nil {
		return o, fmt.Errorf("%s.json: %w", p.Name, err)
	}
	if r.Passed != (o.Exit == 0) {
		return o, fmt.Errorf("mutation %s: exit %d but the report says passed=%v", p.Name, o.Exit, r.Passed)
	}
	o.Caught = !r.Passed
	all := map[string]bool{}

	o.Replay = fmt.Sprintf("all %d runs reproduced", r.Replay.Runs)
	if n := len(r.Replay.Divergences); n > 0 {
		codes := map[string]int{}
		cases := map[string]bool{}
		var order []string
		for _, d := range r.Replay.Divergences {
			if codes[d.Code] == 0 {
				order = append(order, d.Code)
			}
			codes[d.Code]++
			cases[d.CaseID], all[d.CaseID] = true, true
		}
		var parts []string
		for _, c := range order {
			parts = append(parts, fmt.Sprintf("%s ×%d", c, codes[c]))
		}
		o.Replay = fmt.Sprintf("**%d of %d runs diverged** (%s) in %d cases", n, r.Replay.Runs, strings.Join(parts, ", "), len(cases))
	}

	var gate []string
	if n := len(r.Fresh.Errors); n > 0 {
		for _, e := range r.Fresh.Errors {
			all[e.CaseID] = true
		}
		gate = append(gate, fmt.Sprintf("**%d fresh runs stopped with an error**", n))
	}
	if len(r.Gate.FailedChecks) > 0 {
		g := "**failed**: " + strings.Join(r.Gate.FailedChecks, ", ")
		var worse []string
		for _, c := range r.Gate.Worse {
			worse = append(worse, c.CaseID)
			all[c.CaseID] = true
		}
		if len(worse) > 0 {
			g += "; worse: " + codeList(worse)
		}
		if len(r.Gate.MustPassFailing) > 0 {
			g += "; must-pass failing: " + codeList(r.Gate.MustPassFailing)
			for _, c := range r.Gate.MustPassFailing {
				all[c] = true
			}
		}
		gate = append(gate, g)
	} else {
		changed := map[string]bool{}
		for _, c := range r.Fresh.Changed {
			changed[c.CaseID] = true
		}
		gate = append(gate, fmt.Sprintf("passed (%d of %d fresh runs differ from the committed journals, in %d cases)",
			len(r.Fresh.Changed), r.Fresh.Runs, len(changed)))
	}
	if v := verdictText(r.Verdicts.Changed, all); v != "" {
		gate = append(gate, "fresh verdicts: "+v)
	}
	o.Gate = strings.Join(gate, "; ")
	var rescore []string
	if v := verdictText(r.Rescore.Verdicts, all); v != "" {
		rescore = append(rescore, "regraded verdicts: "+v)
	}
	if n := len(r.Rescore.Changed); n > 0 {
		rescore = append(rescore, fmt.Sprintf("**%d cases judged differently**", n))
		for _, c := range r.Rescore.Changed {
			all[c.CaseID] = true
		}
	}
	o.Rescore = "matches the committed verdicts and report"
	if len(rescore) > 0 {
		o.Rescore = strings.Join(rescore, "; ")
	}
	var derived []string
	if n := len(r.Rollups.Diffs); n > 0 {
		fields := map[string]bool{}
		var order []string
		runs, traces := map[string]bool{}, map[string]bool{}
		for _, d := range r.Rollups.Diffs {
			if !fields[d.Field] {
				fields[d.Field] = true
				order = append(order, d.Field)
			}
			if d.CaseID != "" {
				runs[d.CaseID] = true
				all[d.CaseID] = true
			} else {
				traces[d.File] = true
			}
		}
		where := []string{}
		if len(runs) > 0 {
			where = append(where, fmt.Sprintf("runs of %d cases", len(runs)))
		}
		if len(traces) > 0 {
			where = append(where, "the SDK traces")
		}
		derived = append(derived, fmt.Sprintf("**rollups: %d fields differ** (%s; in %s)", n, strings.Join(order, ", "), strings.Join(where, " and ")))
	}
	if n := len(r.Reranker.Changed); n > 0 {
		for _, c := range r.Reranker.Changed {
			all[c.QueryID] = true
		}
		derived = append(derived, fmt.Sprintf("**reranker: %d of %d queries differ**", n, r.Reranker.Queries))
	}
	o.Derived = fmt.Sprintf("rollups match (%d runs, %d SDK traces); reranker matches (%d queries)", r.Rollups.Runs, r.Rollups.Traces, r.Reranker.Queries)
	if len(derived) > 0 {
		o.Derived = strings.Join(derived, "; ")
	}
	for c := range all {
		o.Cases = append(o.Cases, c)
	}
	sort.Strings(o.Cases)
	return o, nil
}

func codeList(xs []string) string {
	s := append([]string(nil), xs...)
	sort.Strings(s)
	return "`" + strings.Join(s, "`, `") + "`"
}

// Table renders the outcomes as the doc's Markdown.
func Table(outs []Outcome) string {
	var b strings.Builder
	b.WriteString("| mutation | layer | recipe | strict replay | fresh run, gate and fresh verdicts | committed baseline regraded and rescored | rollups and reranker | cases named |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, o := range outs {
		verdict := "**failed** (exit 1)"
		if !o.Caught {
			verdict = "passed (exit 0): **not caught**"
		}
		cases := "—"
		if len(o.Cases) > 0 {
			cases = fmt.Sprintf("%d: %s", len(o.Cases), codeList(o.Cases))
		}
		fmt.Fprintf(&b, "| `%s` — %s | %s | %s | %s | %s | %s | %s | %s |\n", o.Patch.Name, esc(o.Patch.Subject), esc(o.Patch.Layer), verdict,
			esc(o.Replay), esc(o.Gate), esc(o.Rescore), esc(o.Derived), cases)
	}
	var missed []Outcome
	for _, o := range outs {
		if !o.Caught {
			missed = append(missed, o)
		}
	}
	if len(missed) > 0 {
		b.WriteString("\nNot caught, and why:\n\n")
		for _, o := range missed {
			why := o.Patch.IfNotCaught
			if why == "" {
				why = "(the patch gives no explanation: investigate, and add an \"If not caught:\" line to its header)"
			}
			fmt.Fprintf(&b, "- `%s`: %s\n", o.Patch.Name, why)
		}
	}
	return b.String()
}

func esc(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Splice replaces what is between the markers of doc with table.
func Splice(doc, table string) (string, error) {
	i := strings.Index(doc, BeginMarker)
	j := strings.Index(doc, EndMarker)
	if i < 0 || j < i {
		return "", fmt.Errorf("the doc has no %s … %s block", BeginMarker, EndMarker)
	}
	return doc[:i+len(BeginMarker)] + "\n" + table + doc[j:], nil
}

// Listed returns the mutation names of the table between the markers: the
// first cell's `NAME` of every row.
func Listed(doc string) ([]string, error) {
	i := strings.Index(doc, BeginMarker)
	j := strings.Index(doc, EndMarker)
	if i < 0 || j < i {
		return nil, fmt.Errorf("the doc has no %s … %s block", BeginMarker, EndMarker)
	}
	var out []string
	for _, line := range strings.Split(doc[i:j], "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		name, _, ok := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
		if ok {
			out = append(out, name)
		}
	}
	return out, nil
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mutationtable:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("mutationtable", flag.ContinueOnError)
	results := fs.String("results", "", "folder of NAME.json and NAME.rc (required)")
	patches := fs.String("patches", "scripts/mutations", "folder of NAME.patch")
	doc := fs.String("doc", "", "write the table into this Markdown file between the markers (default: print it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *results == "" {
		return errors.New("--results is required")
	}
	all, err := Patches(*patches)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, n := range fs.Args() {
		want[n] = true
	}
	var outs []Outcome
	for _, p := range all {
		if len(want) > 0 && !want[p.Name] {
			continue
		}
		o, err := ReadOutcome(*results, p)
		if err != nil {
			return err
		}
		outs = append(outs, o)
	}
	table := Table(outs)
	if *doc == "" {
		_, err := io.WriteString(stdout, table)
		return err
	}
	b, err := os.ReadFile(*doc)
	if err != nil {
		return err
	}
	s, err := Splice(string(b), table)
	if err != nil {
		return fmt.Errorf("%s: %w", *doc, err)
	}
	if err := os.WriteFile(*doc, []byte(s), 0o644); err != nil {
		return err
	}
	fmt.Fprint(stdout, table)
	fmt.Fprintf(stdout, "wrote the table into %s\n", *doc)
	return nil
}
