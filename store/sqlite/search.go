package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/loomwork/loomwork/store"
)

// Kinds of search key (search_keys.kind, migration 0003).
const (
	searchAttr         = 1
	searchName         = 2
	searchRetrieved    = 3
	searchCited        = 4
	searchConversation = 5
	// The trace tags (version 9): in the search blooms only, under these
	// kinds (with key ''), for the list's service, agent and model
	// filters.
	searchService = 6
	searchAgent   = 7
	searchModel   = 8
)

// tagSearchKind is the search key kind of a tag kind.
func tagSearchKind(tag int) int {
	return map[int]int{tagService: searchService, tagAgent: searchAgent, tagModel: searchModel}[tag]
}

// searchKey names a search key: a kind and, for attributes, the key.
type searchKey struct {
	kind int
	key  string
}

// searchTermsHead is the multi-row insert of search terms (see bulkInsert).
// OR IGNORE: a trace's later batches repeat values it already has.
const searchTermsHead = `INSERT OR IGNORE INTO search_terms (key_id, seq, value) VALUES `

// setOnly is the value of a term recording only that a key is set (to
// something searches do not compare): the empty blob, which SQLite never
// equates with text or a number.
var setOnly = []byte{}

// exactInt is the largest integer magnitude a double holds exactly.
const exactInt = 1 << 53

// termValues calls add with the search value(s) of attribute value v.
func termValues(v any, add func(any)) {
	switch t := v.(type) {
	case string:
		if len(t) <= store.MaxSearchValue {
			add(t)
			return
		}
	case bool:
		add(strconv.FormatBool(t))
		return
	case int64:
		add(searchInt(t))
		return
	case int:
		add(searchInt(int64(t)))
		return
	case float64:
		if !math.IsNaN(t) && !math.IsInf(t, 0) {
			add(t)
			return
		}
	case []any:
		n := 0
		for _, e := range t {
			switch e.(type) {
			case []any, map[string]any, nil:
				continue
			}
			termValues(e, add)
			n++
		}
		if n > 0 {
			return
		}
	}
	add(setOnly)
}

// searchInt stores an integer so that comparing it with a double query
// value compares doubles, as the search contract says: exactly when the
// double is exact, else as its double.
func searchInt(n int64) any {
	if n >= -exactInt && n <= exactInt {
		return n
	}
	return float64(n)
}

// indexSearch writes the search terms of each group's newly inserted spans.
// It runs in writeRows' transaction, after the spans and summaries.
func (s *Store) indexSearch(ctx context.Context, tx *sql.Tx, groups []*traceGroup) error {
	ins := s.newBulkInsert(tx, searchTermsHead, 3)
	type term struct {
		key int64
		val any
	}
	blooms := bloomAdds{}
	ranges := rangeAdds{}
	for _, g := range groups {
		if len(g.inserted) == 0 {
			continue
		}
		seen := map[term]struct{}{}
		keys := map[int64]struct{}{}
		var keyErr error
		add := func(k searchKey, v any) {
			if keyErr != nil {
				return
			}
			id, err := s.searchKeyID(ctx, tx, k)
			if err != nil {
				keyErr = err
				return
			}
			// []byte is not comparable: the set-only blob is keyed as nil.
			mk := term{id, v}
			if b, ok := v.([]byte); ok && len(b) == 0 {
				mk.val = nil
			}
			if _, dup := seen[mk]; dup {
				return
			}
			seen[mk] = struct{}{}
			if _, ok := keys[id]; !ok {
				keys[id] = struct{}{}
				blooms.add(g.sm.seq, keySetHash(id))
			}
			if h, ok := valueHash(id, v); ok {
				blooms.add(g.sm.seq, h)
			}
			switch n := v.(type) {
			case int64:
				ranges.add(id, g.sm.seq, float64(n))
			case float64:
				ranges.add(id, g.sm.seq, n)
			}
			// A compact trace keeps no terms: a search tests its spans.
			if !g.compact {
				ins.args = append(ins.args, id, g.sm.seq, v)
				keyErr = ins.rowAdded(ctx)
			}
		}
		for _, t := range g.newTags {
			id, err := s.searchKeyID(ctx, tx, searchKey{tagSearchKind(t.kind), ""})
			if err != nil {
				return fmt.Errorf("index trace %x for search: %w", g.traceID, err)
			}
			blooms.add(g.sm.seq, termHash(id, tagText, []byte(t.value)))
		}
		// A trace moved to span rows gets the terms of its stored spans.
		for _, r := range append(g.converted[:len(g.converted):len(g.converted)], g.inserted...) {
			sp := r.span
			add(searchKey{searchName, ""}, sp.Name)
			for k, v := range sp.Attributes {
				key := searchKey{searchAttr, k}
				termValues(v, func(x any) { add(key, x) })
			}
			for _, d := range sp.RetrievedDocs {
				add(searchKey{searchRetrieved, ""}, d)
			}
			for _, d := range sp.CitedDocs {
				add(searchKey{searchCited, ""}, d)
			}
			if sp.ConversationID != "" {
				add(searchKey{searchConversation, ""}, sp.ConversationID)
			}
		}
		if keyErr != nil {
			return fmt.Errorf("index trace %x for search: %w", g.traceID, keyErr)
		}
	}
	if err := ins.flush(ctx); err != nil {
		return fmt.Errorf("index spans for search: %w", err)
	}
	if err := blooms.write(ctx, tx); err != nil {
		return fmt.Errorf("index spans for search: blooms: %w", err)
	}
	if err := ranges.write(ctx, tx); err != nil {
		return fmt.Errorf("index spans for search: ranges: %w", err)
	}
	return nil
}

