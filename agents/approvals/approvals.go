// Package approvals is the one durable approval queue: runs waiting for a
// human — a workflow suspended at an approval gate (package workflow) and
// an agent run suspended at a tool call its policy held (package runtime,
// Config.Approvals) — are rows of a table in the journal's own SQLite
// database, keyed by run id and the step (workflow) or call id (runtime).
// A request is queued once, however often the run is resumed; an answer is
// given once, with who and why, atomically (a second answer is refused and
// changes nothing). Every request and answer is appended to the policy
// audit log when one is configured.
//
// The queue is what is waiting; each run's journal is what happened: the
// runtime journals approval_requested when it holds a call and the answer
// (approval) when it resumes, and a workflow journals approval_required
// and its answer, so a replay needs no queue. docs/policy.md describes
// the whole path.
package approvals

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/workflow"
)

// Kinds of approval.
const (
	KindWorkflow = "workflow"  // a workflow's approval step; ID is the step name
	KindToolCall = "tool_call" // a runtime run's held tool call; ID is the call id
)

// Statuses.
const (
	StatusPending  = "pending"
	StatusApproved = "approved"
	StatusDenied   = "denied"
)

// ArgumentsMax is how many characters of a call's arguments an entry keeps
// (arguments hold no secrets, but can be long).
const ArgumentsMax = 240

const schemaDDL = `CREATE TABLE IF NOT EXISTS approvals (
  run_id        TEXT    NOT NULL,
  id            TEXT    NOT NULL,
  kind          TEXT    NOT NULL,
  name          TEXT    NOT NULL DEFAULT '',
  step          INTEGER NOT NULL DEFAULT 0,
  tool          TEXT    NOT NULL DEFAULT '',
  arguments     TEXT    NOT NULL DEFAULT '',
  reason        TEXT    NOT NULL DEFAULT '',
  origin        TEXT    NOT NULL DEFAULT '',
  prompt        TEXT    NOT NULL DEFAULT '',
  requested_ns  INTEGER NOT NULL,
  status        TEXT    NOT NULL DEFAULT 'pending',
  approver      TEXT    NOT NULL DEFAULT '',
  answer_reason TEXT    NOT NULL DEFAULT '',
  answered_ns   INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (run_id, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS approvals_status ON approvals (status, requested_ns);`

// Entry is one approval: what waits, why, and its answer.
type Entry struct {
	RunID string `json:"run"`
	ID    string `json:"id"` // the workflow step, or the tool call id
	Kind  string `json:"kind"`
	// Name is the workflow's name or the agent's.
	Name string `json:"name,omitempty"`
	// Step is the runtime step of a held call (0 for a workflow).
	Step int    `json:"step,omitempty"`
	Tool string `json:"tool,omitempty"`
	// Arguments are the call's arguments, clipped to ArgumentsMax.
	Arguments string `json:"arguments,omitempty"`
	// Reason and Origin say why approval is required: the verdict's
	// reason and the taint origin of the arguments.
	Reason string `json:"reason,omitempty"`
	Origin string `json:"origin,omitempty"`
	// Prompt is what a workflow's approval step asks the human (the
	// step's rendered prompt, as journaled on its approval_required).
	Prompt       string    `json:"prompt,omitempty"`
	Requested    time.Time `json:"requested"`
	Status       string    `json:"status"`
	Approver     string    `json:"approver,omitempty"`
	AnswerReason string    `json:"answer_reason,omitempty"`
	Answered     time.Time `json:"answered,omitzero"`
}

// Config configures a Store.
type Config struct {
	// Journal is the journal whose database holds the queue, and whose
	// runs the approvals belong to. Required.
	Journal *journaldb.Store
	// Audit, when set, receives every request and answer.
	Audit *policy.AuditLog
	// Clock stamps requests and answers. Default time.Now.
	Clock func() time.Time

	_ struct{}
}

// Store is the queue. It is safe for concurrent use, and for use by several
// processes on one journal file (each request and answer is one write
// transaction).
type Store struct {
	cfg Config
	db  *sql.DB
}

