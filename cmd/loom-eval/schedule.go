package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loomwork/loomwork/baselines/routines"
	"github.com/loomwork/loomwork/internal/coord"
	"github.com/loomwork/loomwork/store"
)

const scheduleUsage = "schedule tick|deliver|pause|resume|list|run --coordinator FILE.db [--schedules FILE.jsonl] ...\n" +
	"  tick     --schedules F            record the occurrences due now (catch-up policy applies) and dispatch their inspections\n" +
	"  deliver  --schedules F --routine R --nominal RFC3339   one timer delivery (a repeated one reuses its occurrence)\n" +
	"  pause    --routine R --reason TEXT   the operator's pause switch (resume --routine R turns it off)\n" +
	"  list     [--routine R]            the occurrences with their decisions and evidence\n" +
	"  run      [--baselines DIR] [--store URL] [--cases FILE] [--reports DIR]   run the queued inspections of the product's routines,\n" +
	"           then execute the queued score-traces tasks (regression tasks stay queued for a person or an agent)"

// scheduleFlags are `loom-eval schedule`'s flags (one set for every
// subcommand).
type scheduleFlags struct {
	db, schedFile, routine, nominal, reason, baselinesDir, storeURL, cases, reports *string
	asJSON                                                                          *bool
}

func (f *scheduleFlags) register(fs *flag.FlagSet) {
	f.db = fs.String("coordinator", ".loomwork/coord.db", "the coordinator `database` the routines' tasks live in")
	f.schedFile = fs.String("schedules", "", "schedules `file`: one JSON schedule per line (routine, schedule_version, calendar, timezone, overlap, catch_up, budget)")
	f.routine = fs.String("routine", "", "routine name")
	f.nominal = fs.String("nominal", "", "the occurrence's nominal time (RFC 3339), for deliver")
	f.reason = fs.String("reason", "", "why the routine is paused (recorded on every paused occurrence)")
	f.baselinesDir = fs.String("baselines", "baselines", "nightly-gate: the baselines `folder` loom-eval ci replays and gates")
	f.storeURL = fs.String("store", "", "score-traces: the trace store (default as loom-eval traces)")
	f.cases = fs.String("cases", "baselines/cases.jsonl", "score-traces: the cases `file` new traces are scored against")
	f.reports = fs.String("reports", ".loomwork/reports", "score-traces: the `folder` each executed task writes its report into (REPORTS/score-traces/SINCE/UNTIL)")
	f.asJSON = fs.Bool("json", false, "machine output")
}

// schedules checks what sub needs and loads --schedules (for tick and
// deliver).
func (f *scheduleFlags) schedules(sub string) ([]coord.Schedule, error) {
	var scheds []coord.Schedule
	if sub == "tick" || sub == "deliver" {
		if *f.schedFile == "" {
			return nil, usageError("schedule %s: --schedules is required", sub)
		}
		var err error
		if scheds, err = loadSchedules(*f.schedFile); err != nil {
			return nil, usageError("schedule %s: %v", sub, err)
		}
	}
	if (sub == "pause" || sub == "resume" || sub == "deliver") && *f.routine == "" {
		return nil, usageError("schedule %s: --routine is required", sub)
	}
	return scheds, nil
}