// searchKeyID returns the id of k, adding it to search_keys when new. Ids
// are cached on the store; WritePrepared clears the cache when a
// transaction fails (its new keys are gone with it).
func (s *Store) searchKeyID(ctx context.Context, tx *sql.Tx, k searchKey) (int64, error) {
	if id, ok := s.searchKeys[k]; ok {
		return id, nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO search_keys (kind, key) VALUES (?, ?)`, k.kind, k.key); err != nil {
		return 0, fmt.Errorf("add search key %q: %w", k.key, err)
	}
	var id int64
	if err := tx.QueryRowContext(ctx, `SELECT id FROM search_keys WHERE kind = ? AND key = ?`, k.kind, k.key).Scan(&id); err != nil {
		return 0, fmt.Errorf("look up search key %q: %w", k.key, err)
	}
	if len(s.searchKeys) > 1<<16 {
		clear(s.searchKeys)
	}
	s.searchKeys[k] = id
	return id, nil
}

// errSearchBackfill is returned for a search while traces stored before
// the search index existed are still being indexed.
var errSearchBackfill = errors.New("the search index is still being built for traces stored before this version (open the store read-write once, e.g. with loom-eval serve, and let it finish)")

// searchReady fails while the search index misses older traces.
func (s *Store) searchReady(ctx context.Context, q *store.TraceQuery) error {
	if len(q.Search) == 0 && q.Session == "" {
		return nil
	}
	return s.searchComplete(ctx)
}

func (s *Store) searchComplete(ctx context.Context) error {
	var below int64
	switch err := s.reader.QueryRowContext(ctx, `SELECT below_seq FROM search_backfill`).Scan(&below); {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("check the search index: %w", err)
	}
	return fmt.Errorf("%w: %d traces left", errSearchBackfill, below-1)
}

// backfillChunk is how many traces one backfill transaction indexes.
const backfillChunk = 256

// backfillSearch indexes the traces stored before the search index
// existed (migration 0003 records how many), newest first, a chunk per
// transaction, so an interrupted backfill resumes where it stopped.
func (s *Store) backfillSearch(ctx context.Context) error {
	var below int64
	switch err := s.writer.QueryRowContext(ctx, `SELECT below_seq FROM search_backfill`).Scan(&below); {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("read search backfill state: %w", err)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.prepareBulk(ctx); err != nil {
		return err
	}
	start := time.Now()
	total := below - 1
	s.log.Info("trace store: indexing stored traces for search", "path", s.cfg.Path, "traces", total)
	for below > 1 {
		next, err := s.backfillChunk(ctx, below)
		if err != nil {
			clear(s.searchKeys)
			return fmt.Errorf("index stored traces for search: %w", err)
		}
		below = next
	}
	s.log.Info("trace store: search index built", "path", s.cfg.Path, "traces", total, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// backfillChunk indexes up to backfillChunk traces below seq below and
// returns the new bound.
func (s *Store) backfillChunk(ctx context.Context, below int64) (int64, error) {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT seq, trace_id, span_count, project FROM traces WHERE seq < ? ORDER BY seq DESC LIMIT ?`, below, backfillChunk)
	if err != nil {
		return 0, err
	}
	type tr struct {
		seq, count int64
		id         []byte
		project    string
	}
	var trs []tr
	for rows.Next() {
		var t tr
		if err := rows.Scan(&t.seq, &t.id, &t.count, &t.project); err != nil {
			rows.Close()
			return 0, err
		}
		trs = append(trs, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	next := int64(1)
	var groups []*traceGroup
	for _, t := range trs {
		id := hex.EncodeToString(t.id)
		spans, meta, err := readSpanRows(ctx, tx, t.seq, id, t.count)
		if err != nil {
			return 0, fmt.Errorf("trace %s: %w", id, err)
		}
		if err := s.readPayloads(ctx, tx, spans, meta); err != nil {
			return 0, fmt.Errorf("trace %s: %w", id, err)
		}
		g := &traceGroup{traceID: t.id, project: t.project, sm: &summary{seq: t.seq}}
		for i := range spans {
			g.inserted = append(g.inserted, &spanRow{span: &spans[i]})
		}
		groups = append(groups, g)
		next = t.seq
	}
	if err := s.indexSearch(ctx, tx, groups); err != nil {
		return 0, err
	}
	if err := s.updateSessions(ctx, tx, groups); err != nil {
		return 0, err
	}
	if next <= 1 {
		_, err = tx.ExecContext(ctx, `DELETE FROM search_backfill`)
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE search_backfill SET below_seq = ?`, next)
	}
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return next, nil
}
