package clickhouse

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// Trace summaries kept at ingest (migration 9). WriteSpans, once a batch's
// spans are stored, adds them to each trace's store.SummaryBuilder and
// writes the trace's summary (store.Summarize's figures, its call groups
// and what the list filters read) to traces: one row per trace
// per batch, of which ReplacingMergeTree keeps the one with the most spans
// (version) and readers read FINAL. A list then reads one row per trace,
// whatever the trace's size.
//
// The builders are cached, so a trace written in many batches costs each
// batch its own size. A trace not in the cache is looked up in
// traces: when it has a row (a restart, an evicted builder), its
// builder is rebuilt from its stored spans; when not, it is new. The
// builders assume one writer per trace: two collectors writing batches of
// one trace at the same moment can each write a summary missing the
// other's spans (the next batch of the trace, or Start's repair, mends it
// only when the row's span count is found short).

// summaryColumns is the insert column list of the traces table; summaryRows
// appends in this order.
const summaryColumns = `project, trace_id, version, start, end, duration_ns, after_root_ns, root_name, service_name,
	services, agents, models, labels, names, names_complete, sessions, fragments, span_count, error_count,
	model_calls, failed_model_calls, tool_calls, input_tokens, output_tokens, cache_read_tokens,
	cache_creation_tokens, reasoning_tokens, tokens_total, call_groups, expire_at`

// versionSummaries is the schema version that added the traces table: a
// store opened at an older one (a migration test) keeps no summaries.
const versionSummaries = 9

// maxSummaryNames bounds the span names a summary row lists; a trace with
// more is marked names_complete = false and the Text filter reads its spans.
const maxSummaryNames = 512

// summaryCacheSpans bounds the spans the builder cache holds (about 700
// bytes each): a 200,000-span trace being exported in batches and the
// recent small ones. A bigger trace is kept alone.
const summaryCacheSpans = 256_000

// traceState is what the cache keeps of one trace: its builder and the
// sets a summary row lists that the builder does not.
type traceState struct {
	key           traceKey
	b             *store.SummaryBuilder
	names         map[string]struct{}
	namesComplete bool
	services      map[string]struct{}
	sessions      map[string]struct{}
	expire        time.Time
}

func newTraceState(k traceKey) *traceState {
	return &traceState{key: k, b: store.NewSummaryBuilder(), names: map[string]struct{}{}, namesComplete: true,
		services: map[string]struct{}{}, sessions: map[string]struct{}{}}
}

// add adds a stored span's light copy.
func (t *traceState) note(sp *store.Span) {
	if sp.Name != "" && t.namesComplete {
		if _, ok := t.names[sp.Name]; !ok {
			if len(t.names) == maxSummaryNames {
				t.namesComplete = false
			} else {
				t.names[sp.Name] = struct{}{}
			}
		}
	}
	if sp.ServiceName != "" {
		t.services[sp.ServiceName] = struct{}{}
	}
	if sp.ConversationID != "" {
		t.sessions[sp.ConversationID] = struct{}{}
	}
}

// summaryCache holds the trace states, least recently written evicted
// first beyond summaryCacheSpans. mu also serialises updates, so two
// concurrent writes of one trace add to one builder in turn.
type summaryCache struct {
	mu      sync.Mutex
	byKey   map[traceKey]*list.Element
	lru     list.List // of *traceState, most recent at the front
	spans   int
	pending map[traceKey]struct{} // summaries whose insert failed
	intern  map[string]string     // low-cardinality strings of light spans
}

func (c *summaryCache) get(k traceKey) *traceState {
	if c.byKey == nil {
		return nil
	}
	e, ok := c.byKey[k]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(e)
	return e.Value.(*traceState)
}

// put caches t (already holding its spans) or, when cached, refreshes its
// size; then evicts beyond the bound.
func (c *summaryCache) put(t *traceState, before int) {
	if c.byKey == nil {
		c.byKey = map[traceKey]*list.Element{}
	}
	if e, ok := c.byKey[t.key]; ok {
		c.lru.MoveToFront(e)
		c.spans += t.b.Len() - before
	} else {
		c.byKey[t.key] = c.lru.PushFront(t)
		c.spans += t.b.Len()
	}
	for c.spans > summaryCacheSpans && c.lru.Len() > 1 {
		last := c.lru.Back()
		if last.Value.(*traceState) == t {
			// The trace just written is the largest and last: keep it
			// alone.
			c.lru.MoveToFront(last)
			last = c.lru.Back()
		}
		old := last.Value.(*traceState)
		c.lru.Remove(last)
		delete(c.byKey, old.key)
		c.spans -= old.b.Len()
	}
}