var (
	_ runtime.Approvals = (*Store)(nil)
	_ workflow.Gate     = (*Store)(nil)
)

// Open returns the queue of cfg.Journal, creating its table when missing.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Journal == nil {
		return nil, errors.New("approvals: journal must be set")
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if err := cfg.Journal.EnsureSchema(ctx, schemaDDL); err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	s := &Store{cfg: cfg, db: cfg.Journal.DB()}
	if err := s.migrate(ctx); err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	return s, nil
}

// migrate adds the columns a queue made by an earlier version lacks
// (prompt): CREATE TABLE IF NOT EXISTS leaves an existing table as it is.
func (s *Store) migrate(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT name FROM pragma_table_info('approvals')`)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		have[n] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if !have["prompt"] {
		// Two processes may both find it missing; the second ALTER fails
		// with "duplicate column", which is what it wanted.
		if _, err := s.db.ExecContext(ctx, `ALTER TABLE approvals ADD COLUMN prompt TEXT NOT NULL DEFAULT ''`); err != nil && !strings.Contains(err.Error(), "duplicate column") {
			return fmt.Errorf("add column prompt: %w", err)
		}
	}
	return nil
}

// Request implements runtime.Approvals: it queues a held call (once) and
// returns its answer, nil while pending.
func (s *Store) Request(ctx context.Context, req runtime.ApprovalRequest) (*journal.ApprovalAnswer, error) {
	if req.RunID == "" || req.CallID == "" {
		return nil, fmt.Errorf("approval request: run id and call id must be set (got run %q, call %q)", req.RunID, req.CallID)
	}
	e := Entry{RunID: req.RunID, ID: req.CallID, Kind: KindToolCall, Name: req.Agent, Step: req.Step, Tool: req.Tool,
		Arguments: Clip(req.Arguments), Reason: req.Reason, Origin: req.Origin}
	got, err := s.request(ctx, e, "agent:"+req.Agent)
	if err != nil || got.Status == StatusPending {
		return nil, err
	}
	return &journal.ApprovalAnswer{CallID: got.ID, Approved: got.Status == StatusApproved, Approver: got.Approver, Reason: got.AnswerReason, Time: got.Answered}, nil
}

// Decide implements workflow.Gate: it queues the gate (once) and returns
// its answer, nil while pending (the run suspends).
func (s *Store) Decide(ctx context.Context, runID, step string, _ map[string]json.RawMessage) (*workflow.Approval, error) {
	name, prompt, err := s.gate(ctx, runID, step)
	if err != nil {
		return nil, err
	}
	got, err := s.request(ctx, Entry{RunID: runID, ID: step, Kind: KindWorkflow, Name: name, Tool: step, Prompt: prompt}, "workflow:"+name)
	if err != nil || got.Status == StatusPending {
		return nil, err
	}
	return &workflow.Approval{Step: step, Approved: got.Status == StatusApproved, Approver: got.Approver, Reason: got.AnswerReason, Time: got.Answered}, nil
}

// gate reads the run's workflow name and the prompt its approval step
// journaled (on approval_required, before it asks the gate).
func (s *Store) gate(ctx context.Context, runID, step string) (name, prompt string, err error) {
	evs, err := s.cfg.Journal.Events(ctx, runID)
	if err != nil {
		return "", "", fmt.Errorf("approval gate of run %s: %w", runID, err)
	}
	for _, e := range evs {
		switch e.Kind {
		case journal.KindWorkflowStarted:
			var st workflow.Started
			if json.Unmarshal(e.Payload, &st) == nil {
				name = st.Workflow
			}
		case journal.KindStep:
			var se workflow.StepEvent
			if json.Unmarshal(e.Payload, &se) == nil && se.Step == step && se.Event == workflow.StatusApprovalRequired && se.Prompt != "" {
				prompt = se.Prompt
			}
		}
	}
	return name, prompt, nil
}

// request inserts e unless its run and id are queued already, auditing a
// new request, and returns the stored entry.
func (s *Store) request(ctx context.Context, e Entry, actor string) (Entry, error) {
	if e.Requested.IsZero() {
		e.Requested = s.cfg.Clock().UTC()
	}
	e.Status = StatusPending
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Entry{}, fmt.Errorf("approval request %s/%s: %w", e.RunID, e.ID, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO approvals (run_id, id, kind, name, step, tool, arguments, reason, origin, prompt, requested_ns, status)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`, e.RunID, e.ID, e.Kind, e.Name, e.Step, e.Tool, e.Arguments, e.Reason, e.Origin, e.Prompt, e.Requested.UnixNano(), StatusPending)
	if err != nil {
		return Entry{}, fmt.Errorf("approval request %s/%s: %w", e.RunID, e.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 1 && s.cfg.Audit != nil {
		if _, err := s.cfg.Audit.Append(actor, "approval_requested", auditRequest(e)); err != nil {
			return Entry{}, fmt.Errorf("approval request %s/%s: %w", e.RunID, e.ID, err)
		}
	}
	got, ok, err := get(ctx, tx, e.RunID, e.ID)
	if err != nil {
		return Entry{}, err
	}
	if !ok {
		return Entry{}, fmt.Errorf("approval request %s/%s: not stored", e.RunID, e.ID)
	}
	if got.Kind != e.Kind {
		return Entry{}, fmt.Errorf("approval request %s/%s: id is already queued as a %s approval", e.RunID, e.ID, got.Kind)
	}
	if err := tx.Commit(); err != nil {
		return Entry{}, fmt.Errorf("approval request %s/%s: %w", e.RunID, e.ID, err)
	}
	return got, nil
}

func auditRequest(e Entry) map[string]any {
	d := map[string]any{"run": e.RunID, "id": e.ID, "kind": e.Kind, "tool": e.Tool}
	for k, v := range map[string]string{"name": e.Name, "arguments": e.Arguments, "reason": e.Reason, "origin": e.Origin, "prompt": e.Prompt} {
		if v != "" {
			d[k] = v
		}
	}
	return d
}

// Answer records a human's answer to run's approval id and returns the
// answered entry. The approver must be set, and a denial needs a reason
// (the model, or the workflow's record, is told it). An unknown run or id,
// or one answered already, is an error naming it, and nothing changes. A
// workflow gate's answer is journaled in its run at once (workflow.Record),
// as `loom-eval approve` always did; a held call's answer is journaled by
// the run when it resumes.
//
// A request the journal holds but the queue does not (a run suspended
// before the queue existed, or a process that died between the two) is
// taken into the queue from the journal first.
func (s *Store) Answer(ctx context.Context, runID, id string, approved bool, approver, reason string) (Entry, error) {
	approver, reason = strings.TrimSpace(approver), strings.TrimSpace(reason)
	verb := map[bool]string{true: "approve", false: "deny"}[approved]
	switch {
	case runID == "" || id == "":
		return Entry{}, fmt.Errorf("%s: run and id must be set (got run %q, id %q)", verb, runID, id)
	case approver == "":
		return Entry{}, fmt.Errorf("%s %s %s: approver must be set: the answer is recorded with who gave it", verb, runID, id)
	case !approved && reason == "":
		return Entry{}, fmt.Errorf("deny %s %s: a reason must be set: the run is told why", runID, id)
	}
	if err := s.adopt(ctx, runID, id); err != nil {
		return Entry{}, fmt.Errorf("%s %s %s: %w", verb, runID, id, err)
	}
	e, err := s.answer(ctx, runID, id, approved, approver, reason)
	if err != nil {
		return Entry{}, fmt.Errorf("%s %s %s: %w", verb, runID, id, err)
	}
	if e.Kind == KindWorkflow {
		a := workflow.Approval{Approved: approved, Approver: approver, Reason: reason, Time: e.Answered}
		if err := workflow.Record(ctx, s.cfg.Journal, runID, id, a); err != nil {
			return e, fmt.Errorf("%s %s %s: answered in the queue, but the workflow journal refused it: %w", verb, runID, id, err)
		}
	}
	return e, nil
}

func (s *Store) answer(ctx context.Context, runID, id string, approved bool, approver, reason string) (Entry, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Entry{}, err
	}
	defer tx.Rollback()
	e, ok, err := get(ctx, tx, runID, id)
	if err != nil {
		return Entry{}, err
	}
	if !ok {
		return Entry{}, s.unknown(ctx, tx, runID, id)
	}
	if e.Status != StatusPending {
		return Entry{}, fmt.Errorf("already %s by %s at %s", e.Status, e.Approver, e.Answered.Format(time.RFC3339))
	}
	e.Status, e.Approver, e.AnswerReason, e.Answered = StatusDenied, approver, reason, s.cfg.Clock().UTC()
	if approved {
		e.Status = StatusApproved
	}
	if _, err := tx.ExecContext(ctx, `UPDATE approvals SET status = ?, approver = ?, answer_reason = ?, answered_ns = ?
		WHERE run_id = ? AND id = ? AND status = 'pending'`, e.Status, e.Approver, e.AnswerReason, e.Answered.UnixNano(), runID, id); err != nil {
		return Entry{}, err
	}
	if s.cfg.Audit != nil {
		action := map[bool]string{true: "approval_granted", false: "approval_denied"}[approved]
		d := map[string]any{"run": runID, "id": id, "kind": e.Kind, "tool": e.Tool, "approver": approver}
		if reason != "" {
			d["reason"] = reason
		}
		if _, err := s.cfg.Audit.Append(approver, action, d); err != nil {
			return Entry{}, err
		}
	}
	return e, tx.Commit()
}

