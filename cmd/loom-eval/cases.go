package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/tracecases"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store/storeurl"
)

// runCases dispatches `loom-eval cases SUBCOMMAND`.
func (m *Main) runCases(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError("cases: want a subcommand: cases from-traces --store URL [filters] --cases-out FILE --trials-out FILE")
	}
	switch args[0] {
	case "from-traces":
		return m.runCasesFromTraces(ctx, args[1:], time.Now())
	case "-h", "--help", "help":
		fmt.Fprintln(m.Stderr, "Usage: loom-eval cases from-traces --store URL [--since D|T] [--until D|T] [--service S] [--agent A] [--attr K=V ...] [--graders FILE] [--cases-out FILE] [--trials-out FILE] [--force] [--json]")
		fmt.Fprintln(m.Stderr, "Stored traces become cases and trials: each trace a trial of the case its root span's "+semconv.AttrCaseID+" names.")
		return nil
	}
	return usageError("cases: unknown subcommand %q (want from-traces)", args[0])
}

// attrFlags collects repeated --attr KEY=VALUE.
type attrFlags map[string]string

func (a attrFlags) String() string { return "" }

func (a attrFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	k = strings.TrimSpace(k)
	if !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", s)
	}
	if prev, dup := a[k]; dup {
		return fmt.Errorf("%s is given twice (%q and %q): a trace has one value per key", k, prev, v)
	}
	a[k] = v
	return nil
}

// casesFromTracesOutput is --json's shape.
type casesFromTracesOutput struct {
	Store     string `json:"store"`
	CasesOut  string `json:"cases_out,omitempty"`
	TrialsOut string `json:"trials_out,omitempty"`
	Graders   string `json:"graders,omitempty"`
	tracecases.Report
}

// casesFromTracesFlags are `loom-eval cases from-traces`'s flags.
type casesFromTracesFlags struct {
	storeURL, since, until, service, agent, gradersFile, casesOut, trialsOut *string
	attrs                                                                    attrFlags
	limit                                                                    *int
	force                                                                    *bool
}

func (f *casesFromTracesFlags) register(fs *flag.FlagSet) {
	f.since = fs.String("since", "", "traces starting at or after this: a duration back from now (1h) or an RFC 3339 time")
	f.until = fs.String("until", "", "traces starting before this: a duration back from now (10m) or an RFC 3339 time")
	f.service = fs.String("service", "", "traces with a span of this service.name")
	f.agent = fs.String("agent", "", "traces with a span of this gen_ai.agent.name")
	f.attrs = attrFlags{}
	fs.Var(f.attrs, "attr", "KEY=VALUE the root span (else its resource) must carry, e.g. service.version=2; repeatable, all must hold")
	f.limit = fs.Int("limit", 0, "read at most this many matching traces, the most recent (0: all)")
	f.gradersFile = fs.String("graders", "", "graders file (JSONL, {\"case_id\": ..., \"graders\": [...]} a line) to put on the cases; needs --cases-out")
	f.casesOut = fs.String("cases-out", "", "write the cases (JSONL) here")
	f.trialsOut = fs.String("trials-out", "", "write the trials (JSONL) here")
	f.force = fs.Bool("force", false, "overwrite --cases-out and --trials-out if they exist")
}

// filter is the traces' filter, --since and --until read against now.
func (f *casesFromTracesFlags) filter(now time.Time) (tracecases.Filter, error) {
	flt := tracecases.Filter{Service: strings.TrimSpace(*f.service), Agent: strings.TrimSpace(*f.agent), Attributes: f.attrs, Limit: *f.limit}
	var err error
	if flt.Since, err = parseWhen(*f.since, now); err != nil {
		return flt, usageError("cases from-traces: --since: %v", err)
	}
	if flt.Until, err = parseWhen(*f.until, now); err != nil {
		return flt, usageError("cases from-traces: --until: %v", err)
	}
	if err := flt.Validate(); err != nil {
		return flt, usageError("cases from-traces: %s", strings.NewReplacer("limit", "--limit", "until", "--until", "since", "--since").Replace(err.Error()))
	}
	return flt, nil
}

// checkOutputs checks the output flags and that no output would be
// overwritten without --force.
func (f *casesFromTracesFlags) checkOutputs() error {
	if *f.casesOut == "" && *f.trialsOut == "" {
		return usageError("cases from-traces: give --cases-out FILE, --trials-out FILE or both")
	}
	if *f.casesOut != "" && *f.trialsOut != "" && filepath.Clean(*f.casesOut) == filepath.Clean(*f.trialsOut) {
		return usageError("cases from-traces: --cases-out and --trials-out are the same file %s", *f.casesOut)
	}
	if *f.gradersFile != "" && *f.casesOut == "" {
		return usageError("cases from-traces: --graders %s needs --cases-out: the graders go on the cases", *f.gradersFile)
	}
	for _, out := range []struct{ flag, path string }{{"--cases-out", *f.casesOut}, {"--trials-out", *f.trialsOut}} {
		if out.path == "" || *f.force {
			continue
		}
		if _, err := os.Stat(out.path); err == nil {
			return usageError("cases from-traces: %s %s exists; add --force to overwrite it", out.flag, out.path)
		} else if !errors.Is(err, os.ErrNotExist) {
			return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("cases from-traces: %s: %w", out.flag, err)}
		}
	}
	return nil
}

