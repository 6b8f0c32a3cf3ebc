package coord

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Overlap policies: what an occurrence does while the routine's previous
// inspection is still active (pending, running or proposed).
const (
	OverlapSkip      = "skip"       // record the occurrence as skipped
	OverlapBufferOne = "buffer-one" // queue it behind the active one; at most one buffered
)

// Catch-up policies: what a tick does with occurrences missed while no
// tick came (an outage).
const (
	CatchUpCoalesceLatest = "coalesce-latest" // dispatch the latest, record the others as coalesced into it
	CatchUpAll            = "all"             // dispatch every missed occurrence, in order
)

// Occurrence decisions.
const (
	OccDispatched = "dispatched"  // an inspection task was enqueued
	OccBuffered   = "buffered"    // enqueued behind the active inspection
	OccSkipped    = "skipped"     // overlap: the previous inspection is active
	OccCoalesced  = "coalesced"   // catch-up: folded into a later occurrence
	OccPaused     = "paused"      // the operator's pause switch was on
	OccOverBudget = "over-budget" // the WIP cap or the daily spend cap was reached
	OccNoOp       = "no-op"       // inspected; nothing to do (evidence recorded)
	OccProposed   = "proposed"    // inspected; work proposed (evidence recorded)
	OccFailed     = "failed"      // inspected; the inspection failed or broke its budget
)

// Budget bounds a routine. Wall and Tokens bound one inspection run (the
// runner enforces them with measured elapsed time and reported usage and
// reports both); SpendUSDPerDay caps the spend recorded for the routine's
// occurrences of one UTC day; WIP caps the routine's active tasks
// (inspections and the work they proposed). Zero: no bound.
type Budget struct {
	Wall           Duration `json:"wall,omitempty"`
	Tokens         int64    `json:"tokens,omitempty"`
	SpendUSDPerDay float64  `json:"spend_usd_per_day,omitempty"`
	WIP            int      `json:"wip,omitempty"`
}

// Duration is a time.Duration that reads and writes as "45m".
type Duration time.Duration

// MarshalJSON writes "45m0s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "45m".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// Schedule is a routine's reviewable schedule.
type Schedule struct {
	Routine  string `json:"routine"`
	Version  int    `json:"schedule_version"`
	Calendar string `json:"calendar"` // five-field cron, e.g. "17 2 * * *"
	Timezone string `json:"timezone"` // IANA name; the calendar is read in it
	Overlap  string `json:"overlap"`
	CatchUp  string `json:"catch_up"`
	Budget   Budget `json:"budget"`
}

// Validate reports every problem with the schedule, naming the field.
func (s Schedule) Validate() error {
	var errs []error
	if s.Routine == "" || strings.ContainsAny(s.Routine, "/ ") {
		errs = append(errs, fmt.Errorf("routine: must be set, without '/' or spaces (got %q)", s.Routine))
	}
	if s.Version < 1 {
		errs = append(errs, fmt.Errorf("schedule_version: must be at least 1 (got %d)", s.Version))
	}
	if _, err := parseCalendar(s.Calendar); err != nil {
		errs = append(errs, fmt.Errorf("calendar: %w", err))
	}
	if _, err := time.LoadLocation(s.Timezone); err != nil || s.Timezone == "" {
		errs = append(errs, fmt.Errorf("timezone: %q is not an IANA time zone", s.Timezone))
	}
	if s.Overlap != OverlapSkip && s.Overlap != OverlapBufferOne {
		errs = append(errs, fmt.Errorf("overlap: want %s or %s (got %q)", OverlapSkip, OverlapBufferOne, s.Overlap))
	}
	if s.CatchUp != CatchUpCoalesceLatest && s.CatchUp != CatchUpAll {
		errs = append(errs, fmt.Errorf("catch_up: want %s or %s (got %q)", CatchUpCoalesceLatest, CatchUpAll, s.CatchUp))
	}
	b := s.Budget
	if b.Wall < 0 || b.Tokens < 0 || b.SpendUSDPerDay < 0 || b.WIP < 0 || math.IsNaN(b.SpendUSDPerDay) {
		errs = append(errs, errors.New("budget: every bound must be zero (none) or positive"))
	}
	return errors.Join(errs...)
}

