package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"modernc.org/sqlite"
)

// Summary rows name the same few strings over and over: the root span's
// name and service, the agents, models and services, and the span names
// the Text filter matches (lower-cased). Versions before 9 spelled them
// out (text, JSON lists, names each followed by namesSep: half of a
// 10-span trace's summary row); version 9 keeps each string once in
// summary_strings and a row holds ids (uvarints: one for a name or a
// service, a list for the others, ascending for names_lower). Both forms
// are read: a column's type says which (text: spelled out; blob: ids).

// strDict caches summary_strings both ways. Safe for concurrent use:
// readers resolve ids, the writer (under writeMu) adds strings and clears
// the cache when its transaction fails (its new strings are gone with it).
type strDict struct {
	mu   sync.Mutex
	ids  map[string]int64
	vals map[int64]string
}

func (d *strDict) clear() {
	d.mu.Lock()
	d.ids, d.vals = nil, nil
	d.mu.Unlock()
}

func (d *strDict) add(id int64, v string) {
	if d.ids == nil || len(d.ids) > 1<<16 {
		d.ids, d.vals = map[string]int64{}, map[int64]string{}
	}
	d.ids[v], d.vals[id] = id, v
}

// idsOf returns the ids of vs, adding the strings summary_strings lacks
// in tx.
func (d *strDict) idsOf(ctx context.Context, tx *sql.Tx, vs []string) ([]int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := make([]int64, len(vs))
	for i, v := range vs {
		id, ok := d.ids[v]
		if !ok {
			if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO summary_strings (value) VALUES (?)`, v); err != nil {
				return nil, fmt.Errorf("add summary string %q: %w", v, err)
			}
			if err := tx.QueryRowContext(ctx, `SELECT id FROM summary_strings WHERE value = ?`, v).Scan(&id); err != nil {
				return nil, fmt.Errorf("look up summary string %q: %w", v, err)
			}
			d.add(id, v)
		}
		ids[i] = id
	}
	return ids, nil
}

// value returns the string of id, reading it through q when not cached.
func (d *strDict) value(ctx context.Context, q queryRower, id int64) (string, error) {
	d.mu.Lock()
	v, ok := d.vals[id]
	d.mu.Unlock()
	if ok {
		return v, nil
	}
	if err := q.QueryRowContext(ctx, `SELECT value FROM summary_strings WHERE id = ?`, id).Scan(&v); err != nil {
		return "", fmt.Errorf("summary string %d: %w", id, err)
	}
	d.mu.Lock()
	d.add(id, v)
	d.mu.Unlock()
	return v, nil
}

// encode is the version 9 form of a string column (one id) or list
// column (ids) holding vs.
func (d *strDict) encode(ctx context.Context, tx *sql.Tx, vs []string) ([]byte, error) {
	ids, err := d.idsOf(ctx, tx, vs)
	if err != nil {
		return nil, err
	}
	return appendIDs(make([]byte, 0, 2*len(ids)), ids), nil
}

// list reads a list column: a JSON list (text) or ids (blob).
func (d *strDict) list(ctx context.Context, q queryRower, v any) ([]string, error) {
	switch t := v.(type) {
	case string:
		return decodeList(t)
	case []byte:
		var out []string
		r := &creader{b: string(t)}
		for r.pos < len(t) && r.err == nil {
			s, err := d.value(ctx, q, int64(r.uvarint()))
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, r.err
	case nil:
		return nil, nil
	}
	return nil, fmt.Errorf("summary list of type %T", v)
}

// text reads a string column: text, or one id (blob).
func (d *strDict) text(ctx context.Context, q queryRower, v any) (string, error) {
	switch t := v.(type) {
	case string:
		return t, nil
	case []byte:
		l, err := d.list(ctx, q, t)
		if err != nil || len(l) != 1 {
			return "", fmt.Errorf("summary string: %d ids (%v)", len(l), err)
		}
		return l[0], nil
	}
	return "", fmt.Errorf("summary string of type %T", v)
}

// namesValue is the names_lower value of names (lower-cased): the ids,
// ascending.
func (d *strDict) namesValue(ctx context.Context, tx *sql.Tx, names []string) ([]byte, error) {
	ids, err := d.idsOf(ctx, tx, names)
	if err != nil {
		return nil, err
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

// readNames adds the names of a stored names_lower value to dst.
func (d *strDict) readNames(ctx context.Context, q queryRower, v any, dst map[string]struct{}) error {
	if t, ok := v.(string); ok {
		for _, n := range strings.Split(t, namesSep) {
			if n != "" {
				dst[n] = struct{}{}
			}
		}
		return nil
	}
	l, err := d.list(ctx, q, v)
	for _, n := range l {
		dst[n] = struct{}{}
	}
	return err
}

// idOf returns the id of v in summary_strings, 0 when it has none.
func (s *Store) idOf(ctx context.Context, v string) (int64, error) {
	var id int64
	switch err := s.reader.QueryRowContext(ctx, `SELECT id FROM summary_strings WHERE value = ?`, v).Scan(&id); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("look up summary string %q: %w", v, err)
	}
	return id, nil
}

// textFilter is the list filter of a Text query (normName'd): the traces
// whose names hold it.
func (s *Store) textFilter(ctx context.Context, text string) (listFilter, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT id FROM summary_strings WHERE instr(value, ?) > 0 ORDER BY id`, text)
	if err != nil {
		return listFilter{}, fmt.Errorf("find summary strings: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return listFilter{}, fmt.Errorf("find summary strings: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return listFilter{}, fmt.Errorf("find summary strings: %w", err)
	}
	return listFilter{
		walk:     "CASE WHEN typeof(names_lower) = 'text' THEN instr(names_lower, ?) > 0 ELSE loom_any_id(names_lower, ?) END",
		walkArgs: []any{text, appendIDs([]byte{}, ids)},
	}, nil
}

func init() {
	// loom_any_id(ids, wanted): whether a list of ids (uvarints) holds one
	// of wanted's (uvarints, ascending).
	sqlite.MustRegisterDeterministicScalarFunction("loom_any_id", 2, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		a, _ := args[0].([]byte)
		b, _ := args[1].([]byte)
		var want []uint64
		rb := &creader{b: string(b)}
		for rb.pos < len(b) && rb.err == nil {
			want = append(want, rb.uvarint())
		}
		ra := &creader{b: string(a)}
		for ra.pos < len(a) && ra.err == nil {
			if _, ok := slices.BinarySearch(want, ra.uvarint()); ok && ra.err == nil {
				return int64(1), nil
			}
		}
		if ra.err != nil || rb.err != nil {
			return nil, fmt.Errorf("loom_any_id: malformed id list")
		}
		return int64(0), nil
	})
}