// readGraders reads --graders (none without it), checked as far as it can
// be alone.
func (f *casesFromTracesFlags) readGraders() ([]tracecases.GraderSet, error) {
	if *f.gradersFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(*f.gradersFile)
	if err != nil {
		return nil, usageError("cases from-traces: --graders: %v", err)
	}
	sets, err := tracecases.ReadGraders(bytes.NewReader(b), *f.gradersFile)
	if err != nil {
		return nil, usageError("cases from-traces: --graders: %w", err)
	}
	return sets, nil
}

// writeOutputs writes the cases and the trials to the files asked for.
func (f *casesFromTracesFlags) writeOutputs(cases []datasets.Case, trials []datasets.Trial) error {
	if *f.casesOut != "" {
		if err := writeJSONLFile(*f.casesOut, cases); err != nil {
			return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("cases from-traces: --cases-out: %w", err)}
		}
	}
	if *f.trialsOut != "" {
		if err := writeJSONLFile(*f.trialsOut, trials); err != nil {
			return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("cases from-traces: --trials-out: %w", err)}
		}
	}
	return nil
}

func (m *Main) runCasesFromTraces(ctx context.Context, args []string, now time.Time) error {
	fs := m.newFlagSet("cases from-traces", "cases from-traces [--store URL] [--since 1h|RFC3339] [--until 10m|RFC3339] [--service S] [--agent A] [--attr KEY=VALUE ...] [--limit N] [--graders FILE] [--cases-out FILE] [--trials-out FILE] [--force] [--format text|json] [--json]")
	var f casesFromTracesFlags
	f.storeURL = m.tracesStoreFlag(fs)
	f.register(fs)
	output := m.addOutputFlags(fs, "text", "json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	format, err := output.Format()
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("cases from-traces: unexpected arguments %q", fs.Args())
	}
	flt, err := f.filter(now)
	if err != nil {
		return err
	}
	if err := f.checkOutputs(); err != nil {
		return err
	}
	// The graders file is read before the store, so a typo costs no
	// store read.
	sets, err := f.readGraders()
	if err != nil {
		return err
	}
	cases, trials, rep, err := m.casesFromStore(ctx, &f, flt, sets)
	if err != nil {
		return err
	}
	if err := f.writeOutputs(cases, trials); err != nil {
		return err
	}
	store := m.storeAsOpened(*f.storeURL)
	if format == "json" {
		if rep.WithoutCaseID == nil {
			rep.WithoutCaseID = []tracecases.Unmarked{}
		}
		if rep.WithoutTask == nil {
			rep.WithoutTask = []string{}
		}
		return tracesWriteJSON(m.Stdout, casesFromTracesOutput{Store: store, CasesOut: *f.casesOut, TrialsOut: *f.trialsOut, Graders: *f.gradersFile, Report: rep})
	}
	printCasesReport(m.Stdout, rep, cases, store, *f.casesOut, *f.trialsOut, *f.gradersFile)
	return nil
}

// casesFromStore builds the cases and trials from the store's traces that
// flt matches and puts the graders sets on the cases.
func (m *Main) casesFromStore(ctx context.Context, f *casesFromTracesFlags, flt tracecases.Filter, sets []tracecases.GraderSet) ([]datasets.Case, []datasets.Trial, tracecases.Report, error) {
	st, err := m.tracesOpenStore(ctx, *f.storeURL)
	if err != nil {
		return nil, nil, tracecases.Report{}, err
	}
	defer st.Shutdown(context.WithoutCancel(ctx))
	cases, trials, rep, err := tracecases.Build(ctx, st, flt)
	if err != nil {
		return nil, nil, rep, &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	if rep.Read == 0 {
		return nil, nil, rep, &ExitError{Code: ExitFailure, Err: fmt.Errorf("cases from-traces: no traces match (%d listed for the time, service and agent filters, %d left out by --attr); nothing written", rep.Listed, rep.AttrFilteredOut)}
	}
	if len(sets) > 0 {
		if err := tracecases.MergeGraders(cases, sets, *f.gradersFile); err != nil {
			return nil, nil, rep, usageError("cases from-traces: --graders: %w", err)
		}
		if err := checkCodeGraderFiles(cases, *f.casesOut); err != nil {
			return nil, nil, rep, usageError("cases from-traces: --graders %s: %w", *f.gradersFile, err)
		}
	}
	return cases, trials, rep, nil
}

// storeAsOpened is the store URL as tracesOpenStore opens it (its
// defaults), for the summary.
func (m *Main) storeAsOpened(url string) string {
	if url == "" {
		url = m.getenv(storeurl.EnvVar)
	}
	if url == "" {
		url = storeurl.DefaultPath
	}
	return url
}

// parseWhen reads --since/--until: "" is unbounded, a duration is that
// long before now, anything else an RFC 3339 time.
func parseWhen(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q is negative: give how long ago, e.g. 1h", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a duration (1h30m) nor an RFC 3339 time (2026-03-01T12:00:00Z)", s)
	}
	return t, nil
}