// OccurrenceKey is an occurrence's identity: routine, schedule version and
// nominal UTC time — never the arrival time, so a late or repeated
// delivery of one tick is the same occurrence.
func OccurrenceKey(routine string, version int, nominal time.Time) string {
	return fmt.Sprintf("%s/v%d/%s", routine, version, nominal.UTC().Format(time.RFC3339))
}

// InspectionKey is the intent key of an occurrence's inspection task: the
// occurrence is part of it, so each day inspects again, while the work an
// inspection proposes carries its own stable key.
func InspectionKey(occ string) string { return "inspect/" + occ }

// RoutineKind is the task kind of a routine's inspections.
func RoutineKind(routine string) string { return "routine:" + routine }

// Inspection is an inspection task's payload.
type Inspection struct {
	Routine    string    `json:"routine"`
	Version    int       `json:"schedule_version"`
	Nominal    time.Time `json:"nominal"`
	Occurrence string    `json:"occurrence"`
	Budget     Budget    `json:"budget"`
}

// Occurrence is an occurrence row.
type Occurrence struct {
	Key        string    `json:"key"`
	Routine    string    `json:"routine"`
	Version    int       `json:"schedule_version"`
	Nominal    time.Time `json:"nominal"`
	Arrival    time.Time `json:"arrival"`
	Deliveries int       `json:"deliveries"`
	Decision   string    `json:"decision"`
	Reason     string    `json:"reason,omitempty"`
	Task       string    `json:"task,omitempty"`
	Evidence   string    `json:"evidence,omitempty"`
	Tokens     int64     `json:"tokens,omitempty"`
	SpendUSD   float64   `json:"spend_usd,omitempty"`
}

// Deliver records one delivery of the occurrence at nominal (which must be
// on the schedule's calendar) and decides it: the first delivery applies
// the pause switch, the budgets and the overlap policy and, if it
// dispatches, enqueues the inspection task; a repeated delivery reuses the
// occurrence (its delivery count goes up, nothing else happens).
func (c *Coordinator) Deliver(ctx context.Context, s Schedule, nominal time.Time) (Occurrence, error) {
	cal, loc, err := s.compiled()
	if err != nil {
		return Occurrence{}, err
	}
	nominal = nominal.UTC()
	if nominal.Truncate(time.Minute) != nominal || !cal.matches(nominal.In(loc)) {
		return Occurrence{}, fmt.Errorf("deliver %s: %s is not on the calendar %q (%s)", s.Routine, nominal.Format(time.RFC3339Nano), s.Calendar, s.Timezone)
	}
	var occ Occurrence
	err = c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
		var err error
		occ, err = deliverTx(ctx, tx, now, s, nominal, "")
		return err
	})
	if err != nil {
		return Occurrence{}, fmt.Errorf("deliver %s: %w", OccurrenceKey(s.Routine, s.Version, nominal), err)
	}
	return occ, nil
}

