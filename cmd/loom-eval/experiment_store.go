package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/loomwork/loomwork/baselines/experiment"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storeurl"
)

// Experiments in the trace store: `experiment run` saves each experiment
// into the store its traces went to; list, show and compare read one with
// --store; push saves a folder into a store.

// saveExperiment puts the experiment in dir into the run's store (the one
// the backend opened, or, when that is open read-only behind the user's
// collector, a read-write handle opened for the put).
func (b *traceBackend) saveExperiment(ctx context.Context, storeURL, dir string) (string, error) {
	var st store.Store = b.st
	if b.srv == nil { // --otlp-endpoint: the store was opened read-only
		rw, err := storeurl.Open(ctx, storeURL, false)
		if err != nil {
			return "", fmt.Errorf("trace store %s: %w", storeURL, err)
		}
		defer rw.Shutdown(context.WithoutCancel(ctx))
		st = rw
	}
	return saveToStore(ctx, st, storeURL, dir)
}

func saveToStore(ctx context.Context, st store.Store, storeURL, dir string) (string, error) {
	w, ok := st.(store.ExperimentWriter)
	if !ok {
		return "", fmt.Errorf("trace store %s (%T) cannot keep experiments", storeURL, st)
	}
	return experiment.Save(ctx, w, dir)
}

// saveRun saves a finished run and says so on stderr; a failure is a
// runtime error naming the command that retries it (the folder is whole).
func (m *Main) saveRun(ctx context.Context, backend *traceBackend, rec *datasets.Experiment, dir string) error {
	note, err := backend.saveExperiment(ctx, rec.Store, dir)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("experiment %s: %w (the folder %s is whole: retry with loom-eval experiment push %s --store %s)", rec.ID, err, dir, dir, rec.Store)}
	}
	if note != "" {
		fmt.Fprintln(m.Stderr, "loom-eval: "+note)
	}
	fmt.Fprintf(m.Stderr, "experiment %s saved to the trace store %s\n", rec.ID, rec.Store)
	return nil
}

// openExperimentStore opens --store for reading experiments (and the
// traces their trials name).
func openExperimentStore(ctx context.Context, url string) (experiment.StoreReader, func(), error) {
	st, err := storeurl.Open(ctx, url, true)
	if err != nil {
		return nil, nil, inputError("--store", err)
	}
	closeFn := func() { st.Shutdown(context.WithoutCancel(ctx)) }
	r, ok := st.(experiment.StoreReader)
	if !ok {
		closeFn()
		return nil, nil, usageError("--store %s: this store (%T) keeps no experiments", url, st)
	}
	return r, closeFn, nil
}

// storedExperimentError is a usage error for an id the store lacks.
func storedExperimentError(cmd string, err error) error {
	if errors.Is(err, store.ErrExperimentNotFound) {
		return usageError("%s: %v (list them with loom-eval experiment list --store URL)", cmd, err)
	}
	return inputError(cmd, err)
}

// listStoredExperiments is `experiment list --store URL`.
func (m *Main) listStoredExperiments(ctx context.Context, url string, asJSON bool) error {
	r, closeFn, err := openExperimentStore(ctx, url)
	if err != nil {
		return err
	}
	defer closeFn()
	var recs []*datasets.Experiment
	tok := ""
	for {
		page, err := r.ListExperiments(ctx, store.ExperimentQuery{Limit: store.MaxPageSize, PageToken: tok})
		if err != nil {
			return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("experiment list --store %s: %w", url, err)}
		}
		for _, se := range page.Experiments {
			e, _, _, err := datasets.ExperimentFromStore(se, nil)
			if err != nil {
				fmt.Fprintln(m.Stderr, "loom-eval: experiment list:", err)
				continue
			}
			recs = append(recs, e)
		}
		if tok = page.NextPageToken; tok == "" {
			break
		}
	}
	if asJSON {
		if recs == nil {
			recs = []*datasets.Experiment{}
		}
		return printJSON(m.Stdout, recs)
	}
	if len(recs) == 0 {
		fmt.Fprintf(m.Stdout, "No experiments in the store %s.\n", url)
		return nil
	}
	printExperimentTable(m.Stdout, recs, func(int) string { return url })
	return nil
}

// printExperimentTable is the list's table; where names each one's place.
func printExperimentTable(w io.Writer, recs []*datasets.Experiment, where func(i int) string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tCREATED\tSTATUS\tPASSED\tTARGET\tLABEL\tWHERE")
	for i, e := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", e.ID, orDash(e.Name), e.Created.Format("2006-01-02 15:04:05"), e.Status,
			e.Summary.Passed, e.Summary.Recorded, e.Target.Kind, orDash(e.Agent.Label), where(i))
	}
	tw.Flush()
}

// runExperimentPush saves experiment folders into a store.
func (m *Main) runExperimentPush(ctx context.Context, args []string) error {
	fs := m.newFlagSet("experiment push", "experiment push ID|DIR... --store URL [--experiments-dir DIR]")
	root := fs.String("experiments-dir", experiment.DefaultRoot, "where experiments are kept")
	url := fs.String("store", "", "the trace store to save them in (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *url == "" || fs.NArg() == 0 {
		return usageError("experiment push: want --store URL and at least one experiment id or folder")
	}
	st, err := storeurl.Open(ctx, *url, false)
	if err != nil {
		return inputError("--store", err)
	}
	defer st.Shutdown(context.WithoutCancel(ctx))
	for _, ref := range fs.Args() {
		dir, err := experiment.Resolve(*root, ref)
		if err != nil {
			return usageError("experiment push: %v", err)
		}
		note, err := saveToStore(ctx, st, *url, dir)
		if err != nil {
			return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("experiment push %s: %w", ref, err)}
		}
		if note != "" {
			fmt.Fprintln(m.Stderr, "loom-eval: "+note)
		}
		fmt.Fprintf(m.Stdout, "saved %s to %s\n", dir, *url)
	}
	return nil
}

// loadSides reads experiments by reference: from --store by id when url
// is set, else folders (or ids under root) with their own trace stores.
// The returned function releases the store.
func loadSides(ctx context.Context, cmd, url, root string, refs []string) ([]*experiment.Side, func(), error) {
	done := func() {}
	var r experiment.StoreReader
	if url != "" {
		var err error
		if r, done, err = openExperimentStore(ctx, url); err != nil {
			return nil, nil, err
		}
	}
	sides := make([]*experiment.Side, len(refs))
	for i, ref := range refs {
		var err error
		if r != nil {
			if sides[i], err = experiment.LoadStored(ctx, r, ref); err != nil {
				done()
				return nil, nil, storedExperimentError(cmd, err)
			}
			continue
		}
		dir, err := experiment.Resolve(root, ref)
		if err != nil {
			done()
			return nil, nil, usageError("%s: %v", cmd, err)
		}
		if sides[i], err = experiment.Load(ctx, dir, nil, openStoreReadOnly); err != nil {
			done()
			return nil, nil, inputError(cmd, err)
		}
	}
	return sides, done, nil
}
