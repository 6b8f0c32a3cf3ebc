package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/loomwork/loomwork/store"
)

// What the lists read besides the summary row (migration 0008): the call
// groups a row carries, the calls of one trace (store.CallReader), and the
// sessions kept at ingest.

// versionCallGroups is the schema version that added traces.call_groups
// and the sessions tables.
const versionCallGroups = 8

// jsonGroups is the JSON form of a summary's call groups ("[]" for
// none), what versions 8 wrote and fillCallGroups writes; summaries
// written since version 9 hold packGroups' form.
func jsonGroups(gs []store.CallGroup) string {
	if len(gs) == 0 {
		return "[]"
	}
	b, err := json.Marshal(gs)
	if err != nil {
		// A CallGroup is strings and integers: it always marshals.
		return "[]"
	}
	return string(b)
}

// groupsPacked is the first byte of packGroups' form (JSON never starts
// with it).
const groupsPacked = 1

// groupInts are a call group's integers in packGroups' order. A field
// added to store.CallGroup must be added at the end (TestPackGroups
// fails until it is).
func groupInts(g *store.CallGroup) []*int64 {
	return []*int64{&g.Calls, &g.Failed, &g.InputTokens, &g.OutputTokens, &g.CacheReadTokens, &g.CacheCreationTokens,
		&g.ReasoningTokens, &g.ExplicitCalls, &g.ExplicitPicoUSD, &g.ExplicitOutOfRange, &g.ExplicitMagnitude,
		&g.NoUsage, &g.FailedNoUsage, &g.Priced, &g.PricedUncached, &g.PricedCacheRead, &g.PricedCacheCreation,
		&g.PricedOutput, &g.Raw, &g.MinPrompt, &g.MaxPrompt}
}

// packGroups is the stored form of a summary's call groups: a row per
// trace, so a fifth of the JSON's bytes matter (the JSON was half of a
// 10-span trace's summary row). groupsPacked, the count, then per group
// its two models and groupInts (zig-zag varints). A model is its
// position in models (the summary's, stored beside) + 1, or 0 and the
// name (uvarint length, bytes).
func packGroups(gs []store.CallGroup, models []string) []byte {
	out := []byte{groupsPacked}
	out = binary.AppendUvarint(out, uint64(len(gs)))
	for i := range gs {
		g := &gs[i]
		for _, m := range []string{g.RequestModel, g.ResponseModel} {
			if k := slices.Index(models, m); k >= 0 {
				out = binary.AppendUvarint(out, uint64(k)+1)
			} else {
				out = appendStr(append(out, 0), m)
			}
		}
		for _, v := range groupInts(g) {
			out = binary.AppendVarint(out, *v)
		}
	}
	return out
}

// decodeGroups reads either stored form of call groups; models are the
// summary's.
func decodeGroups(s string, models []string) ([]store.CallGroup, error) {
	if len(s) > 0 && s[0] == groupsPacked {
		r := &creader{b: s, pos: 1}
		gs := make([]store.CallGroup, r.count(2))
		model := func() string {
			k := r.uvarint()
			switch {
			case k == 0:
				return strings.Clone(r.str())
			case k <= uint64(len(models)):
				return models[k-1]
			case r.err == nil:
				r.err = fmt.Errorf("model %d of %d", k, len(models))
			}
			return ""
		}
		for i := range gs {
			g := &gs[i]
			g.RequestModel = model()
			g.ResponseModel = model()
			for _, v := range groupInts(g) {
				*v = r.varint()
			}
		}
		if r.err == nil && r.pos != len(s) {
			r.err = fmt.Errorf("%d bytes after the groups", len(s)-r.pos)
		}
		if r.err != nil {
			return nil, fmt.Errorf("packed call groups: %w", r.err)
		}
		if len(gs) == 0 {
			return nil, nil
		}
		return gs, nil
	}
	var gs []store.CallGroup
	if err := json.Unmarshal([]byte(s), &gs); err != nil {
		return nil, err
	}
	if len(gs) == 0 {
		return nil, nil
	}
	return gs, nil
}

