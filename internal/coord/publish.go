package coord

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Publication states.
const (
	PubIntended  = "intended"  // the intent is recorded; the remote may or may not have the candidate
	PubPublished = "published" // reconciled: the remote has the candidate; the task is accepted
	PubHeld      = "held"      // reconciled: the remote diverged; dependents stay blocked for a human
)

// Remote is what reconciliation needs to know about the protected ref a
// publisher writes (a Git remote, a release registry): its current head,
// and whether one revision is an ancestor of another.
type Remote interface {
	Head(ctx context.Context) (string, error)
	IsAncestor(ctx context.Context, ancestor, descendant string) (bool, error)
}

// Decision is reconciliation's verdict on one publication intent.
type Decision string

// The reconciliation table (docs/coordination.md):
//
//	remote head                        decision         task      dependents
//	= candidate                        candidate-current accepted released
//	has candidate as an ancestor       candidate-ancestor accepted released
//	= expected base                    not-published    unchanged  blocked (publish again)
//	anything else                      diverged         unchanged  blocked (held for review)
const (
	CandidateCurrent  Decision = "candidate-current"
	CandidateAncestor Decision = "candidate-ancestor"
	NotPublished      Decision = "not-published"
	Diverged          Decision = "diverged"
)

// Decide applies the reconciliation table to one remote observation.
func Decide(ctx context.Context, r Remote, candidate, expectedBase string) (Decision, string, error) {
	head, err := r.Head(ctx)
	if err != nil {
		return "", "", fmt.Errorf("reconcile: remote head: %w", err)
	}
	switch head {
	case candidate:
		return CandidateCurrent, head, nil
	case expectedBase:
		return NotPublished, head, nil
	}
	anc, err := r.IsAncestor(ctx, candidate, head)
	if err != nil {
		return "", head, fmt.Errorf("reconcile: is %s an ancestor of %s: %w", candidate, head, err)
	}
	if anc {
		return CandidateAncestor, head, nil
	}
	return Diverged, head, nil
}

// RecordPublication persists a publication intent — task, candidate, and
// the base the candidate was validated on — before the publisher touches
// the remote. The task must be proposed with that candidate.
func (c *Coordinator) RecordPublication(ctx context.Context, key, candidate, expectedBase string) error {
	return c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
		var state, cand string
		if err := tx.QueryRowContext(ctx, `SELECT state, candidate FROM tasks WHERE key = ?`, key).Scan(&state, &cand); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("record publication %s: %w", key, ErrUnknownTask)
			}
			return fmt.Errorf("record publication %s: %w", key, err)
		}
		if state != Proposed || cand != candidate {
			return fmt.Errorf("record publication %s: %w: task is %s with candidate %q", key, ErrNotAccepted, state, cand)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO publications (key, candidate, expected_base, state, updated) VALUES (?, ?, ?, 'intended', ?)
			ON CONFLICT (key) DO UPDATE SET candidate = excluded.candidate, expected_base = excluded.expected_base, state = 'intended', decision = '', updated = excluded.updated
			WHERE publications.state = 'intended'`, key, candidate, expectedBase, now.UnixNano())
		if err != nil {
			return fmt.Errorf("record publication %s: %w", key, err)
		}
		return nil
	})
}

// Publication is a publication row.
type Publication struct {
	Key, Candidate, ExpectedBase, State string
	Decision                            Decision
	RemoteHead                          string
}

// Reconcile settles every intended publication against the remote after a
// restart: a publication the remote already has (its candidate is the head
// or an ancestor of it) accepts its task, so it is never published twice
// and its dependents are released; one the remote lacks stays intended
// (publish again); a diverged remote holds it, dependents blocked. It
// returns the decisions taken.
func (c *Coordinator) Reconcile(ctx context.Context, r Remote) ([]Publication, error) {
	pubs, err := c.publications(ctx, PubIntended)
	if err != nil {
		return nil, err
	}
	var out []Publication
	for _, p := range pubs {
		d, head, err := Decide(ctx, r, p.Candidate, p.ExpectedBase)
		if err != nil {
			return out, fmt.Errorf("reconcile %s: %w", p.Key, err)
		}
		p.Decision, p.RemoteHead = d, head
		err = c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
			state := PubIntended
			switch d {
			case CandidateCurrent, CandidateAncestor:
				state = PubPublished
				if _, err := tx.ExecContext(ctx, `UPDATE tasks SET state = 'accepted', updated = ? WHERE key = ? AND state = 'proposed' AND candidate = ?`,
					now.UnixNano(), p.Key, p.Candidate); err != nil {
					return err
				}
			case Diverged:
				state = PubHeld
			}
			p.State = state
			_, err := tx.ExecContext(ctx, `UPDATE publications SET state = ?, decision = ?, remote_head = ?, updated = ? WHERE key = ? AND state = 'intended'`,
				state, string(d), head, now.UnixNano(), p.Key)
			return err
		})
		if err != nil {
			return out, fmt.Errorf("reconcile %s: %w", p.Key, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func (c *Coordinator) publications(ctx context.Context, state string) ([]Publication, error) {
	db, err := c.conn()
	if err != nil {
		return nil, fmt.Errorf("list publications: %w", err)
	}
	ps, err := queryPublications(ctx, db, state)
	return ps, c.closing(err)
}

func queryPublications(ctx context.Context, db *sql.DB, state string) ([]Publication, error) {
	rows, err := db.QueryContext(ctx, `SELECT key, candidate, expected_base, state, decision, remote_head FROM publications
		WHERE ? = '' OR state = ? ORDER BY key`, state, state)
	if err != nil {
		return nil, fmt.Errorf("list publications: %w", err)
	}
	defer rows.Close()
	var out []Publication
	for rows.Next() {
		var p Publication
		var d string
		if err := rows.Scan(&p.Key, &p.Candidate, &p.ExpectedBase, &p.State, &d, &p.RemoteHead); err != nil {
			return nil, fmt.Errorf("list publications: %w", err)
		}
		p.Decision = Decision(d)
		out = append(out, p)
	}
	return out, rows.Err()
}