// checkCodeGraderFiles checks that every code grader's file is where
// loading the cases file will look for it: beside the cases file.
func checkCodeGraderFiles(cases []datasets.Case, casesOut string) error {
	dir := filepath.Dir(casesOut)
	for _, c := range cases {
		for i, g := range c.Graders {
			if g.Type != datasets.GraderCode {
				continue
			}
			p := filepath.Join(dir, filepath.FromSlash(g.File))
			if _, err := os.Stat(p); err != nil {
				return fmt.Errorf("case %q graders[%d].file %q: code grader files are read relative to the cases file's folder (%s): %w", c.ID, i, g.File, dir, err)
			}
		}
	}
	return nil
}

// writeJSONLFile writes items to path atomically: a reader sees the old
// file or the whole new one.
func writeJSONLFile[T any](path string, items []T) error {
	var b bytes.Buffer
	if err := tracecases.WriteJSONL(&b, items); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b.Bytes())
	if err := errors.Join(werr, tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

func printCasesReport(w io.Writer, rep tracecases.Report, cases []datasets.Case, store, casesOut, trialsOut, graders string) {
	fmt.Fprintf(w, "Read %d traces from %s (%d listed for the time, service and agent filters, %d left out by --attr)", rep.Read, store, rep.Listed, rep.AttrFilteredOut)
	if rep.LimitReached {
		fmt.Fprintf(w, "; --limit stopped the reading, older traces were not read")
	}
	fmt.Fprintf(w, ": %d cases, %d trials.\n", rep.Cases, rep.Trials)
	var wrote []string
	if casesOut != "" {
		wrote = append(wrote, fmt.Sprintf("%d cases to %s", rep.Cases, casesOut))
	}
	if trialsOut != "" {
		wrote = append(wrote, fmt.Sprintf("%d trials to %s", rep.Trials, trialsOut))
	}
	fmt.Fprintf(w, "Wrote %s.\n", strings.Join(wrote, " and "))
	graded := 0
	nGraders := map[string]int{}
	for _, c := range cases {
		nGraders[c.ID] = len(c.Graders)
		if len(c.Graders) > 0 {
			graded++
		}
	}
	if graders != "" {
		fmt.Fprintf(w, "Graders from %s on %d of %d cases.\n", graders, graded, len(cases))
	}
	fmt.Fprintf(w, "Traces without %s: %d.\n\n", semconv.AttrCaseID, len(rep.WithoutCaseID))

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if casesOut != "" {
		fmt.Fprintln(tw, "CASE\tTRIALS\tNUMBERED BY\tEXPECTED TOOLS\tREQUIRED EVIDENCE\tGRADERS")
	} else {
		fmt.Fprintln(tw, "CASE\tTRIALS\tNUMBERED BY")
	}
	for _, cr := range rep.PerCase {
		if casesOut == "" {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", cr.ID, len(cr.Traces), cr.TrialsFrom)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\n", cr.ID, len(cr.Traces), cr.TrialsFrom, orDash(strings.Join(cr.ExpectedTools, ",")),
			orDash(strings.Join(cr.RequiredEvidence, ",")), nGraders[cr.ID])
	}
	tw.Flush()

	var notes []string
	for _, cr := range rep.PerCase {
		for _, n := range cr.Notes {
			notes = append(notes, fmt.Sprintf("  %s: %s", cr.ID, n))
		}
	}
	sort.Strings(notes)
	if len(notes) > 0 {
		fmt.Fprintf(w, "\nNotes:\n%s\n", strings.Join(notes, "\n"))
	}
	if len(rep.WithoutCaseID) > 0 {
		fmt.Fprintf(w, "\nTraces without %s (each became a case of its own; mark the root span to group runs of one case):\n", semconv.AttrCaseID)
		for _, u := range rep.WithoutCaseID {
			fmt.Fprintf(w, "  %s → case %s: %s\n", u.TraceID, u.CaseID, u.Why)
		}
	}
	if len(rep.WithoutTask) > 0 {
		fmt.Fprintf(w, "\nCases without a task in their traces (%s): their task is a placeholder; write it in the cases file.\n", strings.Join(rep.WithoutTask, ", "))
	}
	if casesOut != "" {
		fmt.Fprintf(w, "\nReview the cases: expected_tools and required_evidence are what the traces did (tag %q).\n", tracecases.TagFromTraces)
	}
	if casesOut != "" && trialsOut != "" {
		fmt.Fprintf(w, "Next: loom-eval score %s --cases %s --store %s\n", trialsOut, casesOut, store)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