// runSchedule is `loom-eval schedule`: scheduled evaluations as
// coordinator occurrences (internal/coord) running the product's own
// routines (baselines/routines).
func (m *Main) runSchedule(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError("schedule: want a subcommand\nUsage: loom-eval %s", scheduleUsage)
	}
	if isHelp(args[0]) {
		fmt.Fprintf(m.Stderr, "Usage: loom-eval %s\n", scheduleUsage)
		return nil
	}
	sub := args[0]
	fs := m.newFlagSet("schedule "+sub, scheduleUsage)
	var f scheduleFlags
	f.register(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("schedule %s: unexpected argument %q", sub, fs.Arg(0))
	}
	if sub != "tick" && sub != "deliver" && sub != "pause" && sub != "resume" && sub != "list" && sub != "run" {
		return usageError("schedule: unknown subcommand %q\nUsage: loom-eval %s", sub, scheduleUsage)
	}
	scheds, err := f.schedules(sub)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dirOf(*f.db), 0o755); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("schedule: %w", err)}
	}
	c, err := coord.Open(ctx, coord.Config{Path: *f.db})
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("schedule: %w", err)}
	}
	defer c.Shutdown(context.WithoutCancel(ctx))
	s := &scheduleCmd{m: m, sub: sub, f: &f, c: c, scheds: scheds}
	var occs []coord.Occurrence
	switch sub {
	case "tick":
		occs, err = s.tick(ctx)
	case "deliver":
		occs, err = s.deliver(ctx)
	case "pause", "resume":
		return s.pause(ctx)
	case "list":
		if occs, err = c.Occurrences(ctx, *f.routine); err != nil {
			err = s.rt(err)
		}
	case "run":
		return s.run(ctx)
	}
	if err != nil {
		return err
	}
	return m.printOccurrences(occs, *f.asJSON)
}

// scheduleCmd is one schedule subcommand's flags, coordinator and
// schedules.
type scheduleCmd struct {
	m      *Main
	sub    string
	f      *scheduleFlags
	c      *coord.Coordinator
	scheds []coord.Schedule
}

// rt is an operational error of the subcommand.
func (s *scheduleCmd) rt(err error) error {
	return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("schedule %s: %w", s.sub, err)}
}

// tick records the occurrences due now.
func (s *scheduleCmd) tick(ctx context.Context) ([]coord.Occurrence, error) {
	var occs []coord.Occurrence
	for _, sc := range s.scheds {
		o, err := s.c.Tick(ctx, sc)
		if err != nil {
			return nil, s.rt(err)
		}
		occs = append(occs, o...)
	}
	return occs, nil
}

// deliver is one timer delivery of --routine at --nominal.
func (s *scheduleCmd) deliver(ctx context.Context) ([]coord.Occurrence, error) {
	n, err := time.Parse(time.RFC3339, *s.f.nominal)
	if err != nil {
		return nil, usageError("schedule deliver: --nominal %q: %v", *s.f.nominal, err)
	}
	var sc *coord.Schedule
	for i := range s.scheds {
		if s.scheds[i].Routine == *s.f.routine {
			sc = &s.scheds[i]
		}
	}
	if sc == nil {
		return nil, usageError("schedule deliver: routine %q is not in %s", *s.f.routine, *s.f.schedFile)
	}
	o, err := s.c.Deliver(ctx, *sc, n)
	if err != nil {
		return nil, usageError("schedule deliver: %v", err)
	}
	return []coord.Occurrence{o}, nil
}

// pause turns the routine's pause switch on (pause) or off (resume).
func (s *scheduleCmd) pause(ctx context.Context) error {
	if s.sub == "pause" && *s.f.reason == "" {
		return usageError("schedule pause: --reason is required (it is recorded on every paused occurrence)")
	}
	if err := s.c.SetPaused(ctx, *s.f.routine, s.sub == "pause", *s.f.reason); err != nil {
		return s.rt(err)
	}
	fmt.Fprintf(s.m.Stdout, "%s: %sd\n", *s.f.routine, s.sub)
	return nil
}