// str interns s when it is short (names, services, models: a handful of
// distinct values), else clones it: a light span must not point into a
// write's buffers, which are reused.
func (c *summaryCache) str(s string) string {
	if s == "" {
		return ""
	}
	if len(s) > 64 {
		return strings.Clone(s)
	}
	if v, ok := c.intern[s]; ok {
		return v
	}
	if c.intern == nil || len(c.intern) > 1<<16 {
		c.intern = map[string]string{}
	}
	v := strings.Clone(s)
	c.intern[v] = v
	return v
}

// lightBatch collects a write's spans per trace, as light copies.
type lightBatch struct {
	order  []traceKey
	spans  map[traceKey][]store.Span
	expire map[traceKey]time.Time
}

// collect adds p's spans; c interns their strings. Called under c.mu.
func (lb *lightBatch) collect(c *summaryCache, p *PreparedSpans) {
	if lb.spans == nil {
		lb.spans, lb.expire = map[traceKey][]store.Span{}, map[traceKey]time.Time{}
	}
	for i := range p.spans {
		sp := &p.spans[i]
		k := traceKey{c.str(sp.Project), strings.Clone(sp.TraceID)}
		if _, ok := lb.spans[k]; !ok {
			lb.order = append(lb.order, k)
		}
		light := store.Span{
			TraceID: k.traceID, SpanID: strings.Clone(sp.SpanID), ParentSpanID: strings.Clone(sp.ParentSpanID),
			Name: c.str(sp.Name), StartTime: sp.StartTime, EndTime: sp.EndTime, StatusCode: c.str(sp.StatusCode),
			ServiceName: c.str(sp.ServiceName), Operation: c.str(sp.Operation), RequestModel: c.str(sp.RequestModel),
			ResponseModel: c.str(sp.ResponseModel), AgentName: c.str(sp.AgentName), ConversationID: c.str(sp.ConversationID),
			HasUsage: sp.HasUsage, InputTokens: sp.InputTokens, OutputTokens: sp.OutputTokens,
			CacheReadTokens: sp.CacheReadTokens, CacheCreationTokens: sp.CacheCreationTokens, ReasoningTokens: sp.ReasoningTokens,
			CostUSD: sp.ExplicitCost(),
		}
		if l := modelLabel(p, i); l != "" {
			light.Attributes = store.Attributes{semconv.AttrModelLabel: c.str(l)}
		}
		lb.spans[k] = append(lb.spans[k], light)
		if e := p.traces.expiryOf(sp); e.After(lb.expire[k]) {
			lb.expire[k] = e
		}
	}
}

// labelKeyJSON is the model label's key as attribute JSON spells it.
var labelKeyJSON = append(store.AppendJSONString(nil, semconv.AttrModelLabel), ':')

// modelLabel is span i's model label: what encode found in its attributes
// or a spool record of format 4 says, or, for a span decoded from an
// older spool record (which keeps the attribute JSON, not the map), from
// that JSON when it holds the key.
func modelLabel(p *PreparedSpans, i int) string {
	if p.hasKeys {
		return p.labels[i] // encode's, or the spool record's (format 4)
	}
	sp := &p.spans[i]
	if sp.Attributes != nil {
		l, _ := sp.Attributes.String(semconv.AttrModelLabel)
		return l
	}
	if i >= len(p.attrAt) {
		return ""
	}
	js := p.arena[p.attrAt[i].from:p.attrAt[i].to]
	if !bytes.Contains(js, labelKeyJSON) {
		return ""
	}
	var a store.Attributes
	if err := json.Unmarshal(js, &a); err != nil {
		return "" // stored as given; the summary lists no label
	}
	l, _ := a.String(semconv.AttrModelLabel)
	return l
}

// summaryRows are the rows of one insert into the traces table, column by column.
type summaryRows struct {
	project, traceID, rootName, service, groups []string
	version                                     []uint64
	start, end, expire                          []time.Time
	duration, afterRoot, fragments, spans       []int64
	errors, calls, failed, tools                []int64
	in, out, cacheRead, cacheCreation, reason   []int64
	total                                       []int64
	services, agents, models, labels, names     [][]string
	namesComplete                               []bool
	sessions                                    [][]string
}

