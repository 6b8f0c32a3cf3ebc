package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/memory"
)

const memoryUsage = `memory list|show KEY|forget [KEY | --decayed]|distill RUN-ID [flags]

  list      the records of a scope (or, without --agent, of every scope)
  show      one record, with its decayed salience now
  forget    delete one record, or with --decayed every record whose
            salience has decayed below the threshold
  distill   write the memories a finished run's journal yields (through
            the write policy) and print each write's outcome`

// memoryFlags are `loom-eval memory`'s flags (one set for every
// subcommand).
type memoryFlags struct {
	db, tenant, agent, namespace, journalPath *string
	decayed                                   *bool
	halfLife                                  *time.Duration
	minSal                                    *float64
}

func (f *memoryFlags) register(fs *flag.FlagSet) {
	f.db = fs.String("db", ".loomwork/memory.db", "memory store (SQLite, beside the journal)")
	f.tenant = fs.String("tenant", "default", "scope: tenant")
	f.agent = fs.String("agent", "", "scope: agent (e.g. research)")
	f.namespace = fs.String("namespace", "default", "scope: namespace")
	f.decayed = fs.Bool("decayed", false, "forget: every record decayed below the threshold")
	f.halfLife = fs.Duration("half-life", 30*24*time.Hour, "decay half-life")
	f.minSal = fs.Float64("min-salience", 0.6, "salience threshold for writes and forgetting")
	f.journalPath = fs.String("journal", ".loomwork/runs.journal.db", "distill: the SQLite journal holding the run")
}

// openMemoryStore opens --db: it must exist, except for distill, which
// creates it.
func openMemoryStore(ctx context.Context, sub string, f *memoryFlags) (*memory.Store, error) {
	if sub != "distill" {
		if _, err := os.Stat(*f.db); err != nil {
			return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("memory %s: --db %s: %w", sub, *f.db, err)}
		}
	} else if err := os.MkdirAll(filepath.Dir(*f.db), 0o755); err != nil {
		return nil, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("memory %s: --db %s: %w", sub, *f.db, err)}
	}
	st, err := memory.Open(ctx, memory.Config{Path: *f.db, HalfLife: *f.halfLife, MinSalience: *f.minSal})
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	return st, nil
}

// runMemory is the memory store's command line.
func (m *Main) runMemory(ctx context.Context, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(m.Stderr, "Usage: loom-eval "+memoryUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return usageError("memory: want a subcommand: list, show, forget or distill")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "list", "show", "forget", "distill":
	default:
		// Before --agent is checked or --db opened: a typo is named as one.
		return usageError("memory: unknown subcommand %q (want list, show, forget or distill)", sub)
	}
	fs := m.newFlagSet("memory "+sub, memoryUsage)
	var f memoryFlags
	f.register(fs)
	outFmt := m.addOutputFlags(fs, "text", "json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	format, err := outFmt.Format()
	if err != nil {
		return err
	}
	if sub != "list" && *f.agent == "" {
		return usageError("memory %s: --agent is required (the scope is tenant/agent/namespace)", sub)
	}
	dbGiven := false
	fs.Visit(func(fl *flag.Flag) { dbGiven = dbGiven || fl.Name == "db" })
	if sub == "list" && !dbGiven {
		// Nothing written yet at the default place is an empty store, not
		// a usage error (run --memory and memory distill create it); a
		// --db that names a missing file is an error, as it may be a typo.
		if _, err := os.Stat(*f.db); errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(m.Stderr, "loom-eval: memory list: no memory store at %s yet (run --memory and memory distill write one)\n", *f.db)
			if format == "json" {
				return writeJSON(m.Stdout, []struct{}{})
			}
			return nil
		}
	}
	st, err := openMemoryStore(ctx, sub, &f)
	if err != nil {
		return err
	}
	defer st.Shutdown(ctx) //nolint:errcheck // read-mostly; writes committed already
	c := memoryCmd{st: st, scope: memory.Scope{Tenant: *f.tenant, Agent: *f.agent, Namespace: *f.namespace},
		now: time.Now(), json: format == "json", w: m.Stdout, args: fs.Args()}
	switch sub {
	case "list":
		return c.list(ctx, *f.agent == "")
	case "show":
		return c.show(ctx)
	case "forget":
		return c.forget(ctx, *f.decayed)
	case "distill":
		return c.distill(ctx, *f.journalPath)
	}
	return usageError("memory: unknown subcommand %q (want list, show, forget or distill)", sub)
}

// memoryCmd is one memory subcommand's store, scope and output.
type memoryCmd struct {
	st    *memory.Store
	scope memory.Scope
	now   time.Time
	json  bool
	w     io.Writer
	args  []string // the positional arguments
}

