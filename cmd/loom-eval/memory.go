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
	fs := m.newFlagSet("memory "+sub, memoryUsage)
	db := fs.String("db", ".loomwork/memory.db", "memory store (SQLite, beside the journal)")
	tenant := fs.String("tenant", "default", "scope: tenant")
	agent := fs.String("agent", "", "scope: agent (e.g. research)")
	namespace := fs.String("namespace", "default", "scope: namespace")
	decayed := fs.Bool("decayed", false, "forget: every record decayed below the threshold")
	halfLife := fs.Duration("half-life", 30*24*time.Hour, "decay half-life")
	minSal := fs.Float64("min-salience", 0.6, "salience threshold for writes and forgetting")
	journalPath := fs.String("journal", ".loomwork/runs.journal.db", "distill: the SQLite journal holding the run")
	outFmt := m.addOutputFlags(fs, "text", "json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	format, err := outFmt.Format()
	if err != nil {
		return err
	}
	if sub != "list" && *agent == "" {
		return usageError("memory %s: --agent is required (the scope is tenant/agent/namespace)", sub)
	}
	dbGiven := false
	fs.Visit(func(f *flag.Flag) { dbGiven = dbGiven || f.Name == "db" })
	if sub == "list" && !dbGiven {
		// Nothing written yet at the default place is an empty store, not
		// a usage error (run --memory and memory distill create it); a
		// --db that names a missing file is an error, as it may be a typo.
		if _, err := os.Stat(*db); errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(m.Stderr, "loom-eval: memory list: no memory store at %s yet (run --memory and memory distill write one)\n", *db)
			if format == "json" {
				return writeJSON(m.Stdout, []struct{}{})
			}
			return nil
		}
	}
	if sub != "distill" {
		if _, err := os.Stat(*db); err != nil {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("memory %s: --db %s: %w", sub, *db, err)}
		}
	} else if err := os.MkdirAll(filepath.Dir(*db), 0o755); err != nil {
		return err
	}
	st, err := memory.Open(ctx, memory.Config{Path: *db, HalfLife: *halfLife, MinSalience: *minSal})
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	defer st.Shutdown(ctx) //nolint:errcheck // read-mostly; writes committed already
	scope := memory.Scope{Tenant: *tenant, Agent: *agent, Namespace: *namespace}
	now := time.Now()
	w := m.Stdout
	switch sub {
	case "list":
		scopes := []memory.Scope{scope}
		if *agent == "" {
			if scopes, err = st.Scopes(ctx); err != nil {
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
			recs, err := st.Records(ctx, sc)
			if err != nil {
				return err
			}
			for _, r := range recs {
				rows = append(rows, row{sc, r, memory.Decayed(r.Salience, r.Written, now, st.Config().HalfLife)})
			}
		}
		if format == "json" {
			return writeJSON(w, rows)
		}
		tw := tabwriter.NewWriter(termSafe(w), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SCOPE\tKEY\tKIND\tSALIENCE\tNOW\tHITS\tTEXT")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.2f\t%d\t%s\n", r.Scope, r.Record.Key, r.Record.Kind, r.Record.Salience, r.Decayed, r.Record.Hits, oneLine(r.Record.Text, 70))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "%d records\n", len(rows))
		return nil
	case "show":
		if fs.NArg() != 1 {
			return usageError("memory show: want one KEY")
		}
		r, err := st.Get(ctx, scope, fs.Arg(0))
		if errors.Is(err, memory.ErrNotFound) {
			return &ExitError{Code: ExitFailure, Err: err}
		} else if err != nil {
			return err
		}
		d := memory.Decayed(r.Salience, r.Written, now, st.Config().HalfLife)
		if format == "json" {
			return writeJSON(w, map[string]any{"scope": scope, "record": r, "decayed_salience": d})
		}
		tw := termSafe(w)
		fmt.Fprintf(tw, "key         %s\nscope       %s\nkind        %s\nsalience    %.2f (now %.3f, threshold %.2f)\nhits        %d\nwritten     %s\nsource runs %s\nprovenance  %s\n\n%s\n",
			r.Key, scope, r.Kind, r.Salience, d, st.Config().MinSalience, r.Hits, r.Written.Format(time.RFC3339), strings.Join(r.SourceRuns, ", "), r.Provenance, r.Text)
		return nil
	case "forget":
		var gone []string
		switch {
		case *decayed && fs.NArg() == 0:
			if gone, err = st.Forget(ctx, scope, now); err != nil {
				return err
			}
		case !*decayed && fs.NArg() == 1:
			if err := st.Delete(ctx, scope, fs.Arg(0)); errors.Is(err, memory.ErrNotFound) {
				return &ExitError{Code: ExitFailure, Err: err}
			} else if err != nil {
				return err
			}
			gone = []string{fs.Arg(0)}
		default:
			return usageError("memory forget: want one KEY or --decayed")
		}
		if format == "json" {
			return writeJSON(w, map[string]any{"forgotten": nonNilStrings(gone)})
		}
		fmt.Fprintf(termSafe(w), "forgotten: %d %s\n", len(gone), strings.Join(gone, " "))
		return nil
	case "distill":
		if fs.NArg() != 1 {
			return usageError("memory distill: want one RUN-ID")
		}
		if _, err := os.Stat(*journalPath); err != nil {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("memory distill: --journal %s: %w", *journalPath, err)}
		}
		j, err := journaldb.Open(ctx, journaldb.Config{Path: *journalPath})
		if err != nil {
			return err
		}
		defer j.Shutdown(ctx) //nolint:errcheck // read only
		runID := fs.Arg(0)
		evs, err := j.Events(ctx, runID)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("memory distill: run %q is not in %s", runID, *journalPath)}
		}
		outs, err := distillInto(ctx, st, scope, journal.Run{ID: runID, Events: evs}, now)
		if err != nil {
			return err
		}
		if format == "json" {
			return writeJSON(w, outs)
		}
		for _, o := range outs {
			fmt.Fprintf(termSafe(w), "%-22s %-10s %.2f  %s\n", o.Outcome, o.Kind, o.Salience, o.Text)
		}
		return nil
	}
	return usageError("memory: unknown subcommand %q (want list, show, forget or distill)", sub)
}

// distilled is one distilled candidate and what the write policy did.
type distilled struct {
	Key      string         `json:"key"`
	Kind     memory.Kind    `json:"kind"`
	Salience float64        `json:"salience"`
	Text     string         `json:"text"`
	Outcome  memory.Outcome `json:"outcome"`
	Into     string         `json:"into,omitempty"`
}

func distillInto(ctx context.Context, st *memory.Store, scope memory.Scope, run journal.Run, at time.Time) ([]distilled, error) {
	evs, err := memory.FromJournal(run)
	if err != nil {
		return nil, err
	}
	var out []distilled
	for _, r := range memory.Distill(evs, run.ID, at) {
		o, into, err := st.Write(ctx, scope, r)
		if err != nil {
			return nil, err
		}
		out = append(out, distilled{Key: r.Key, Kind: r.Kind, Salience: r.Salience, Text: r.Text, Outcome: o, Into: into})
	}
	return out, nil
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
