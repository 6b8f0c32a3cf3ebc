package clickhouse

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/loomwork/loomwork/store"
)

// Experiments (migration 0007): the record in experiments, the trials in
// experiment_trials, ReplacingMergeTree tables versioned by the put's time
// and read FINAL, so the latest put of a key is what every read sees.

var _ store.ExperimentStore = (*Store)(nil)

const (
	experimentColumns      = "project, id, name, created, label, dataset_sha256, status, updated, record, dataset"
	experimentTrialColumns = "project, experiment_id, case_id, trial, trace_id, updated, doc"
)

// PutExperiment implements store.ExperimentWriter: the trials first, then
// the record, so a listed experiment's trials are there; a failure after
// the trials leaves them to the retried put, which writes them again (the
// later version wins).
func (s *Store) PutExperiment(ctx context.Context, e store.StoredExperiment, trials []store.StoredTrial) error {
	if err := store.CheckExperiment(e, trials); err != nil {
		return fmt.Errorf("put experiment: %w", err)
	}
	if err := s.usable(); err != nil {
		return err
	}
	project := store.ProjectOf(ctx)
	now := time.Now().UTC()
	if len(trials) > 0 {
		n := len(trials)
		cols := []any{make([]string, n), make([]string, n), make([]string, n), make([]uint32, n), make([]string, n), make([]time.Time, n), make([]string, n)}
		for i, t := range trials {
			cols[0].([]string)[i] = project
			cols[1].([]string)[i] = e.ID
			cols[2].([]string)[i] = t.CaseID
			cols[3].([]uint32)[i] = uint32(t.Trial)
			cols[4].([]string)[i] = t.TraceID
			cols[5].([]time.Time)[i] = now
			cols[6].([]string)[i] = string(t.Doc)
		}
		if err := s.insert(ctx, s.ddl.DB+".experiment_trials", experimentTrialColumns, cols, n); err != nil {
			return fmt.Errorf("put experiment %s: trials: %w", e.ID, err)
		}
	}
	var dataset *string
	if len(e.Dataset) > 0 {
		d := string(e.Dataset)
		dataset = &d
	}
	cols := []any{[]string{project}, []string{e.ID}, []string{e.Name}, []time.Time{e.Created.UTC()}, []string{e.Label},
		[]string{e.DatasetSHA256}, []string{e.Status}, []time.Time{now}, []string{string(e.Record)}, []*string{dataset}}
	if err := s.insert(ctx, s.ddl.DB+".experiments", experimentColumns, cols, 1); err != nil {
		return fmt.Errorf("put experiment %s: record: %w", e.ID, err)
	}
	return nil
}

const experimentSelect = "id, name, created, label, dataset_sha256, status, updated, record"

func scanStoredExperiment(sc interface{ Scan(...any) error }, extra ...any) (store.StoredExperiment, error) {
	var e store.StoredExperiment
	var record string
	if err := sc.Scan(append([]any{&e.ID, &e.Name, &e.Created, &e.Label, &e.DatasetSHA256, &e.Status, &e.Updated, &record}, extra...)...); err != nil {
		return e, err
	}
	e.Created, e.Updated = e.Created.UTC(), e.Updated.UTC()
	e.Record = json.RawMessage(record)
	return e, nil
}

// ListExperiments implements store.ExperimentReader.
func (s *Store) ListExperiments(ctx context.Context, q store.ExperimentQuery) (store.ExperimentPage, error) {
	if err := s.usable(); err != nil {
		return store.ExperimentPage{}, err
	}
	cur, after, err := store.ParseExperimentPageToken(q.PageToken)
	if err != nil {
		return store.ExperimentPage{}, fmt.Errorf("list experiments: %w", err)
	}
	pc, err := projectCond(ctx)
	if err != nil {
		return store.ExperimentPage{}, fmt.Errorf("list experiments: %w", err)
	}
	conds := []string{pc}
	var args []any
	if q.Label != "" {
		conds, args = append(conds, "label = ?"), append(args, q.Label)
	}
	if q.DatasetSHA256 != "" {
		conds, args = append(conds, "dataset_sha256 = ?"), append(args, q.DatasetSHA256)
	}
	if after {
		conds = append(conds, "(toUnixTimestamp64Nano(created), id) < (?, ?)")
		args = append(args, cur.Created.UnixNano(), cur.ID)
	}
	limit := q.PageSize()
	rows, err := s.query(ctx, "SELECT "+experimentSelect+" FROM "+s.ddl.DB+".experiments FINAL WHERE "+strings.Join(conds, " AND ")+
		fmt.Sprintf(" ORDER BY created DESC, id DESC LIMIT %d", limit+1), args...)
	if err != nil {
		return store.ExperimentPage{}, fmt.Errorf("list experiments: %w", err)
	}
	defer rows.Close()
	page := store.ExperimentPage{Experiments: []store.StoredExperiment{}}
	for rows.Next() {
		e, err := scanStoredExperiment(rows)
		if err != nil {
			return store.ExperimentPage{}, fmt.Errorf("list experiments: %w", err)
		}
		page.Experiments = append(page.Experiments, e)
	}
	if err := rows.Err(); err != nil {
		return store.ExperimentPage{}, fmt.Errorf("list experiments: %w", err)
	}
	if len(page.Experiments) > limit {
		page.Experiments = page.Experiments[:limit]
		page.NextPageToken = store.ExperimentPageToken(page.Experiments[limit-1])
	}
	return page, nil
}

// GetExperiment implements store.ExperimentReader.
func (s *Store) GetExperiment(ctx context.Context, id string) (store.StoredExperiment, []store.StoredTrial, error) {
	if err := s.usable(); err != nil {
		return store.StoredExperiment{}, nil, err
	}
	pc, err := projectCond(ctx)
	if err != nil {
		return store.StoredExperiment{}, nil, fmt.Errorf("get experiment %q: %w", id, err)
	}
	var dataset *string
	e, err := scanStoredExperiment(s.queryRow(ctx, "SELECT "+experimentSelect+", dataset FROM "+s.ddl.DB+".experiments FINAL WHERE "+
		and(pc, "id = ?")+" LIMIT 1", id), &dataset)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return store.StoredExperiment{}, nil, fmt.Errorf("get experiment %q: %w", id, store.ErrExperimentNotFound)
		}
		return store.StoredExperiment{}, nil, fmt.Errorf("get experiment %q: %w", id, err)
	}
	if dataset != nil {
		e.Dataset = json.RawMessage(*dataset)
	}
	rows, err := s.query(ctx, "SELECT case_id, trial, trace_id, doc FROM "+s.ddl.DB+".experiment_trials FINAL WHERE "+
		and(pc, "experiment_id = ?")+" ORDER BY case_id, trial", id)
	if err != nil {
		return store.StoredExperiment{}, nil, fmt.Errorf("get experiment %q: trials: %w", id, err)
	}
	defer rows.Close()
	trials := []store.StoredTrial{}
	for rows.Next() {
		var t store.StoredTrial
		var n uint32
		var doc string
		if err := rows.Scan(&t.CaseID, &n, &t.TraceID, &doc); err != nil {
			return store.StoredExperiment{}, nil, fmt.Errorf("get experiment %q: trials: %w", id, err)
		}
		t.Trial, t.Doc = int(n), json.RawMessage(doc)
		trials = append(trials, t)
	}
	if err := rows.Err(); err != nil {
		return store.StoredExperiment{}, nil, fmt.Errorf("get experiment %q: trials: %w", id, err)
	}
	return e, trials, nil
}