// list prints the scope's records, or every scope's.
func (c *memoryCmd) list(ctx context.Context, allScopes bool) error {
	scopes := []memory.Scope{c.scope}
	if allScopes {
		var err error
		if scopes, err = c.st.Scopes(ctx); err != nil {
			return err
		}
	}
	type row struct {
		Scope   memory.Scope  `json:"scope"`
		Record  memory.Record `json:"record"`
		Decayed float64       `json:"decayed_salience"`
	}
	var rows []row
	for _, sc := range scopes {
		recs, err := c.st.Records(ctx, sc)
		if err != nil {
			return err
		}
		for _, r := range recs {
			rows = append(rows, row{sc, r, memory.Decayed(r.Salience, r.Written, c.now, c.st.Config().HalfLife)})
		}
	}
	if c.json {
		return writeJSON(c.w, rows)
	}
	tw := tabwriter.NewWriter(termSafe(c.w), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tKEY\tKIND\tSALIENCE\tNOW\tHITS\tTEXT")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.2f\t%d\t%s\n", r.Scope, r.Record.Key, r.Record.Kind, r.Record.Salience, r.Decayed, r.Record.Hits, oneLine(r.Record.Text, 70))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.w, "%d records\n", len(rows))
	return nil
}

// show prints one record with its decayed salience now.
func (c *memoryCmd) show(ctx context.Context) error {
	if len(c.args) != 1 {
		return usageError("memory show: want one KEY")
	}
	r, err := c.st.Get(ctx, c.scope, c.args[0])
	if errors.Is(err, memory.ErrNotFound) {
		return &ExitError{Code: ExitFailure, Err: err}
	} else if err != nil {
		return err
	}
	d := memory.Decayed(r.Salience, r.Written, c.now, c.st.Config().HalfLife)
	if c.json {
		return writeJSON(c.w, map[string]any{"scope": c.scope, "record": r, "decayed_salience": d})
	}
	tw := termSafe(c.w)
	fmt.Fprintf(tw, "key         %s\nscope       %s\nkind        %s\nsalience    %.2f (now %.3f, threshold %.2f)\nhits        %d\nwritten     %s\nsource runs %s\nprovenance  %s\n\n%s\n",
		r.Key, c.scope, r.Kind, r.Salience, d, c.st.Config().MinSalience, r.Hits, r.Written.Format(time.RFC3339), strings.Join(r.SourceRuns, ", "), r.Provenance, r.Text)
	return nil
}

// forget deletes one record, or (decayed) every decayed one.
func (c *memoryCmd) forget(ctx context.Context, decayed bool) error {
	var gone []string
	switch {
	case decayed && len(c.args) == 0:
		var err error
		if gone, err = c.st.Forget(ctx, c.scope, c.now); err != nil {
			return err
		}
	case !decayed && len(c.args) == 1:
		if err := c.st.Delete(ctx, c.scope, c.args[0]); errors.Is(err, memory.ErrNotFound) {
			return &ExitError{Code: ExitFailure, Err: err}
		} else if err != nil {
			return err
		}
		gone = []string{c.args[0]}
	default:
		return usageError("memory forget: want one KEY or --decayed")
	}
	if c.json {
		return writeJSON(c.w, map[string]any{"forgotten": nonNilStrings(gone)})
	}
	fmt.Fprintf(termSafe(c.w), "forgotten: %d %s\n", len(gone), strings.Join(gone, " "))
	return nil
}

// distill writes the memories the run's journal (in journalPath) yields.
func (c *memoryCmd) distill(ctx context.Context, journalPath string) error {
	if len(c.args) != 1 {
		return usageError("memory distill: want one RUN-ID")
	}
	if _, err := os.Stat(journalPath); err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("memory distill: --journal %s: %w", journalPath, err)}
	}
	j, err := journaldb.Open(ctx, journaldb.Config{Path: journalPath})
	if err != nil {
		return err
	}
	defer j.Shutdown(ctx) //nolint:errcheck // read only
	runID := c.args[0]
	evs, err := j.Events(ctx, runID)
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("memory distill: run %q is not in %s", runID, journalPath)}
	}
	outs, err := c.st.DistillRun(ctx, c.scope, journal.Run{ID: runID, Events: evs}, c.now)
	if err != nil {
		return err
	}
	if c.json {
		return writeJSON(c.w, outs)
	}
	for _, o := range outs {
		fmt.Fprintf(termSafe(c.w), "%-22s %-10s %.2f  %s\n", o.Outcome, o.Kind, o.Salience, o.Text)
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
