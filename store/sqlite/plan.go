package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/loomwork/loomwork/store"
)

// How a page of the trace list is found (migration 0008 gave every sort
// key an index led by the project). There are two ways:
//
//   - walk the sort key's index in the page's order, testing each trace
//     against every filter without another index of traces (a filter on
//     a column of traces reads the row; a filter on a set of traces —
//     a tag, a session, a search clause — probes that set's primary key
//     for the trace), and stop after a page: fast when matches are common;
//   - drive from the most selective filter's own index (a range of
//     traces_by_errors, traces_by_duration or traces_by_start, or the
//     primary key of the set), at most selectiveRows traces, and sort
//     them: fast when matches are rare.
//
// SQLite's planner cannot tell the two apart (it does not know how many
// traces a value matches), so planList counts, for each filter that has
// an index of its own, up to selectiveRows matches, and drives from the
// smallest count below it; otherwise it walks. INDEXED BY and NOT INDEXED
// hold SQLite to the chosen way, so a page never sorts more than
// selectiveRows summaries nor reads the whole table.

// selectiveRows is the most traces a driving filter may match: they are
// read and sorted (a few milliseconds); a filter matching more is tested
// during the walk instead, which then finds a page among its first few
// thousand traces.
const selectiveRows = 2000

// sortIndexes maps store.Sort* names to the traces column ordering by
// them and its index.
var sortIndexes = map[string]struct{ col, index string }{
	store.SortStart:    {"start_ns", "traces_by_start"},
	store.SortDuration: {"duration_ns", "traces_by_duration"},
	store.SortSpans:    {"span_count", "traces_by_spans"},
	store.SortErrors:   {"error_count", "traces_by_errors"},
	store.SortTokens:   {"tokens_total", "traces_by_tokens"},
}

// listFilter is one filter of a list query.
type listFilter struct {
	// walk tests a trace during the walk, using no index of traces (a
	// column read from the row, or a probe of another table's key).
	walk     string
	walkArgs []any
	// index is the traces index the filter is a range of ("" for none);
	// when it is the sort index, the walk uses index instead.
	index     string
	indexCond string
	indexArgs []any
	// drive selects the filter's traces from another table (set, by
	// its primary key), for a NOT INDEXED scan by rowid; "" for none.
	drive     string
	driveArgs []any
	set       string
	// count counts up to selectiveRows+1 of the filter's matches (for
	// filters with index or drive), unless est, when positive, already
	// bounds them.
	count     string
	countArgs []any
	est       int
}

// queryPlan is one page's query.
type queryPlan struct {
	store.PlannedQuery
	sql  string
	args []any
	// via names the way: "walk <index>" or "drive <what>", for the plan
	// tests and the benchmark.
	via string
	// release unregisters the query's search matchers (match.go): call
	// it once the query is done.
	release func()
}

// planList validates q and builds the SQL for one page of project's
// traces, choosing the way (see above) by counting the selective filters'
// matches.
func (s *Store) planList(ctx context.Context, q *store.TraceQuery, project string) (queryPlan, error) {
	var p queryPlan
	var err error
	if p.PlannedQuery, err = q.Plan(func(t time.Time) error {
		_, err := unixNanos(t)
		return err
	}); err != nil {
		return p, err
	}
	sk, ok := sortIndexes[p.SortBy]
	if !ok {
		return p, fmt.Errorf("sort_by %q is not supported by the embedded store", p.SortBy)
	}
	var releases []func()
	p.release = func() {
		for _, r := range releases {
			r()
		}
	}
	filters, err := s.listFilters(ctx, &p.TraceQuery, project, &releases)
	if err != nil {
		p.release()
		return p, err
	}
	// The cheapest driver, if one is selective enough.
	best, bestN := -1, selectiveRows+1
	for i, f := range filters {
		if (f.count == "" && f.est == 0) || (f.index != "" && f.index == sk.index) {
			continue
		}
		n := f.est
		if f.count != "" {
			if err := s.reader.QueryRowContext(ctx, f.count, f.countArgs...).Scan(&n); err != nil {
				p.release()
				return p, fmt.Errorf("estimate a filter: %w", err)
			}
		}
		if n < bestN {
			best, bestN = i, n
		}
	}
	from := "INDEXED BY " + sk.index
	where := []string{"project = ?"}
	args := []any{project}
	p.via = "walk " + sk.index
	for i, f := range filters {
		switch {
		case i == best && f.index != "":
			from = "INDEXED BY " + f.index
			p.via = "drive " + f.index
			where = append(where, f.indexCond)
			args = append(args, f.indexArgs...)
		case i == best:
			from = "NOT INDEXED"
			p.via = "drive " + f.set
			if f.est > 0 {
				p.via += fmt.Sprintf(" (%d candidate traces)", f.est)
			}
			where = append(where, f.drive)
			args = append(args, f.driveArgs...)
		case f.index == sk.index && f.index != "":
			where = append(where, f.indexCond)
			args = append(args, f.indexArgs...)
		default:
			where = append(where, f.walk)
			args = append(args, f.walkArgs...)
		}
	}
	dir, cmp := "DESC", "<"
	if q.Ascending {
		dir, cmp = "ASC", ">"
	}
	if p.After != nil {
		where = append(where, fmt.Sprintf("(%s, trace_id) %s (?, ?)", sk.col, cmp))
		args = append(args, p.After.SortValue, p.After.TraceID[:])
	}
	p.sql = fmt.Sprintf(`SELECT trace_id, root_name, service_name, agent_names, models,
	start_ns, end_ns, duration_ns, span_count, error_count, model_calls, tool_calls,
	input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens,
	after_root_ns, fragments, failed_model_calls, model_labels, call_groups, %s
	FROM traces %s WHERE %s ORDER BY %s %s, trace_id %s LIMIT %d`,
		sk.col, from, strings.Join(where, " AND "), sk.col, dir, dir, p.Limit+1)
	p.args = args
	return p, nil
}