// fillCallGroups sets call_groups of every stored trace from its billed
// calls (trace_calls, kept since version 2), one trace at a time.
func fillCallGroups(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT `+callCols+` FROM trace_calls ORDER BY trace_seq, start_ns, span_id`)
	if err != nil {
		return fmt.Errorf("fill call groups: %w", err)
	}
	defer rows.Close()
	upd, err := tx.PrepareContext(ctx, `UPDATE traces SET call_groups = ? WHERE seq = ?`)
	if err != nil {
		return fmt.Errorf("fill call groups: %w", err)
	}
	defer upd.Close()
	var calls []store.Call
	cur := int64(-1)
	flush := func() error {
		if len(calls) == 0 {
			return nil
		}
		_, err := upd.ExecContext(ctx, jsonGroups(store.GroupCalls(calls)), cur)
		calls = calls[:0]
		return err
	}
	for rows.Next() {
		seq, c, err := scanCall(rows)
		if err != nil {
			return fmt.Errorf("fill call groups: %w", err)
		}
		if seq != cur {
			if err := flush(); err != nil {
				return fmt.Errorf("fill call groups of trace %d: %w", cur, err)
			}
			cur = seq
		}
		calls = append(calls, c)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("fill call groups: %w", err)
	}
	if err := flush(); err != nil {
		return fmt.Errorf("fill call groups of trace %d: %w", cur, err)
	}
	return nil
}

// scanCall reads a trace_calls row (callCols).
func scanCall(rows *sql.Rows) (int64, store.Call, error) {
	var seq, startNS int64
	var id []byte
	var flags int
	var cost sql.NullFloat64
	var c store.Call
	if err := rows.Scan(&seq, &startNS, &id, &c.Name, &c.RequestModel, &c.ResponseModel, &flags,
		&c.InputTokens, &c.OutputTokens, &c.CacheReadTokens, &c.CacheCreationTokens, &c.ReasoningTokens, &cost); err != nil {
		return 0, c, err
	}
	c.SpanID, c.Start = hex.EncodeToString(id), time.Unix(0, startNS).UTC()
	c.Failed, c.HasUsage = flags&callFailed != 0, flags&callHasUsage != 0
	if cost.Valid {
		v := cost.Float64
		c.CostUSD = &v
	}
	return seq, c, nil
}

// TraceCalls returns the billed calls of traceID in canonical order (see
// store.CallReader), from trace_calls.
func (s *Store) TraceCalls(ctx context.Context, traceID string) ([]store.Call, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	id, err := decodeID(traceID, 16)
	if err != nil {
		return nil, fmt.Errorf("trace calls: %w: %w", store.ErrBadTraceID, err)
	}
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("trace calls of %s: %w", traceID, err)
	}
	defer tx.Rollback()
	var seq int64
	var compact bool
	switch err := tx.QueryRowContext(ctx, `SELECT seq, compact FROM traces INDEXED BY traces_by_id WHERE trace_id = ? AND project = ?`, id, store.ProjectOf(ctx)).Scan(&seq, &compact); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("trace calls of %s: %w", traceID, store.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("trace calls of %s: %w", traceID, err)
	}
	if compact {
		// No rows of calls: derived from the trace's spans, by the rule
		// that kept them (store.SummaryBuilder).
		spans, err := s.compactTrace(ctx, tx, seq, traceID, false)
		if err != nil {
			return nil, fmt.Errorf("trace calls of %s: %w", traceID, err)
		}
		b := store.NewSummaryBuilder()
		b.Add(spans)
		return b.Summary().Calls, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+callCols+` FROM trace_calls WHERE trace_seq = ? ORDER BY start_ns, span_id`, seq)
	if err != nil {
		return nil, fmt.Errorf("trace calls of %s: %w", traceID, err)
	}
	defer rows.Close()
	var calls []store.Call
	for rows.Next() {
		_, c, err := scanCall(rows)
		if err != nil {
			return nil, fmt.Errorf("trace calls of %s: %w", traceID, err)
		}
		calls = append(calls, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("trace calls of %s: %w", traceID, err)
	}
	return calls, nil
}

var _ store.CallReader = (*Store)(nil)

// sessionKey is a session within its project.
type sessionKey struct{ project, session string }

// updateSessions keeps the sessions of the groups' traces current: it adds
// the turns the new spans' conversation ids make, and recomputes every
// session of a trace whose summary changed. It runs in the write's
// transaction, after the summaries and the search terms.
func (s *Store) updateSessions(ctx context.Context, tx *sql.Tx, groups []*traceGroup) error {
	touched := map[sessionKey]struct{}{}
	var convKey int64 = -1
	for _, g := range groups {
		if len(g.inserted) == 0 {
			continue
		}
		seen := map[string]struct{}{}
		for _, r := range g.inserted {
			if c := r.span.ConversationID; c != "" {
				seen[c] = struct{}{}
			}
		}
		switch {
		case g.compact || g.converted != nil:
			// Its earlier sessions: its stored spans' conversation ids.
			for c := range g.convs {
				seen[c] = struct{}{}
			}
		case g.sm.exists:
			// Its earlier sessions: the conversation ids search_terms
			// holds for it (a range of its primary key).
			if convKey < 0 {
				switch err := tx.QueryRowContext(ctx, `SELECT id FROM search_keys WHERE kind = ? AND key = ''`, searchConversation).Scan(&convKey); {
				case errors.Is(err, sql.ErrNoRows):
					convKey = 0
				case err != nil:
					return fmt.Errorf("update sessions: %w", err)
				}
			}
			if convKey > 0 {
				rows, err := tx.QueryContext(ctx, `SELECT value FROM search_terms WHERE key_id = ? AND seq = ?`, convKey, g.sm.seq)
				if err != nil {
					return fmt.Errorf("update sessions: %w", err)
				}
				for rows.Next() {
					var v string
					if err := rows.Scan(&v); err != nil {
						rows.Close()
						return fmt.Errorf("update sessions: %w", err)
					}
					seen[v] = struct{}{}
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					return fmt.Errorf("update sessions: %w", err)
				}
			}
		}
		for c := range seen {
			if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO session_turns (project, session, seq) VALUES (?, ?, ?)`, g.project, c, g.sm.seq); err != nil {
				return fmt.Errorf("update sessions: add turn: %w", err)
			}
			touched[sessionKey{g.project, c}] = struct{}{}
		}
	}
	return recomputeSessions(ctx, tx, touched)
}

