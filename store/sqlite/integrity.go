package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// EachStoredSpan calls fn with the trace and span id of every span record
// the store holds, in no particular order: each span row, and each span of
// a compact block in the segment of a trace that lists the block
// (trace_blocks). A span stored twice, which the store's rules forbid, is
// passed twice: this is for checks that count what is stored (the
// reliability suite's "every acknowledged span exactly once"), not for
// reading traces, and it reads the tables as they are rather than through
// the rules the reads apply.
func (s *Store) EachStoredSpan(ctx context.Context, fn func(traceID [16]byte, spanID [8]byte)) error {
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("stored spans: %w", err)
	}
	defer tx.Rollback()
	if err := eachSpanRow(ctx, tx, fn); err != nil {
		return fmt.Errorf("stored spans: span rows: %w", err)
	}
	if err := s.eachBlockSpan(ctx, tx, fn); err != nil {
		return fmt.Errorf("stored spans: compact blocks: %w", err)
	}
	return nil
}

func eachSpanRow(ctx context.Context, tx *sql.Tx, fn func([16]byte, [8]byte)) error {
	rows, err := tx.QueryContext(ctx, `SELECT t.trace_id, s.span_id FROM spans s JOIN traces t ON t.seq = s.trace_seq`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var tid, sid []byte
		if err := rows.Scan(&tid, &sid); err != nil {
			return err
		}
		var t [16]byte
		var sp [8]byte
		if len(tid) != len(t) || len(sid) != len(sp) {
			return fmt.Errorf("a span row's ids are %d and %d bytes, want 16 and 8", len(tid), len(sid))
		}
		copy(t[:], tid)
		copy(sp[:], sid)
		fn(t, sp)
	}
	return rows.Err()
}

// eachBlockSpan passes the spans of each (trace, block) trace_blocks
// lists, decoding each block once (the rows come in block order).
func (s *Store) eachBlockSpan(ctx context.Context, tx *sql.Tx, fn func([16]byte, [8]byte)) error {
	rows, err := tx.QueryContext(ctx, `SELECT b.block_id, t.trace_id, t.project FROM trace_blocks b JOIN traces t ON t.seq = b.trace_seq ORDER BY b.block_id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var cur *cblock
	curID := int64(-1)
	for rows.Next() {
		var id int64
		var tid []byte
		var project string
		if err := rows.Scan(&id, &tid, &project); err != nil {
			return err
		}
		if id != curID {
			var packed []byte
			if err := tx.QueryRowContext(ctx, `SELECT data FROM span_blocks WHERE id = ?`, id).Scan(&packed); err != nil {
				return fmt.Errorf("span block %d: %w", id, err)
			}
			plain, err := s.codec.unpackOwned(packed)
			if err != nil {
				return fmt.Errorf("span block %d: %w", id, err)
			}
			if cur, err = decodeCompact(plain, false); err != nil {
				return fmt.Errorf("span block %d: %w", id, err)
			}
			curID = id
		}
		k := cur.segIndex(tid, project)
		if k < 0 {
			return fmt.Errorf("span block %d holds no spans of trace %x, which lists it", id, tid)
		}
		sg := &cur.segs[k]
		for i := sg.start; i < sg.end; i++ {
			var sp [8]byte
			copy(sp[:], cur.ids[8*i:8*i+8])
			fn(sg.traceID, sp)
		}
	}
	return rows.Err()
}