// countSQL counts up to selectiveRows+1 rows of a selection.
func countSQL(sel string) string {
	return fmt.Sprintf("SELECT count(*) FROM (%s LIMIT %d)", sel, selectiveRows+1)
}

// listFilters returns q's filters (other than the sort and page).
func (s *Store) listFilters(ctx context.Context, q *store.TraceQuery, project string, releases *[]func()) ([]listFilter, error) {
	var fs []listFilter
	// The time range is one filter: a range of traces_by_start.
	if !q.Start.IsZero() || !q.End.IsZero() {
		var conds, walk []string
		var args []any
		if !q.Start.IsZero() {
			conds, walk = append(conds, "start_ns >= ?"), append(walk, "+start_ns >= ?")
			args = append(args, q.Start.UnixNano())
		}
		if !q.End.IsZero() {
			conds, walk = append(conds, "start_ns < ?"), append(walk, "+start_ns < ?")
			args = append(args, q.End.UnixNano())
		}
		cond := strings.Join(conds, " AND ")
		fs = append(fs, listFilter{
			walk: strings.Join(walk, " AND "), walkArgs: args,
			index: "traces_by_start", indexCond: cond, indexArgs: args,
			count:     countSQL("SELECT 1 FROM traces INDEXED BY traces_by_start WHERE project = ? AND " + cond),
			countArgs: append([]any{project}, args...),
		})
	}
	for _, t := range []struct {
		kind int
		col  string
		val  string
	}{{tagService, "services", q.Service}, {tagAgent, "agent_names", q.Agent}, {tagModel, "models", q.Model}} {
		if t.val != "" {
			f, err := s.tagFilter(ctx, t.kind, t.col, t.val)
			if err != nil {
				return nil, err
			}
			fs = append(fs, f)
		}
	}
	if q.Session != "" {
		fs = append(fs, setFilter("session_turns", "project = ? AND session = ?", []any{project, q.Session}))
	}
	switch q.Status {
	case store.StatusOK:
		fs = append(fs, columnFilter("error_count", "traces_by_errors", "= 0", nil, project))
	case store.StatusError:
		fs = append(fs, columnFilter("error_count", "traces_by_errors", "> 0", nil, project))
	}
	if q.MinDuration > 0 {
		fs = append(fs, columnFilter("duration_ns", "traces_by_duration", ">= ?", []any{int64(q.MinDuration)}, project))
	}
	if q.Text != "" {
		f, err := s.textFilter(ctx, normName(q.Text))
		if err != nil {
			return nil, err
		}
		fs = append(fs, f)
	}
	sf, err := s.searchFilters(ctx, q, releases)
	if err != nil {
		return nil, err
	}
	return append(fs, sf...), nil
}