// recomputeSessionSQL sets a session's row to store.SumTurns over its
// turns' summaries (the traces rows ListTraces reads).
const recomputeSessionSQL = `INSERT OR REPLACE INTO sessions (project, session, turns, first_start_ns, last_start_ns,
	span_count, error_count, model_calls, tool_calls, input_tokens, output_tokens)
SELECT st.project, st.session, count(*), min(t.start_ns), max(t.start_ns),
	sum(t.span_count), sum(t.error_count), sum(t.model_calls), sum(t.tool_calls), sum(t.input_tokens), sum(t.output_tokens)
FROM session_turns st JOIN traces t ON t.seq = st.seq
WHERE st.project = ? AND st.session = ?
GROUP BY st.project, st.session`

// recomputeSessions recomputes the given sessions' rows; a session left
// without turns loses its row.
func recomputeSessions(ctx context.Context, tx *sql.Tx, sessions map[sessionKey]struct{}) error {
	if len(sessions) == 0 {
		return nil
	}
	upd, err := tx.PrepareContext(ctx, recomputeSessionSQL)
	if err != nil {
		return fmt.Errorf("update sessions: %w", err)
	}
	defer upd.Close()
	for k := range sessions {
		r, err := upd.ExecContext(ctx, k.project, k.session)
		if err != nil {
			return fmt.Errorf("update session %q: %w", k.session, err)
		}
		if n, _ := r.RowsAffected(); n == 0 {
			if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE project = ? AND session = ?`, k.project, k.session); err != nil {
				return fmt.Errorf("update session %q: %w", k.session, err)
			}
		}
	}
	return nil
}

// dropSessionTurns removes the turns of the traces seqs (being deleted in
// tx, before their search terms are) and recomputes their sessions. in is
// the "(?,?,…)" list of seqs.
func dropSessionTurns(ctx context.Context, tx *sql.Tx, in string, seqs []any) error {
	rows, err := tx.QueryContext(ctx, `SELECT project, session FROM session_turns WHERE seq IN `+in, seqs...)
	if err != nil {
		return fmt.Errorf("find sessions: %w", err)
	}
	touched := map[sessionKey]struct{}{}
	for rows.Next() {
		var k sessionKey
		if err := rows.Scan(&k.project, &k.session); err != nil {
			rows.Close()
			return err
		}
		touched[k] = struct{}{}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM session_turns WHERE seq IN `+in, seqs...); err != nil {
		return fmt.Errorf("delete session turns: %w", err)
	}
	return recomputeSessions(ctx, tx, touched)
}

// sessionsSQL pages through a project's sessions, the most recently active
// first, by sessions_by_last. %s is the keyset condition.
const sessionsSQL = `SELECT session, turns, first_start_ns, last_start_ns, span_count, error_count, model_calls, tool_calls, input_tokens, output_tokens
	FROM sessions WHERE project = ? %s
	ORDER BY last_start_ns DESC, session DESC LIMIT ?`

// ListSessions returns one page of sessions (see store.SessionLister),
// from the sessions kept at ingest.
func (s *Store) ListSessions(ctx context.Context, q store.SessionQuery) (store.SessionPage, error) {
	if err := s.usable(); err != nil {
		return store.SessionPage{}, err
	}
	p, err := q.Plan()
	if err != nil {
		return store.SessionPage{}, fmt.Errorf("list sessions: %w", err)
	}
	if err := s.searchComplete(ctx); err != nil {
		return store.SessionPage{}, fmt.Errorf("list sessions: %w", err)
	}
	after := ""
	args := []any{store.ProjectOf(ctx)}
	if p.After != nil {
		after = "AND (last_start_ns, session) < (?, ?)"
		args = append(args, p.After.LastStartNS, p.After.SessionID)
	}
	args = append(args, p.Limit+1)
	rows, err := s.reader.QueryContext(ctx, fmt.Sprintf(sessionsSQL, after), args...)
	if err != nil {
		return store.SessionPage{}, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	page := store.SessionPage{Sessions: []store.SessionSummary{}}
	more := false
	for rows.Next() {
		if len(page.Sessions) == p.Limit {
			more = true
			break
		}
		var ss store.SessionSummary
		var first, last int64
		if err := rows.Scan(&ss.SessionID, &ss.Turns, &first, &last, &ss.SpanCount, &ss.ErrorCount, &ss.ModelCalls, &ss.ToolCalls, &ss.InputTokens, &ss.OutputTokens); err != nil {
			return store.SessionPage{}, fmt.Errorf("list sessions: %w", err)
		}
		ss.FirstStart, ss.LastStart = time.Unix(0, first).UTC(), time.Unix(0, last).UTC()
		page.Sessions = append(page.Sessions, ss)
	}
	if err := rows.Err(); err != nil {
		return store.SessionPage{}, fmt.Errorf("list sessions: %w", err)
	}
	if more {
		last := page.Sessions[len(page.Sessions)-1]
		page.NextPageToken = p.NextPageToken(store.SessionPosition{LastStartNS: last.LastStart.UnixNano(), SessionID: last.SessionID})
	}
	return page, nil
}

var _ store.SessionLister = (*Store)(nil)

// inList is "(?,?,…)" for n values.
func inList(n int) string {
	return "(" + strings.TrimSuffix(strings.Repeat("?,", n), ",") + ")"
}