// run runs the queued inspections of the product's routines, then the
// queued score-traces tasks.
func (s *scheduleCmd) run(ctx context.Context) error {
	m, f, c := s.m, s.f, s.c
	// The store is opened when a score-traces inspection needs it: a
	// missing store fails that occurrence with the reason as evidence,
	// not the gate's.
	st := &lazyTraceStore{open: func(ctx context.Context) (store.Store, error) { return m.tracesOpenStore(ctx, *f.storeURL) }}
	defer st.close(context.WithoutCancel(ctx))
	gate := routines.Gate{Run: func(ctx context.Context) (routines.GateResult, error) {
		return m.gateForRoutine(ctx, *f.baselinesDir)
	}}
	r := &routines.Runner{Coord: c, Routines: []routines.Routine{gate, routines.Traces{Store: st, Cases: *f.cases}},
		Worker: fmt.Sprintf("routines-%d", os.Getpid()), Log: m.Stderr}
	n, err := r.RunQueued(ctx)
	if err != nil {
		return s.rt(err)
	}
	fmt.Fprintf(m.Stdout, "%d inspection(s) run\n", n)
	// The scoring work the trace routine proposed runs here too; the
	// gate's regression tasks are for a person or an agent and stay
	// queued.
	w := &routines.ScoreWork{Coord: c, Store: st, Out: *f.reports, Worker: r.Worker, Log: m.Stderr}
	done, werr := w.RunQueued(ctx)
	fmt.Fprintf(m.Stdout, "%d score-traces task(s) executed into %s\n", done, *f.reports)
	if regs, err := c.InState(ctx, "regression", coord.Pending); err == nil && len(regs) > 0 {
		fmt.Fprintf(m.Stdout, "%d regression task(s) queued for a person or an agent\n", len(regs))
	}
	if werr != nil {
		return s.rt(werr)
	}
	return nil
}

// printOccurrences writes the occurrences as JSON or a table to stdout.
func (m *Main) printOccurrences(occs []coord.Occurrence, asJSON bool) error {
	if asJSON {
		if occs == nil {
			occs = []coord.Occurrence{}
		}
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(occs)
	}
	tw := tabwriter.NewWriter(termSafe(m.Stdout), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OCCURRENCE\tDELIVERIES\tDECISION\tREASON / EVIDENCE")
	for _, o := range occs {
		why := o.Reason
		if o.Evidence != "" {
			why = o.Evidence
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", o.Key, o.Deliveries, o.Decision, why)
	}
	return tw.Flush()
}

// gateForRoutine runs the CI recipe (`loom-eval ci`) for the nightly-gate
// routine: passed is exit 0, a failure's verdict is the recipe's error.
func (m *Main) gateForRoutine(ctx context.Context, dir string) (routines.GateResult, error) {
	var out, errOut bytes.Buffer
	sub := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: m.Getenv}
	err := sub.runCI(ctx, []string{"--baselines", dir})
	var ee *ExitError
	switch {
	case err == nil:
		return routines.GateResult{Passed: true, Verdict: "passed (" + firstOutputLine(out.String()) + ")"}, nil
	case errors.As(err, &ee) && ee.Code == ExitFailure:
		return routines.GateResult{Passed: false, Verdict: ee.Err.Error()}, nil
	}
	return routines.GateResult{}, fmt.Errorf("loom-eval ci: %w (%s)", err, firstOutputLine(errOut.String()))
}

// lazyTraceStore opens the trace store on first use.
type lazyTraceStore struct {
	open func(ctx context.Context) (store.Store, error)
	st   store.Store
}

func (l *lazyTraceStore) get(ctx context.Context) (store.Store, error) {
	if l.st == nil {
		st, err := l.open(ctx)
		if err != nil {
			return nil, err
		}
		l.st = st
	}
	return l.st, nil
}

func (l *lazyTraceStore) ListTraces(ctx context.Context, q store.TraceQuery) (store.TracePage, error) {
	st, err := l.get(ctx)
	if err != nil {
		return store.TracePage{}, err
	}
	return st.ListTraces(ctx, q)
}

func (l *lazyTraceStore) GetTrace(ctx context.Context, traceID string) ([]store.Span, error) {
	st, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return st.GetTrace(ctx, traceID)
}

func (l *lazyTraceStore) close(ctx context.Context) {
	if l.st != nil {
		_ = l.st.Shutdown(ctx)
	}
}

func firstOutputLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "."
}

// loadSchedules reads a schedules file: one JSON schedule per line, each
// validated, errors naming the line and field.
func loadSchedules(path string) ([]coord.Schedule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []coord.Schedule
	seen := map[string]int{}
	for i, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var s coord.Schedule
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, i+1, err)
		}
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, i+1, err)
		}
		if prev, dup := seen[s.Routine]; dup {
			return nil, fmt.Errorf("%s line %d: routine %s is already scheduled on line %d", path, i+1, s.Routine, prev)
		}
		seen[s.Routine] = i + 1
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no schedules", path)
	}
	return out, nil
}