// tagFilter is "the trace's tags of kind (its summary's list col) hold
// val": tested on the list during a walk (for a JSON list of version 8, an
// element follows '[' or ',', and a quote within a JSON string is
// escaped, so '["val"' or ',"val"' is exactly an element; for ids, val's),
// driven from the search blooms' chunks when they name few (the tags are
// in the blooms, under their own kinds).
func (s *Store) tagFilter(ctx context.Context, kind int, col, val string) (listFilter, error) {
	quoted := store.AppendJSONString(nil, val)
	id, err := s.idOf(ctx, val)
	if err != nil {
		return listFilter{}, err
	}
	args := []any{"[" + string(quoted), "," + string(quoted), appendIDs([]byte{}, []int64{id})}
	// A list of version 8 is JSON text, one since version 9 ids
	// (names.go).
	cond := func(t string) string {
		return "CASE WHEN typeof(" + t + col + ") = 'text' THEN instr(" + t + col + ", ?) > 0 OR instr(" + t + col + ", ?) > 0 " +
			"ELSE loom_any_id(" + t + col + ", ?) END"
	}
	f := listFilter{walk: cond(""), walkArgs: args}
	var key int64
	switch err := s.reader.QueryRowContext(ctx, `SELECT id FROM search_keys WHERE kind = ? AND key = ''`, tagSearchKind(kind)).Scan(&key); {
	case errors.Is(err, sql.ErrNoRows):
		return listFilter{walk: "0"}, nil // no trace has such a tag
	case err != nil:
		return f, fmt.Errorf("look up a tag's search key: %w", err)
	}
	cand, _, err := s.bloomCandidates(ctx, []uint64{termHash(key, tagText, []byte(val))})
	if err != nil {
		return f, fmt.Errorf("read search blooms: %w", err)
	}
	if n := len(cand) << bloomChunkShift; n <= selectiveRows {
		f.drive, f.driveArgs = bloomDriver(cand, cond("c."), args)
		f.set, f.est = "tag blooms", max(n, 1)
	}
	return f, nil
}

// setFilter is membership of the set of traces (seq) the rows of table
// matching cond (a prefix of its primary key, then seq) hold.
func setFilter(table, cond string, args []any) listFilter {
	return listFilter{
		walk: "EXISTS (SELECT 1 FROM " + table + " WHERE " + cond + " AND seq = traces.seq)", walkArgs: args,
		drive: "seq IN (SELECT seq FROM " + table + " WHERE " + cond + ")", driveArgs: args, set: table,
		count: countSQL("SELECT 1 FROM " + table + " WHERE " + cond), countArgs: args,
	}
}

// columnFilter is "col op" over traces, a range of index.
func columnFilter(col, index, op string, args []any, project string) listFilter {
	return listFilter{
		walk: "+" + col + " " + op, walkArgs: args,
		index: index, indexCond: col + " " + op, indexArgs: args,
		count:     countSQL("SELECT 1 FROM traces INDEXED BY " + index + " WHERE project = ? AND " + col + " " + op),
		countArgs: append([]any{project}, args...),
	}
}

