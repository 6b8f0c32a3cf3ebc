package clickhouse

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// The spans/index pair. WritePrepared inserts spans, then their trace_index
// rows, in two INSERTs: ClickHouse has no transaction across tables. When
// the second fails the write fails and a retry of it writes both again; but
// a sender that gives up (or a process that dies between the two) leaves
// spans that GetTrace finds and ListTraces does not list. Two repairs close
// that gap, both idempotent because the index folds rows with min/max:
//
//   - pendingIndex keeps the rows of a failed index insert in memory and
//     inserts them before the next write and at Shutdown;
//   - Start inserts the rows of recent traces that have spans but no index
//     row (Config.IndexRepairWindow), for a process that died holding them.
//
// The spooled path needs neither (its feeder commits a record only after
// both inserts), but they cost it nothing.

// maxPendingIndexRows bounds what a store keeps for a failing index
// table (a trace_index row is ~60 bytes); beyond it the oldest are dropped
// and left to the repair at the next Start.
const maxPendingIndexRows = 1 << 20

// DefaultIndexRepairWindow is how far back Start looks for traces with
// spans and no index row when Config.IndexRepairWindow is 0.
const DefaultIndexRepairWindow = 24 * time.Hour

type pendingIndex struct {
	mu      sync.Mutex
	rows    traceRows
	dropped int
}

// hold keeps a copy of rows whose insert failed. The ids are copied too:
// r's strings point into memory of the batch or spooled record they came
// from, which is reused once the write returns.
func (p *pendingIndex) hold(r *traceRows) {
	p.mu.Lock()
	defer p.mu.Unlock()
	from := len(p.rows.traceID)
	p.rows.add(r)
	for i := from; i < len(p.rows.traceID); i++ {
		p.rows.traceID[i] = strings.Clone(p.rows.traceID[i])
		p.rows.project[i] = strings.Clone(p.rows.project[i])
	}
	if over := len(p.rows.traceID) - maxPendingIndexRows; over > 0 {
		p.rows.traceID = append(p.rows.traceID[:0], p.rows.traceID[over:]...)
		p.rows.day = append(p.rows.day[:0], p.rows.day[over:]...)
		p.rows.start = append(p.rows.start[:0], p.rows.start[over:]...)
		p.rows.end = append(p.rows.end[:0], p.rows.end[over:]...)
		p.rows.project = append(p.rows.project[:0], p.rows.project[over:]...)
		p.rows.expires = append(p.rows.expires[:0], p.rows.expires[over:]...)
		p.dropped += over
	}
}

// flushPendingIndex inserts the held rows; they are kept if that fails.
func (s *Store) flushPendingIndex(ctx context.Context) error {
	p := &s.pending
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dropped > 0 {
		s.log.Warn("trace index rows dropped from memory after repeated failures; Start's repair restores them",
			"rows", p.dropped)
		p.dropped = 0
	}
	n := len(p.rows.traceID)
	if n == 0 {
		return nil
	}
	if err := s.insert(ctx, s.traceIndexTable, traceIndexColumns, p.rows.columns(), n); err != nil {
		return fmt.Errorf("write the %d trace index rows of an earlier failed write: %w", n, err)
	}
	p.rows.reset()
	return nil
}

// RepairTraceIndex writes the trace_index rows of traces with a span
// starting at or after since that have no index row from that day on, and
// returns how many traces it found. Start runs it over
// Config.IndexRepairWindow; it is safe to run at any time (a trace indexed
// twice reads the same).
func (s *Store) RepairTraceIndex(ctx context.Context, since time.Time) (uint64, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	return s.repairTraceIndex(ctx, since)
}

func (s *Store) repairTraceIndex(ctx context.Context, since time.Time) (uint64, error) {
	since = since.UTC()
	// Per (trace, project): the index row's expiry is the latest of its
	// spans' (each project's trace has its own row).
	missing := `SELECT trace_id, toDate(min(start), 'UTC') AS first_day, min(start) AS first_start, max(end) AS last_end,
	project, max(expire_at) AS last_expiry
FROM ` + s.spansTable + `
WHERE start >= ?
GROUP BY trace_id, project
HAVING (trace_id, project) NOT IN (SELECT trace_id, project FROM ` + s.traceIndexTable + ` WHERE day >= toDate(?, 'UTC'))`
	var n uint64
	if err := s.queryRow(ctx, "SELECT count() FROM ("+missing+")", since, since).Scan(&n); err != nil {
		return 0, fmt.Errorf("find traces missing from the trace index since %s: %w", since.Format(time.RFC3339), err)
	}
	if n == 0 {
		return 0, nil
	}
	if err := s.conn.Exec(ctx, "INSERT INTO "+s.traceIndexTable+" ("+traceIndexColumns+") "+missing+" SETTINGS insert_deduplicate = 0", since, since); err != nil {
		return 0, fmt.Errorf("repair the trace index since %s (%d traces): %w", since.Format(time.RFC3339), n, err)
	}
	return n, nil
}