// Tick is the scheduler waking up: it finds the calendar's occurrences
// after the routine's latest recorded one (or after the first tick of this
// schedule version) up to the coordinator's clock and applies the catch-up
// policy — coalesce-latest delivers only the latest and records the
// others as coalesced into it; all delivers each in order. It returns the
// occurrences it recorded.
func (c *Coordinator) Tick(ctx context.Context, s Schedule) ([]Occurrence, error) {
	cal, loc, err := s.compiled()
	if err != nil {
		return nil, err
	}
	var out []Occurrence
	err = c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
		out = nil
		from, err := tickStart(ctx, tx, s, now)
		if err != nil {
			return err
		}
		due := cal.due(from, now, loc)
		for i, n := range due {
			coalesced := ""
			if s.CatchUp == CatchUpCoalesceLatest && i < len(due)-1 {
				coalesced = OccurrenceKey(s.Routine, s.Version, due[len(due)-1])
			}
			o, err := deliverTx(ctx, tx, now, s, n, coalesced)
			if err != nil {
				return err
			}
			out = append(out, o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tick %s: %w", s.Routine, err)
	}
	return out, nil
}

func (s Schedule) compiled() (*calendar, *time.Location, error) {
	if err := s.Validate(); err != nil {
		return nil, nil, fmt.Errorf("schedule %s: %w", s.Routine, err)
	}
	cal, _ := parseCalendar(s.Calendar)
	loc, _ := time.LoadLocation(s.Timezone)
	return cal, loc, nil
}

// tickStart is where a tick looks from: the latest recorded occurrence of
// this schedule version, else the first tick's time (recorded then: a new
// schedule does not replay the past).
func tickStart(ctx context.Context, tx *sql.Tx, s Schedule, now time.Time) (time.Time, error) {
	var last sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT max(nominal) FROM occurrences WHERE routine = ? AND version = ?`, s.Routine, s.Version).Scan(&last); err != nil {
		return time.Time{}, err
	}
	name := fmt.Sprintf("schedule/%s/v%d/first-tick", s.Routine, s.Version)
	var first []byte
	err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = ?`, name).Scan(&first)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta (name, value) VALUES (?, ?)`, name, []byte(strconv.FormatInt(now.UnixNano(), 10))); err != nil {
			return time.Time{}, err
		}
		first = []byte(strconv.FormatInt(now.UnixNano(), 10))
	case err != nil:
		return time.Time{}, err
	}
	f, err := strconv.ParseInt(string(first), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("meta %s: %w", name, err)
	}
	from := time.Unix(0, f)
	if last.Valid && time.Unix(0, last.Int64).After(from) {
		from = time.Unix(0, last.Int64)
	}
	return from, nil
}

func deliverTx(ctx context.Context, tx *sql.Tx, now time.Time, s Schedule, nominal time.Time, coalescedInto string) (Occurrence, error) {
	key := OccurrenceKey(s.Routine, s.Version, nominal)
	r, err := tx.ExecContext(ctx, `UPDATE occurrences SET deliveries = deliveries + 1 WHERE key = ?`, key)
	if err != nil {
		return Occurrence{}, err
	}
	if n, _ := r.RowsAffected(); n == 1 {
		return occurrenceTx(ctx, tx, key) // a repeated delivery: the same occurrence
	}
	decision, reason, taskKey := "", "", ""
	switch {
	case coalescedInto != "":
		decision, reason = OccCoalesced, "missed; coalesced into "+coalescedInto
	default:
		decision, reason, taskKey, err = decide(ctx, tx, now, s, nominal, key)
		if err != nil {
			return Occurrence{}, err
		}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO occurrences (key, routine, version, nominal, arrival, decision, reason, task)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, key, s.Routine, s.Version, nominal.UnixNano(), now.UnixNano(), decision, reason, taskKey)
	if err != nil {
		return Occurrence{}, err
	}
	return occurrenceTx(ctx, tx, key)
}

// decide applies, in order, the pause switch, the budgets and the overlap
// policy to a new occurrence, enqueuing its inspection when it runs.
func decide(ctx context.Context, tx *sql.Tx, now time.Time, s Schedule, nominal time.Time, key string) (decision, reason, task string, err error) {
	var paused bool
	var why string
	err = tx.QueryRowContext(ctx, `SELECT paused, reason FROM switches WHERE routine = ?`, s.Routine).Scan(&paused, &why)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", "", "", err
	}
	if paused {
		return OccPaused, "paused by the operator: " + why, "", nil
	}
	prefix := s.Routine + "/%"
	var active int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tasks WHERE occurrence LIKE ? AND state IN ('pending','running','proposed')`,
		prefix).Scan(&active); err != nil {
		return "", "", "", err
	}
	if s.Budget.WIP > 0 && active >= s.Budget.WIP {
		return OccOverBudget, fmt.Sprintf("WIP cap: %d active tasks (cap %d)", active, s.Budget.WIP), "", nil
	}
	if s.Budget.SpendUSDPerDay > 0 {
		day := nominal.UTC().Truncate(24 * time.Hour)
		var spent int64
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(spend_microusd), 0) FROM occurrences WHERE routine = ? AND nominal >= ? AND nominal < ?`,
			s.Routine, day.UnixNano(), day.Add(24*time.Hour).UnixNano()).Scan(&spent); err != nil {
			return "", "", "", err
		}
		if float64(spent)/1e6 >= s.Budget.SpendUSDPerDay {
			return OccOverBudget, fmt.Sprintf("daily spend cap: $%.6f spent on %s (cap $%.2f)", float64(spent)/1e6, day.Format("2006-01-02"), s.Budget.SpendUSDPerDay), "", nil
		}
	}
	// The routine's active inspections, oldest first.
	rows, err := tx.QueryContext(ctx, `SELECT t.key, o.decision FROM tasks t JOIN occurrences o ON o.task = t.key
		WHERE o.routine = ? AND t.state IN ('pending','running','proposed') ORDER BY o.nominal`, s.Routine)
	if err != nil {
		return "", "", "", err
	}
	var activeInspections, buffered []string
	for rows.Next() {
		var k, d string
		if err := rows.Scan(&k, &d); err != nil {
			rows.Close()
			return "", "", "", err
		}
		activeInspections = append(activeInspections, k)
		if d == OccBuffered {
			buffered = append(buffered, k)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", "", "", err
	}
	task = InspectionKey(key)
	var deps []string
	decision = OccDispatched
	if len(activeInspections) > 0 {
		last := activeInspections[len(activeInspections)-1]
		if s.Overlap == OverlapSkip {
			return OccSkipped, "overlap: " + last + " is still active", "", nil
		}
		if len(buffered) > 0 {
			return OccSkipped, "overlap: " + buffered[0] + " is already buffered (buffer-one)", "", nil
		}
		// Buffered: claimable only once the active inspection is accepted.
		decision, reason, deps = OccBuffered, "overlap: buffered behind "+last, []string{last}
	}
	payload, err := json.Marshal(Inspection{Routine: s.Routine, Version: s.Version, Nominal: nominal.UTC(), Occurrence: key, Budget: s.Budget})
	if err != nil {
		return "", "", "", err
	}
	if _, err := enqueueTx(ctx, tx, now, TaskSpec{Key: task, Kind: RoutineKind(s.Routine), Payload: payload, Occurrence: key, Dependencies: deps}, normDeps(deps)); err != nil {
		return "", "", "", err
	}
	return decision, reason, task, nil
}

func occurrenceTx(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}, key string) (Occurrence, error) {
	var o Occurrence
	var nominal, arrival, micro int64
	err := q.QueryRowContext(ctx, `SELECT key, routine, version, nominal, arrival, deliveries, decision, reason, task, evidence, tokens, spend_microusd
		FROM occurrences WHERE key = ?`, key).Scan(&o.Key, &o.Routine, &o.Version, &nominal, &arrival, &o.Deliveries, &o.Decision, &o.Reason,
		&o.Task, &o.Evidence, &o.Tokens, &micro)
	o.Nominal, o.Arrival, o.SpendUSD = time.Unix(0, nominal).UTC(), time.Unix(0, arrival).UTC(), float64(micro)/1e6
	return o, err
}

// Occurrences lists a routine's occurrences ("" for all) by nominal time.
func (c *Coordinator) Occurrences(ctx context.Context, routine string) ([]Occurrence, error) {
	db, err := c.conn()
	if err != nil {
		return nil, fmt.Errorf("list occurrences: %w", err)
	}
	occs, err := queryOccurrences(ctx, db, routine)
	return occs, c.closing(err)
}

func queryOccurrences(ctx context.Context, db *sql.DB, routine string) ([]Occurrence, error) {
	rows, err := db.QueryContext(ctx, `SELECT key FROM occurrences WHERE ? = '' OR routine = ? ORDER BY nominal, key`, routine, routine)
	if err != nil {
		return nil, fmt.Errorf("list occurrences: %w", err)
	}
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list occurrences: %w", err)
		}
		keys = append(keys, k)
	}
	rows.Close()
	out := make([]Occurrence, 0, len(keys))
	for _, k := range keys {
		o, err := occurrenceTx(ctx, db, k)
		if err != nil {
			return nil, fmt.Errorf("list occurrences: %w", err)
		}
		out = append(out, o)
	}
	return out, nil
}

// SetPaused flips a routine's operator pause switch. While it is on, every
// new occurrence is recorded as paused and dispatches nothing; inspections
// already queued or running are not touched (their workers release them
// when stopped).
func (c *Coordinator) SetPaused(ctx context.Context, routine string, paused bool, reason string) error {
	return c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO switches (routine, paused, reason, at) VALUES (?, ?, ?, ?)
			ON CONFLICT (routine) DO UPDATE SET paused = excluded.paused, reason = excluded.reason, at = excluded.at`,
			routine, paused, reason, now.UnixNano())
		if err != nil {
			return fmt.Errorf("pause switch %s: %w", routine, err)
		}
		return nil
	})
}