// searchFilters returns a filter per search clause, each testing the
// trace's search terms by their primary key (key, trace, value).
func (s *Store) searchFilters(ctx context.Context, q *store.TraceQuery, releases *[]func()) ([]listFilter, error) {
	var fs []listFilter
	keyID := func(kind int, key string) (int64, error) {
		var id int64
		err := s.reader.QueryRowContext(ctx, `SELECT id FROM search_keys WHERE kind = ? AND key = ?`, kind, key).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil // no span ever had it
		}
		return id, err
	}
	// term is "a term of keys (ids, 0 for none) whose value satisfies
	// test", negated when not: for a trace in span rows, a probe of its
	// search terms; for one in compact blocks (match.go), clause tested
	// on its spans. hashes are the search blooms' hashes of the terms that
	// can satisfy it (none: the blooms cannot tell); rangeOp, when set,
	// is the comparison of clause.Num the search ranges can tell.
	term := func(not bool, keys []int64, hashes func(key int64) []uint64, rangeOp string, clause store.SearchClause, test string, testArgs ...any) error {
		keys = slices.DeleteFunc(keys, func(k int64) bool { return k == 0 })
		if len(keys) == 0 {
			cond := "0"
			if not {
				cond = "1"
			}
			fs = append(fs, listFilter{walk: cond})
			return nil
		}
		in := "key_id = ?"
		if len(keys) > 1 {
			in = "key_id IN " + inList(len(keys))
		}
		m, release := newMatcher(s.codec, clause)
		*releases = append(*releases, release)
		args := []any{m, m}
		for _, k := range keys {
			args = append(args, k)
		}
		args = append(args, testArgs...)
		op := "EXISTS"
		if not {
			op = "NOT EXISTS"
		}
		cond := func(t string) string {
			return "CASE WHEN " + t + ".compact THEN " + op + " (SELECT 1 FROM trace_blocks tb WHERE tb.trace_seq = " + t + ".seq AND " +
				"loom_match(?, tb.block_id, " + t + ".trace_id, " + t + ".project, " +
				"CASE WHEN loom_cached(?, tb.block_id) THEN NULL ELSE (SELECT data FROM span_blocks WHERE id = tb.block_id) END)) " +
				"ELSE " + op + " (SELECT 1 FROM search_terms WHERE " + in + " AND seq = " + t + ".seq" + andTest(test) + ") END"
		}
		f := listFilter{walk: cond("traces"), walkArgs: args}
		if rangeOp != "" {
			cand, err := s.rangeCandidates(ctx, keys, rangeOp, clause.Num)
			if err != nil {
				return fmt.Errorf("read search ranges: %w", err)
			}
			if n := len(cand) << bloomChunkShift; n <= selectiveRows {
				f.drive, f.driveArgs = bloomDriver(cand, cond("c"), args)
				f.set, f.est = "search ranges", max(n, 1)
			}
		}
		if !not && hashes != nil {
			var hs []uint64
			for _, k := range keys {
				hs = append(hs, hashes(k)...)
			}
			cand, _, err := s.bloomCandidates(ctx, hs)
			if err != nil {
				return fmt.Errorf("read search blooms: %w", err)
			}
			if n := len(cand) << bloomChunkShift; n <= selectiveRows {
				f.drive, f.driveArgs = bloomDriver(cand, cond("c"), args)
				f.set, f.est = "search blooms", max(n, 1)
			}
		}
		fs = append(fs, f)
		return nil
	}
	text := func(v string) func(int64) []uint64 {
		return func(k int64) []uint64 { return []uint64{termHash(k, tagText, []byte(v))} }
	}
	for _, c := range q.Search {
		var kinds []int
		key := ""
		switch c.Field {
		case store.FieldName:
			kinds = []int{searchName}
		case store.FieldRetrieved:
			kinds = []int{searchRetrieved}
		case store.FieldCited:
			kinds = []int{searchCited}
		case store.FieldEvidence:
			kinds = []int{searchRetrieved, searchCited}
		case store.FieldAttr:
			kinds, key = []int{searchAttr}, c.Key
		}
		var keys []int64
		for _, k := range kinds {
			id, err := keyID(k, key)
			if err != nil {
				return nil, fmt.Errorf("look up search key %q: %w", key, err)
			}
			keys = append(keys, id)
		}
		if c.Field != store.FieldAttr {
			if err := term(false, keys, text(c.Value), "", c, "value = ?", c.Value); err != nil {
				return nil, err
			}
			continue
		}
		// The value is text, or a number when it reads as one (a
		// string attribute "42" and a number 42 both equal "42").
		eq, eqArgs, eqHashes := "value = ?", []any{c.Value}, text(c.Value)
		if c.IsNum {
			eq, eqArgs = "(value = ? OR value = ?)", []any{c.Value, c.Num}
			eqHashes = func(k int64) []uint64 { return []uint64{termHash(k, tagText, []byte(c.Value)), numHash(k, c.Num)} }
		}
		keySet := func(k int64) []uint64 { return []uint64{keySetHash(k)} }
		exists, eqc := c, c
		exists.Op, eqc.Op = store.OpExists, store.OpEq
		var err error
		switch c.Op {
		case store.OpExists:
			err = term(false, keys, keySet, "", exists, "")
		case store.OpEq:
			err = term(false, keys, eqHashes, "", eqc, eq, eqArgs...)
		case store.OpNe:
			if err = term(false, keys, keySet, "", exists, ""); err == nil {
				err = term(true, keys, nil, "", eqc, eq, eqArgs...)
			}
		default:
			op := map[store.SearchOp]string{store.OpGt: ">", store.OpGe: ">=", store.OpLt: "<", store.OpLe: "<="}[c.Op]
			err = term(false, keys, nil, op, c, "typeof(value) IN ('integer', 'real') AND value "+op+" ?", c.Num)
		}
		if err != nil {
			return nil, err
		}
	}
	return fs, nil
}
