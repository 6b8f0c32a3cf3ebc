package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loomwork/loomwork/datasets"
)

// defaultDatasetsDir is where serve's UI and the datasets command keep
// versioned datasets.
const defaultDatasetsDir = ".loomwork/datasets"

const (
	datasetsListUsage   = "datasets list [--dir DIR] [--json]"
	datasetsShowUsage   = "datasets show NAME[@VERSION] [--dir DIR] [--json]"
	datasetsCommitUsage = "datasets commit NAME --cases FILE [--parent N] [--author NAME] [--note TEXT] [--dir DIR] [--json]"
)

func (m *Main) runDatasetsList(args []string) error {
	fs := m.newFlagSet("datasets list", datasetsListUsage)
	dir := fs.String("dir", defaultDatasetsDir, "the datasets `folder`")
	asJSON := fs.Bool("json", false, "print JSON: each dataset's latest version record")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("datasets list: unexpected argument %q", fs.Arg(0))
	}
	reg := datasets.Registry{Dir: *dir}
	names, err := reg.Names()
	if err != nil {
		return err
	}
	latest := []datasets.Version{}
	for _, n := range names {
		vs, err := reg.Versions(n)
		if err != nil {
			return err
		}
		latest = append(latest, vs[len(vs)-1])
	}
	if *asJSON {
		return writeIndentedJSON(m.Stdout, map[string]any{"dir": *dir, "datasets": latest})
	}
	if len(latest) == 0 {
		fmt.Fprintf(m.Stdout, "no datasets in %s (make one from traces in the UI, or with loom-eval %s)\n", *dir, datasetsCommitUsage)
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DATASET\tLATEST\tCASES\tMADE\tBY\tSHA256\tCASES FILE")
	for _, v := range latest {
		fmt.Fprintf(tw, "%s\tv%d\t%d\t%s\t%s\t%s\t%s\n", v.Dataset, v.Number, v.Cases, v.Created.Format("2006-01-02 15:04"), v.Author, v.SHA256[:12], reg.CasesPath(v.Dataset, v.Number))
	}
	return tw.Flush()
}

// parseDatasetRef reads NAME or NAME@N (N may be vN); 0 is the latest.
func parseDatasetRef(ref string) (string, int, error) {
	name, ver, found := strings.Cut(ref, "@")
	if err := datasets.ValidateDatasetName(name); err != nil {
		return "", 0, usageError("datasets: %v", err)
	}
	if !found {
		return name, 0, nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(ver, "v"))
	if err != nil || n <= 0 {
		return "", 0, usageError("datasets: version %q in %q: want a positive number (NAME@3 or NAME@v3)", ver, ref)
	}
	return name, n, nil
}

func (m *Main) runDatasetsShow(args []string) error {
	fs := m.newFlagSet("datasets show", datasetsShowUsage)
	dir := fs.String("dir", defaultDatasetsDir, "the datasets `folder`")
	asJSON := fs.Bool("json", false, "print JSON: the version record, its cases file and the dataset's history")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("datasets show: want one NAME[@VERSION]")
	}
	name, n, err := parseDatasetRef(fs.Arg(0))
	if err != nil {
		return err
	}
	reg := datasets.Registry{Dir: *dir}
	v, cases, err := reg.Open(name, n)
	if err != nil {
		return err
	}
	history, err := reg.Versions(name)
	if err != nil {
		return err
	}
	path := reg.CasesPath(name, v.Number)
	if *asJSON {
		return writeIndentedJSON(m.Stdout, map[string]any{"version": v, "cases_file": path, "history": history})
	}
	fmt.Fprintf(m.Stdout, "%s v%d: %d cases, made %s", name, v.Number, len(cases), v.Created.Format("2006-01-02 15:04:05Z07:00"))
	if v.Author != "" {
		fmt.Fprintf(m.Stdout, " by %s", v.Author)
	}
	if v.Parent > 0 {
		fmt.Fprintf(m.Stdout, " on v%d", v.Parent)
	}
	fmt.Fprintf(m.Stdout, "\n  cases file  %s\n  sha256      %s\n", path, v.SHA256)
	if v.Note != "" {
		fmt.Fprintf(m.Stdout, "  note        %s\n", v.Note)
	}
	for _, part := range []struct {
		what string
		ids  []string
	}{{"added", v.Added}, {"changed", v.Changed}, {"removed", v.Removed}} {
		if len(part.ids) > 0 {
			fmt.Fprintf(m.Stdout, "  %-11s %s\n", part.what, strings.Join(part.ids, ", "))
		}
	}
	return nil
}

func (m *Main) runDatasetsCommit(args []string) error {
	fs := m.newFlagSet("datasets commit", datasetsCommitUsage)
	dir := fs.String("dir", defaultDatasetsDir, "the datasets `folder`")
	casesPath := fs.String("cases", "", "cases JSONL `file`: the whole new version (its code graders' files are copied in)")
	parent := fs.Int("parent", -1, "the version this change was made on (default: the latest; a later one existing refuses the commit)")
	author := fs.String("author", "", "who made the version")
	note := fs.String("note", "", "why, in a sentence")
	asJSON := fs.Bool("json", false, "print the new version's record as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("datasets commit: want one NAME")
	}
	if *casesPath == "" {
		return usageError("datasets commit: --cases FILE is required")
	}
	name, n, err := parseDatasetRef(fs.Arg(0))
	if err != nil {
		return err
	}
	if n != 0 {
		return usageError("datasets commit: name the dataset without a version (use --parent N for the version it was made on)")
	}
	cases, err := datasets.LoadCases(*casesPath)
	if err != nil {
		return err
	}
	reg := datasets.Registry{Dir: *dir}
	on := *parent
	if on < 0 {
		if on, err = reg.Latest(name); err != nil {
			return err
		}
	}
	v, err := reg.Commit(name, datasets.Change{Parent: on, Cases: cases, Author: *author, Note: *note, Now: time.Now()})
	switch {
	case errors.Is(err, datasets.ErrNoChange):
		// Committing what is already there is a no-op, not a failure: a
		// nightly job that commits its case file may find nothing new.
		fmt.Fprintf(m.Stdout, "nothing committed: %v\n", err)
		return nil
	case errors.Is(err, datasets.ErrStaleParent):
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("datasets commit: %w", err)}
	case err != nil:
		return err
	}
	if *asJSON {
		return writeIndentedJSON(m.Stdout, v)
	}
	fmt.Fprintf(m.Stdout, "%s v%d committed: %d cases (+%d added, ~%d changed, -%d removed)\n  %s\n", name, v.Number, v.Cases, len(v.Added), len(v.Changed), len(v.Removed), reg.CasesPath(name, v.Number))
	return nil
}

func writeIndentedJSON(w interface{ Write([]byte) (int, error) }, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