func (r *summaryRows) add(t *traceState) {
	sum := t.b.Figures()
	r.project = append(r.project, t.key.project)
	r.traceID = append(r.traceID, t.key.traceID)
	r.version = append(r.version, uint64(sum.SpanCount))
	r.start = append(r.start, sum.Start)
	r.end = append(r.end, sum.End)
	r.duration = append(r.duration, int64(sum.Duration))
	r.afterRoot = append(r.afterRoot, int64(sum.AfterRoot))
	r.rootName = append(r.rootName, sum.RootName)
	r.service = append(r.service, sum.ServiceName)
	r.services = append(r.services, sortedKeys(t.services))
	r.agents = append(r.agents, nonNil(sum.AgentNames))
	r.models = append(r.models, nonNil(sum.Models))
	r.labels = append(r.labels, nonNil(sum.ModelLabels))
	r.names = append(r.names, sortedKeys(t.names))
	r.namesComplete = append(r.namesComplete, t.namesComplete)
	r.sessions = append(r.sessions, sortedKeys(t.sessions))
	r.fragments = append(r.fragments, sum.Fragments)
	r.spans = append(r.spans, sum.SpanCount)
	r.errors = append(r.errors, sum.ErrorCount)
	r.calls = append(r.calls, sum.ModelCalls)
	r.failed = append(r.failed, sum.FailedModelCalls)
	r.tools = append(r.tools, sum.ToolCalls)
	r.in = append(r.in, sum.InputTokens)
	r.out = append(r.out, sum.OutputTokens)
	r.cacheRead = append(r.cacheRead, sum.CacheReadTokens)
	r.cacheCreation = append(r.cacheCreation, sum.CacheCreationTokens)
	r.reason = append(r.reason, sum.ReasoningTokens)
	r.total = append(r.total, sum.InputTokens+sum.OutputTokens)
	r.groups = append(r.groups, groupsJSON(sum.Groups))
	exp := t.expire
	if exp.IsZero() {
		exp = keepForever
	}
	r.expire = append(r.expire, exp)
}

func (r *summaryRows) columns() []any {
	return []any{r.project, r.traceID, r.version, r.start, r.end, r.duration, r.afterRoot, r.rootName, r.service,
		r.services, r.agents, r.models, r.labels, r.names, r.namesComplete, r.sessions, r.fragments, r.spans, r.errors,
		r.calls, r.failed, r.tools, r.in, r.out, r.cacheRead, r.cacheCreation, r.reason, r.total, r.groups, r.expire}
}

func groupsJSON(gs []store.CallGroup) string {
	if len(gs) == 0 {
		return "[]"
	}
	b, err := json.Marshal(gs)
	if err != nil {
		return "[]" // strings and integers: always marshals
	}
	return string(b)
}