// unknown explains why run has no approval id.
func (s *Store) unknown(ctx context.Context, tx *sql.Tx, runID, id string) error {
	rows, err := tx.QueryContext(ctx, `SELECT id FROM approvals WHERE run_id = ? AND status = 'pending' ORDER BY id`, runID)
	if err != nil {
		return err
	}
	defer rows.Close()
	var pending []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return err
		}
		pending = append(pending, p)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(pending) > 0 {
		return fmt.Errorf("run %s has no approval %q (pending: %s)", runID, id, strings.Join(pending, ", "))
	}
	evs, err := s.cfg.Journal.Events(ctx, runID)
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		return fmt.Errorf("run %s not found in the journal", runID)
	}
	return fmt.Errorf("run %s has no approval %q pending", runID, id)
}

// adopt queues, from run's journal, a request for id the journal holds
// unanswered and the queue does not have.
func (s *Store) adopt(ctx context.Context, runID, id string) error {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM approvals WHERE run_id = ? AND id = ?`, runID, id).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	evs, err := s.cfg.Journal.Events(ctx, runID)
	if err != nil {
		return err
	}
	e, ok := pendingInJournal(runID, id, evs)
	if !ok {
		return nil
	}
	actor := "agent:" + e.Name
	if e.Kind == KindWorkflow {
		actor = "workflow:" + e.Name
	}
	_, err = s.request(ctx, e, actor)
	return err
}

// pendingInJournal finds id among the run's unanswered requests: a
// workflow's approval_required step, or a held call's approval_requested.
func pendingInJournal(runID, id string, evs []journal.Event) (Entry, bool) {
	var e Entry
	found, answered := false, false
	args := map[string]json.RawMessage{}
	for _, ev := range evs {
		switch ev.Kind {
		case journal.KindRunStarted:
			var st journal.RunStarted
			if json.Unmarshal(ev.Payload, &st) == nil {
				e.Name = st.Agent
			}
		case journal.KindWorkflowStarted:
			var st workflow.Started
			if json.Unmarshal(ev.Payload, &st) == nil {
				e.Name = st.Workflow
			}
		case journal.KindToolCall:
			var c struct {
				Arguments json.RawMessage `json:"arguments"`
			}
			if json.Unmarshal(ev.Payload, &c) == nil {
				args[ev.CallID] = c.Arguments
			}
		case journal.KindStep:
			var se workflow.StepEvent
			if json.Unmarshal(ev.Payload, &se) == nil && se.Event == workflow.StatusApprovalRequired && se.Step == id && !found {
				found, e.Kind, e.Tool, e.Requested, e.Prompt = true, KindWorkflow, id, ev.Time, se.Prompt
			}
		case journal.KindApprovalRequested:
			var r journal.ApprovalRequested
			if ev.CallID == id && !found && json.Unmarshal(ev.Payload, &r) == nil {
				found, e.Kind, e.Step, e.Tool, e.Reason, e.Origin, e.Requested = true, KindToolCall, ev.Step, r.Tool, r.Reason, r.Origin, ev.Time
				e.Arguments = Clip(args[id])
			}
		case journal.KindApproval:
			var a struct {
				Step   string `json:"step"`
				CallID string `json:"call_id"`
			}
			if json.Unmarshal(ev.Payload, &a) == nil && (a.Step == id || a.CallID == id) {
				answered = true
			}
		}
	}
	e.RunID, e.ID = runID, id
	return e, found && !answered
}

// Get returns run's approval id.
func (s *Store) Get(ctx context.Context, runID, id string) (Entry, bool, error) {
	return get(ctx, s.db, runID, id)
}

// Pending lists the unanswered approvals, oldest first: the queue's, and
// the approval gates of workflow runs that suspended on the journal alone
// (workflow.JournalGate, the Runner's default, queues nothing). Finding
// the latter reads every run of the journal, as workflow.PendingApprovals
// does.
func (s *Store) Pending(ctx context.Context) ([]Entry, error) {
	out, err := s.list(ctx, `WHERE status = 'pending'`)
	if err != nil {
		return nil, err
	}
	gates, err := workflow.PendingApprovals(ctx, s.cfg.Journal)
	if err != nil {
		return nil, fmt.Errorf("approvals: workflow gates: %w", err)
	}
	for _, g := range gates {
		if _, ok, err := s.Get(ctx, g.RunID, g.Step); err != nil {
			return nil, err
		} else if !ok {
			out = append(out, Entry{RunID: g.RunID, ID: g.Step, Kind: KindWorkflow, Name: g.Workflow, Tool: g.Step, Prompt: g.Prompt, Requested: g.Since.UTC(), Status: StatusPending})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Requested.Before(out[j].Requested) })
	return out, nil
}

// All lists every approval, oldest first.
func (s *Store) All(ctx context.Context) ([]Entry, error) { return s.list(ctx, "") }

const columns = `run_id, id, kind, name, step, tool, arguments, reason, origin, prompt, requested_ns, status, approver, answer_reason, answered_ns`

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func get(ctx context.Context, q querier, runID, id string) (Entry, bool, error) {
	e, err := scan(q.QueryRowContext(ctx, `SELECT `+columns+` FROM approvals WHERE run_id = ? AND id = ?`, runID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, fmt.Errorf("approval %s/%s: %w", runID, id, err)
	}
	return e, true, nil
}

func (s *Store) list(ctx context.Context, where string) ([]Entry, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+columns+` FROM approvals `+where+` ORDER BY requested_ns, run_id, id`)
	if err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		e, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("approvals: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	return out, nil
}

func scan(row interface{ Scan(...any) error }) (Entry, error) {
	var e Entry
	var req, ans int64
	if err := row.Scan(&e.RunID, &e.ID, &e.Kind, &e.Name, &e.Step, &e.Tool, &e.Arguments, &e.Reason, &e.Origin, &e.Prompt, &req, &e.Status, &e.Approver, &e.AnswerReason, &ans); err != nil {
		return Entry{}, err
	}
	e.Requested = time.Unix(0, req).UTC()
	if ans != 0 {
		e.Answered = time.Unix(0, ans).UTC()
	}
	return e, nil
}

// Clip renders arguments compactly on one line, cut to ArgumentsMax
// characters with the full length noted.
func Clip(args json.RawMessage) string {
	s := strings.TrimSpace(string(args))
	if c, err := journal.Canonical(args); err == nil {
		s = string(c)
	}
	if utf8.RuneCountInString(s) <= ArgumentsMax {
		return s
	}
	r := []rune(s)
	return fmt.Sprintf("%s… (%d bytes)", string(r[:ArgumentsMax]), len(s))
}
