package sqlite

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

// Experiments (migration 0006): the record in experiments, the trials in
// experiment_trials, both keyed by (project, experiment id, ...) and kept
// as the JSON documents they were given.

var _ store.ExperimentStore = (*Store)(nil)

// PutExperiment implements store.ExperimentWriter in one transaction.
func (s *Store) PutExperiment(ctx context.Context, e store.StoredExperiment, trials []store.StoredTrial) error {
	if err := store.CheckExperiment(e, trials); err != nil {
		return fmt.Errorf("put experiment: %w", err)
	}
	if err := s.usable(); err != nil {
		return err
	}
	if s.writer == nil {
		return errReadOnly
	}
	project := store.ProjectOf(ctx)
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("put experiment %s: %w", e.ID, err)
	}
	defer tx.Rollback()
	var dataset any
	if len(e.Dataset) > 0 {
		dataset = string(e.Dataset)
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO experiments
		(project, id, name, created_ns, label, dataset_sha256, status, updated_ns, record, dataset)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		project, e.ID, e.Name, e.Created.UnixNano(), e.Label, e.DatasetSHA256, e.Status, time.Now().UnixNano(),
		string(e.Record), dataset); err != nil {
		return fmt.Errorf("put experiment %s: %w", e.ID, err)
	}
	if len(trials) > 0 {
		st, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO experiment_trials
			(project, experiment_id, case_id, trial, trace_id, doc) VALUES (?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return fmt.Errorf("put experiment %s: %w", e.ID, err)
		}
		defer st.Close()
		for _, t := range trials {
			if _, err := st.ExecContext(ctx, project, e.ID, t.CaseID, t.Trial, t.TraceID, string(t.Doc)); err != nil {
				return fmt.Errorf("put experiment %s: trial %d of case %q: %w", e.ID, t.Trial, t.CaseID, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("put experiment %s: commit: %w", e.ID, err)
	}
	return nil
}

const experimentCols = `id, name, created_ns, label, dataset_sha256, status, updated_ns, record`

func scanExperiment(sc interface{ Scan(...any) error }, extra ...any) (store.StoredExperiment, error) {
	var e store.StoredExperiment
	var created, updated int64
	var record string
	if err := sc.Scan(append([]any{&e.ID, &e.Name, &created, &e.Label, &e.DatasetSHA256, &e.Status, &updated, &record}, extra...)...); err != nil {
		return e, err
	}
	e.Created, e.Updated = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
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
	where := []string{"project = ?"}
	args := []any{store.ProjectOf(ctx)}
	if q.Label != "" {
		where, args = append(where, "label = ?"), append(args, q.Label)
	}
	if q.DatasetSHA256 != "" {
		where, args = append(where, "dataset_sha256 = ?"), append(args, q.DatasetSHA256)
	}
	if after {
		where = append(where, "(created_ns < ? OR (created_ns = ? AND id < ?))")
		args = append(args, cur.Created.UnixNano(), cur.Created.UnixNano(), cur.ID)
	}
	limit := q.PageSize()
	rows, err := s.reader.QueryContext(ctx, `SELECT `+experimentCols+` FROM experiments WHERE `+strings.Join(where, " AND ")+
		` ORDER BY created_ns DESC, id DESC LIMIT ?`, append(args, limit+1)...)
	if err != nil {
		return store.ExperimentPage{}, fmt.Errorf("list experiments: %w", err)
	}
	defer rows.Close()
	page := store.ExperimentPage{Experiments: []store.StoredExperiment{}}
	for rows.Next() {
		e, err := scanExperiment(rows)
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

// GetExperiment implements store.ExperimentReader, in one read
// transaction so the record and the trials are of one moment.
func (s *Store) GetExperiment(ctx context.Context, id string) (store.StoredExperiment, []store.StoredTrial, error) {
	if err := s.usable(); err != nil {
		return store.StoredExperiment{}, nil, err
	}
	project := store.ProjectOf(ctx)
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return store.StoredExperiment{}, nil, fmt.Errorf("get experiment %q: %w", id, err)
	}
	defer tx.Rollback()
	var dataset sql.NullString
	e, err := scanExperiment(tx.QueryRowContext(ctx, `SELECT `+experimentCols+`, dataset FROM experiments WHERE project = ? AND id = ?`, project, id), &dataset)
	if errors.Is(err, sql.ErrNoRows) {
		return store.StoredExperiment{}, nil, fmt.Errorf("get experiment %q: %w", id, store.ErrExperimentNotFound)
	}
	if err != nil {
		return store.StoredExperiment{}, nil, fmt.Errorf("get experiment %q: %w", id, err)
	}
	if dataset.Valid {
		e.Dataset = json.RawMessage(dataset.String)
	}
	rows, err := tx.QueryContext(ctx, `SELECT case_id, trial, trace_id, doc FROM experiment_trials
		WHERE project = ? AND experiment_id = ? ORDER BY case_id, trial`, project, id)
	if err != nil {
		return store.StoredExperiment{}, nil, fmt.Errorf("get experiment %q: %w", id, err)
	}
	defer rows.Close()
	trials := []store.StoredTrial{}
	for rows.Next() {
		var t store.StoredTrial
		var doc string
		if err := rows.Scan(&t.CaseID, &t.Trial, &t.TraceID, &doc); err != nil {
			return store.StoredExperiment{}, nil, fmt.Errorf("get experiment %q: %w", id, err)
		}
		t.Doc = json.RawMessage(doc)
		trials = append(trials, t)
	}
	if err := rows.Err(); err != nil {
		return store.StoredExperiment{}, nil, fmt.Errorf("get experiment %q: %w", id, err)
	}
	return e, trials, nil
}