func sortedKeys(m map[string]struct{}) []string {
	out := slices.Collect(maps.Keys(m))
	slices.Sort(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// summariesOn reports whether the schema has the traces table.
func (s *Store) summariesOn() bool { return s.schema >= versionSummaries }

// writeSummaries adds a stored batch's spans to their traces' builders and
// writes the traces' summaries, and those of earlier failed writes. On a
// failed insert the traces stay pending: written before the next write.
func (s *Store) writeSummaries(ctx context.Context, lb *lightBatch) error {
	c := &s.summaries
	c.mu.Lock()
	var rows summaryRows
	keys, err := s.updateStates(ctx, lb, &rows)
	if err != nil {
		c.hold(lb.order)
		c.mu.Unlock()
		return fmt.Errorf("trace summaries: %w", err)
	}
	c.mu.Unlock()
	if len(keys) == 0 {
		return nil
	}
	ictx := ch.Context(ctx, ch.WithSettings(ch.Settings{"insert_deduplicate": 0}))
	if err := s.insert(ictx, s.summaryTable, summaryColumns, rows.columns(), len(keys)); err != nil {
		c.mu.Lock()
		c.hold(keys)
		c.mu.Unlock()
		return fmt.Errorf("trace summaries: %w", err)
	}
	return nil
}

// hold marks traces whose summary was not written: the next write writes
// them (their builders rebuilt from the stored spans if not cached).
func (c *summaryCache) hold(keys []traceKey) {
	if c.pending == nil {
		c.pending = map[traceKey]struct{}{}
	}
	for _, k := range keys {
		c.pending[k] = struct{}{}
	}
}

// updateStates adds lb to the cached states, loading the traces not
// cached, and appends the summary rows of lb's traces and the pending
// ones to rows, returning their keys. Called under summaries.mu.
func (s *Store) updateStates(ctx context.Context, lb *lightBatch, rows *summaryRows) ([]traceKey, error) {
	c := &s.summaries
	want := slices.Clone(lb.order)
	for k := range c.pending {
		if _, ok := lb.spans[k]; !ok {
			want = append(want, k)
		}
	}
	var missing, reread []traceKey
	for _, k := range want {
		switch _, held := c.pending[k]; {
		case c.get(k) != nil:
		case held:
			// Its last write may have stored spans before failing
			// anywhere: read them whether or not it has a row.
			reread = append(reread, k)
		default:
			missing = append(missing, k)
		}
	}
	loaded, err := s.loadStates(ctx, missing, reread, lb)
	if err != nil {
		return nil, err
	}
	for _, k := range want {
		t := c.get(k)
		before := 0
		if t == nil {
			if t = loaded[k]; t == nil {
				t = newTraceState(k)
			}
		} else {
			before = t.b.Len()
		}
		if spans := lb.spans[k]; len(spans) > 0 {
			fresh := spans[:0:0]
			for i := range spans {
				if !t.b.Has(spans[i].SpanID) {
					fresh = append(fresh, spans[i])
					t.note(&spans[i])
				}
			}
			t.b.Add(fresh)
			if e := lb.expire[k]; e.After(t.expire) {
				t.expire = e
			}
		}
		c.put(t, before)
		rows.add(t)
		delete(c.pending, k)
	}
	return want, nil
}

// loadStates returns the states of the traces keys that have a summary
// row and of every trace of reread, rebuilt from their stored spans (the
// batch's own included, as they are stored by now); a trace of keys
// without a row is new and absent from the result. Its queries are scoped
// to each key's project.
func (s *Store) loadStates(ctx context.Context, keys, reread []traceKey, lb *lightBatch) (map[traceKey]*traceState, error) {
	if len(keys)+len(reread) == 0 {
		return nil, nil
	}
	byProject := map[string][]string{}
	for _, k := range keys {
		byProject[k.project] = append(byProject[k.project], k.traceID)
	}
	known := map[string][]string{}
	for _, k := range reread {
		known[k.project] = append(known[k.project], k.traceID)
	}
	for project, ids := range byProject {
		pc := "project = " + quoteString(project)
		for chunk := range slices.Chunk(ids, idsPerQuery) {
			found, err := s.knownTraces(ctx, pc, chunk)
			if err != nil {
				return nil, fmt.Errorf("look up %d traces: %w", len(chunk), err)
			}
			known[project] = append(known[project], found...)
		}
	}
	out := map[traceKey]*traceState{}
	for project, ids := range known {
		for chunk := range slices.Chunk(ids, idsPerQuery) {
			if err := s.readStates(ctx, "project = "+quoteString(project), chunk, func(t *traceState) { out[t.key] = t }); err != nil {
				return nil, fmt.Errorf("read stored spans of %d traces: %w", len(chunk), err)
			}
		}
		for _, id := range ids {
			k := traceKey{project, id}
			if out[k] == nil {
				out[k] = newTraceState(k)
			}
			if e := lb.expire[k]; e.After(out[k].expire) {
				out[k].expire = e
			}
		}
	}
	return out, nil
}

// idsPerQuery bounds the trace ids one look-up names: the driver binds
// them into the query's text, which ClickHouse caps at max_query_size
// (256 KiB by default, ~7,000 quoted ids), and a spool batch after an
// outage names far more.
const idsPerQuery = 2000

// knownTraces returns which of ids (of the project pc selects) have a
// summary row.
func (s *Store) knownTraces(ctx context.Context, pc string, ids []string) ([]string, error) {
	rows, err := s.query(ctx, "SELECT DISTINCT trace_id FROM "+s.summaryTable+" WHERE "+pc+" AND trace_id IN (?)", ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		found = append(found, id)
	}
	return found, rows.Err()
}

// stateColumns are what a trace's state is rebuilt from, per span.
const stateColumns = `trace_id, span_id, parent_span_id, toString(name), start, end, toString(status_code),
	toString(service_name), toString(operation), toString(request_model), toString(response_model),
	toString(agent_name), conversation_id, has_usage, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens,
	reasoning_tokens, cost_usd, JSONExtractString(attributes, ?) AS model_label, expire_at`

// readStates rebuilds the states of the traces ids (of the project pc
// selects) from their stored spans, each span once (FINAL), calling fn
// with each. Rows come ordered by trace, so one trace's spans are held at
// a time besides the states.
func (s *Store) readStates(ctx context.Context, pc string, ids []string, fn func(*traceState)) error {
	q := "SELECT " + stateColumns + ", project FROM " + s.spansTable + " FINAL WHERE " + pc + " AND trace_id IN (?) ORDER BY trace_id"
	rows, err := s.query(ctx, q, semconv.AttrModelLabel, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	var cur *traceState
	var spans []store.Span
	flush := func() {
		if cur != nil {
			cur.b.Add(spans)
			fn(cur)
		}
		spans = spans[:0]
	}
	for rows.Next() {
		var sp store.Span
		var label, proj string
		var expire time.Time
		if err := rows.Scan(&sp.TraceID, &sp.SpanID, &sp.ParentSpanID, &sp.Name, &sp.StartTime, &sp.EndTime, &sp.StatusCode,
			&sp.ServiceName, &sp.Operation, &sp.RequestModel, &sp.ResponseModel, &sp.AgentName, &sp.ConversationID,
			&sp.HasUsage, &sp.InputTokens, &sp.OutputTokens, &sp.CacheReadTokens, &sp.CacheCreationTokens,
			&sp.ReasoningTokens, &sp.CostUSD, &label, &expire, &proj); err != nil {
			return err
		}
		sp.StartTime, sp.EndTime = sp.StartTime.UTC(), sp.EndTime.UTC()
		if label != "" {
			sp.Attributes = store.Attributes{semconv.AttrModelLabel: label}
		}
		if cur == nil || cur.key.traceID != sp.TraceID {
			flush()
			cur = newTraceState(traceKey{proj, sp.TraceID})
		}
		cur.note(&sp)
		if expire.After(cur.expire) {
			cur.expire = expire
		}
		spans = append(spans, sp)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	flush()
	return nil
}

// backfillChunk is how many traces one backfill read summarises.
const backfillChunk = 2000

// backfillSummaries writes the summary of every trace in trace_index that
// has no summary row (since is zero) or none among those with index rows
// from since's day on: migration 9 runs it over every stored trace, Start
// over Config.IndexRepairWindow (a write that stored spans and failed
// before its summary, never retried). Traces are summarised from their
// stored spans in time order, backfillChunk at a time, so each read stays
// within a few hours of spans. It returns how many it wrote.
func (s *Store) backfillSummaries(ctx context.Context, since time.Time) (int, error) {
	q := "SELECT project, trace_id, min(start) AS first FROM " + s.traceIndexTable
	var args []any
	if !since.IsZero() {
		q += " WHERE day >= toDate(?, 'UTC')"
		args = append(args, since.UTC())
	}
	q += " GROUP BY project, trace_id"
	q += " HAVING (project, trace_id) NOT IN (SELECT project, trace_id FROM " + s.summaryTable
	if !since.IsZero() {
		q += " WHERE start >= ?"
		args = append(args, since.UTC().Add(-24*time.Hour))
	}
	q += ") ORDER BY first"
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("find traces without a summary: %w", err)
	}
	type todo struct {
		key   traceKey
		first time.Time
	}
	var all []todo
	for rows.Next() {
		var t todo
		if err := rows.Scan(&t.key.project, &t.key.traceID, &t.first); err != nil {
			rows.Close()
			return 0, fmt.Errorf("find traces without a summary: %w", err)
		}
		all = append(all, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("find traces without a summary: %w", err)
	}
	if len(all) == 0 {
		return 0, nil
	}
	total := len(all)
	s.log.Info("trace store: summarising stored traces for the lists", "database", s.ddl.database, "traces", total)
	started := time.Now()
	for len(all) > 0 {
		n := min(len(all), backfillChunk)
		chunk := all[:n]
		all = all[n:]
		byProject := map[string][]string{}
		for _, t := range chunk {
			byProject[t.key.project] = append(byProject[t.key.project], t.key.traceID)
		}
		var sr summaryRows
		count := 0
		for project, ids := range byProject {
			pc := "project = " + quoteString(project) + " AND start >= fromUnixTimestamp64Nano(" + fmt.Sprint(chunk[0].first.UnixNano()) + ")"
			if err := s.readStates(ctx, pc, ids, func(t *traceState) { sr.add(t); count++ }); err != nil {
				return 0, fmt.Errorf("summarise stored traces: %w", err)
			}
		}
		if count == 0 {
			continue
		}
		ictx := ch.Context(ctx, ch.WithSettings(ch.Settings{"insert_deduplicate": 0}))
		if err := s.insert(ictx, s.summaryTable, summaryColumns, sr.columns(), count); err != nil {
			return 0, fmt.Errorf("summarise stored traces: %w", err)
		}
	}
	s.log.Info("trace store: stored traces summarised", "database", s.ddl.database, "took", time.Since(started).Round(time.Millisecond))
	return total, nil
}
