package sqlite

import (
	"bytes"
	"database/sql/driver"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"modernc.org/sqlite"

	"github.com/loomwork/loomwork/store"
)

// Attribute search of traces in compact blocks (migration 0009): such a
// trace has no search_terms rows, so a list query tests its spans. Two SQL
// functions, registered with the driver once, do it for one clause
// (a matcher, registered for the query's lifetime and named by a number
// the query binds):
//
//	loom_match(matcher, block_id, trace_id, project, data) is 1 when a
//	span of the trace in the block satisfies the clause; data is the
//	block's blob, or NULL when
//	loom_cached(matcher, block_id) said the matcher holds the block
//	decoded already (the traces of a batch share blocks: the query reads
//	and decodes each block once, not once per trace).
//
// The test is store.TraceMatchesSearch's rule, the reference every
// backend's search agrees with.

// matcher is one clause being tested during one query.
type matcher struct {
	codec  *codec
	clause store.SearchClause // never OpNe: planList splits it
	// needle, when set, is text a trace's payloads must hold to satisfy
	// the clause (a value or key as JSON writes it), unless field is set
	// and one of its spans has the value in that typed field (an
	// attribute equal to a typed field is left out of the payload): a
	// trace with neither is rejected without decoding its payloads.
	needle []byte
	field  func(sp *store.Span) any

	mu     sync.Mutex
	blocks map[int64]*matchBlock
}

// matchBlock is a decoded block; its traces' spans are decoded in full
// the first time one is tested (spans[i] for segment i).
type matchBlock struct {
	b     *cblock
	spans [][]store.Span
}

// needleOf is the text the payloads of a trace satisfying c must hold,
// or nil when there is none to require, and the typed field that may hold
// the value instead: a document id (in the payload's document lists), a
// string attribute's value (or, for an attribute that is also a typed
// field, that field's), or an attribute key (not one that is also a
// typed field: the payload leaves it out; a number or a boolean has more
// than one spelling).
func needleOf(c store.SearchClause) ([]byte, func(sp *store.Span) any) {
	var field func(sp *store.Span) any
	for _, d := range derivedAttrs {
		if d.key == c.Key {
			field = d.field
		}
	}
	switch {
	case c.Field == store.FieldRetrieved || c.Field == store.FieldCited || c.Field == store.FieldEvidence:
		return store.AppendJSONString(nil, c.Value), nil
	case c.Field != store.FieldAttr:
		return nil, nil
	case c.Op == store.OpEq && !c.IsNum && c.Value != "true" && c.Value != "false":
		return store.AppendJSONString(nil, c.Value), field
	case field != nil:
		return nil, nil
	default:
		return append(store.AppendJSONString(nil, c.Key), ':'), nil
	}
}

// matcherCacheBlocks bounds the blocks a matcher keeps decoded.
const matcherCacheBlocks = 64

var (
	matchers    sync.Map // int64 → *matcher
	matcherNext atomic.Int64
)

// newMatcher registers a matcher for clause; release unregisters it.
func newMatcher(c *codec, clause store.SearchClause) (id int64, release func()) {
	id = matcherNext.Add(1)
	needle, field := needleOf(clause)
	matchers.Store(id, &matcher{codec: c, clause: clause, needle: needle, field: field, blocks: map[int64]*matchBlock{}})
	return id, func() { matchers.Delete(id) }
}

func init() {
	sqlite.MustRegisterScalarFunction("loom_cached", 2, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		m, err := matcherOf(args[0])
		if err != nil {
			return nil, err
		}
		id, _ := args[1].(int64)
		m.mu.Lock()
		_, ok := m.blocks[id]
		m.mu.Unlock()
		if ok {
			return int64(1), nil
		}
		return int64(0), nil
	})
	sqlite.MustRegisterScalarFunction("loom_match", 5, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		m, err := matcherOf(args[0])
		if err != nil {
			return nil, err
		}
		id, _ := args[1].(int64)
		traceID, _ := args[2].([]byte)
		project, _ := args[3].(string)
		data, _ := args[4].([]byte)
		ok, err := m.match(id, traceID, project, data)
		if err != nil {
			return nil, err
		}
		if ok {
			return int64(1), nil
		}
		return int64(0), nil
	})
}

func matcherOf(v driver.Value) (*matcher, error) {
	id, _ := v.(int64)
	m, ok := matchers.Load(id)
	if !ok {
		return nil, fmt.Errorf("search matcher %d is not registered", id)
	}
	return m.(*matcher), nil
}

// match tests the spans of trace (traceID, project) in block id.
func (m *matcher) match(id int64, traceID []byte, project string, data []byte) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mb, ok := m.blocks[id]
	if !ok {
		if data == nil {
			return false, fmt.Errorf("span block %d: no data and not decoded", id)
		}
		plain, err := m.codec.unpackOwned(data)
		if err != nil {
			return false, fmt.Errorf("span block %d: %w", id, err)
		}
		b, err := decodeCompact(plain, true)
		if err != nil {
			return false, fmt.Errorf("span block %d: %w", id, err)
		}
		if len(m.blocks) >= matcherCacheBlocks {
			clear(m.blocks)
		}
		mb = &matchBlock{b: b}
		m.blocks[id] = mb
	}
	k := mb.b.segIndex(traceID, project)
	if k < 0 {
		return false, nil
	}
	sg := &mb.b.segs[k]
	if mb.spans == nil {
		mb.spans = make([][]store.Span, len(mb.b.segs))
	}
	spans := mb.spans[k]
	if spans == nil {
		var cs []cspan
		var err error
		if m.needle != nil && !bytes.Contains(mb.b.segPayloads(sg), m.needle) {
			if m.field == nil {
				return false, nil
			}
			if cs, err = mb.b.segSpans(k); err != nil {
				return false, fmt.Errorf("span block %d: %w", id, err)
			}
			if !slices.ContainsFunc(cs, func(c cspan) bool { return m.field(&c.span) == any(m.clause.Value) }) {
				return false, nil
			}
		}
		if cs == nil {
			if cs, err = mb.b.segSpans(k); err != nil {
				return false, fmt.Errorf("span block %d: %w", id, err)
			}
		}
		spans = make([]store.Span, len(cs))
		var d payloadDecoder
		for i := range cs {
			spans[i] = cs[i].span
			if m.clause.Field == store.FieldName {
				continue // the name is a typed field
			}
			d.reset(mb.b.payload(&cs[i]), true)
			if err := d.decode(&spans[i]); err != nil {
				return false, fmt.Errorf("span block %d: span %s: %w", id, spans[i].SpanID, err)
			}
		}
		mb.spans[k] = spans
	}
	return store.TraceMatchesSearch(spans, []store.SearchClause{m.clause}), nil
}
