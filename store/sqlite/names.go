package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"modernc.org/sqlite"
)

// The names of a trace's spans (lower-cased), what a list's Text filter
// matches, are kept in its summary row (traces.names_lower). Versions
// before 9 wrote them as text, each name followed by namesSep (~90 bytes a
// 10-span trace, a tenth of what the trace stores in all); version 9
// writes a blob of the names' ids in span_names (uvarints, ascending), and
// the filter finds the ids whose name holds the text first, then the
// traces holding one of them (loom_any_id). Both forms are read.

// spanNameCache maps span_names both ways. Guarded by the store's
// writeMu; cleared when a write's transaction fails (its new names are
// gone with it).
type spanNameCache struct {
	ids   map[string]int64
	names map[int64]string
}

func (c *spanNameCache) clear() {
	c.ids, c.names = nil, nil
}

func (c *spanNameCache) add(id int64, name string) {
	if c.ids == nil || len(c.ids) > 1<<16 {
		c.ids, c.names = map[string]int64{}, map[int64]string{}
	}
	c.ids[name], c.names[id] = id, name
}

// spanNamesValue is the names_lower value of names (lower-cased, sorted),
// adding the names span_names lacks.
func (s *Store) spanNamesValue(ctx context.Context, tx *sql.Tx, names []string) ([]byte, error) {
	ids := make([]int64, 0, len(names))
	for _, n := range names {
		id, ok := s.spanNames.ids[n]
		if !ok {
			if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO span_names (name) VALUES (?)`, n); err != nil {
				return nil, fmt.Errorf("add span name %q: %w", n, err)
			}
			if err := tx.QueryRowContext(ctx, `SELECT id FROM span_names WHERE name = ?`, n).Scan(&id); err != nil {
				return nil, fmt.Errorf("look up span name %q: %w", n, err)
			}
			s.spanNames.add(id, n)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return appendIDs(make([]byte, 0, len(ids)*2), ids), nil
}

// namesText is the version 8 form of names_lower.
func namesText(names []string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n)
		b.WriteString(namesSep)
	}
	return b.String()
}

func appendIDs(dst []byte, ids []int64) []byte {
	for _, id := range ids {
		dst = binary.AppendUvarint(dst, uint64(id))
	}
	return dst
}

// readSpanNames adds the names of a stored names_lower value (ids: the
// blob form) to dst.
func (s *Store) readSpanNames(ctx context.Context, tx *sql.Tx, v string, ids bool, dst map[string]struct{}) error {
	if !ids {
		for _, n := range strings.Split(v, namesSep) {
			if n != "" {
				dst[n] = struct{}{}
			}
		}
		return nil
	}
	r := &creader{b: v}
	for r.pos < len(v) && r.err == nil {
		id := int64(r.uvarint())
		n, ok := s.spanNames.names[id]
		if !ok {
			if err := tx.QueryRowContext(ctx, `SELECT name FROM span_names WHERE id = ?`, id).Scan(&n); err != nil {
				return fmt.Errorf("span name %d: %w", id, err)
			}
			s.spanNames.add(id, n)
		}
		dst[n] = struct{}{}
	}
	return r.err
}

// textFilter is the list filter of a Text query (normName'd): the traces
// whose names hold it.
func (s *Store) textFilter(ctx context.Context, text string) (listFilter, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT id FROM span_names WHERE instr(name, ?) > 0 ORDER BY id`, text)
	if err != nil {
		return listFilter{}, fmt.Errorf("find span names: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return listFilter{}, fmt.Errorf("find span names: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return listFilter{}, fmt.Errorf("find span names: %w", err)
	}
	return listFilter{
		walk:     "CASE WHEN typeof(names_lower) = 'text' THEN instr(names_lower, ?) > 0 ELSE loom_any_id(names_lower, ?) END",
		walkArgs: []any{text, appendIDs([]byte{}, ids)},
	}, nil
}

func init() {
	// loom_any_id(ids, wanted): whether two ascending uvarint lists of ids
	// share one.
	sqlite.MustRegisterDeterministicScalarFunction("loom_any_id", 2, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		a, _ := args[0].([]byte)
		b, _ := args[1].([]byte)
		ra, rb := &creader{b: string(a)}, &creader{b: string(b)}
		if len(a) == 0 || len(b) == 0 {
			return int64(0), nil
		}
		x, y := ra.uvarint(), rb.uvarint()
		for ra.err == nil && rb.err == nil {
			switch {
			case x == y:
				return int64(1), nil
			case x < y:
				if ra.pos >= len(a) {
					return int64(0), nil
				}
				x = ra.uvarint()
			default:
				if rb.pos >= len(b) {
					return int64(0), nil
				}
				y = rb.uvarint()
			}
		}
		return nil, fmt.Errorf("loom_any_id: malformed id list")
	})
}