// Outcome is what an inspection found.
type Outcome struct {
	// Work is the work the inspection proposes, each with a stable intent
	// key: work another occurrence already proposed is the same task.
	Work []TaskSpec
	// Evidence says what was inspected and found (required: an empty
	// backlog is recorded as a no-op with its evidence, never silently).
	Evidence string
	// Tokens and SpendUSD are the run's measured usage (for the budgets).
	Tokens   int64
	SpendUSD float64
	// Failed marks a failed inspection (e.g. over its wall or token
	// budget); its work is not enqueued.
	Failed bool
}

// FinishInspection records an inspection's outcome under its live grant
// (the four-condition invariant: a stale inspector proposes nothing) in one
// transaction: the proposed work is enqueued (idempotently, tagged with the
// occurrence that first proposed it), the occurrence gets its decision —
// no-op, proposed or failed — with the evidence and usage, and the
// inspection task is accepted (an inspection changes nothing itself; the
// work it proposes goes through claims, receipts and acceptance like any
// other) or failed.
func (c *Coordinator) FinishInspection(ctx context.Context, g Grant, out Outcome) (created []string, err error) {
	if strings.TrimSpace(out.Evidence) == "" {
		return nil, fmt.Errorf("finish inspection %s: evidence must be recorded, even for an empty backlog", g.Key)
	}
	err = c.guarded(ctx, g, "finish", func(tx *sql.Tx, now time.Time) error {
		created = nil
		var occ string
		if err := tx.QueryRowContext(ctx, `SELECT occurrence FROM tasks WHERE key = ?`, g.Key).Scan(&occ); err != nil {
			return err
		}
		decision := OccNoOp
		switch {
		case out.Failed:
			decision = OccFailed
		case len(out.Work) > 0:
			decision = OccProposed
			for _, w := range out.Work {
				w.Occurrence = occ
				made, err := enqueueTx(ctx, tx, now, w, normDeps(w.Dependencies))
				if err != nil {
					return fmt.Errorf("propose %s: %w", w.Key, err)
				}
				if made {
					created = append(created, w.Key)
				}
			}
		}
		state := Accepted
		if out.Failed {
			state = Failed
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET state = ?, note = ?, updated = ? WHERE key = ?`, state, decision, now.UnixNano(), g.Key); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE occurrences SET decision = ?, evidence = ?, tokens = ?, spend_microusd = ? WHERE task = ?`,
			decision, out.Evidence, out.Tokens, int64(math.Round(out.SpendUSD*1e6)), g.Key)
		return err
	})
	return created, err
}
