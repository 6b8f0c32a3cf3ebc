package web

import (
	"container/list"
	"sync"
	"unsafe"

	"github.com/loomwork/loomwork/store"
)

// DefaultTraceCacheBytes is the trace cache's budget when Config leaves it
// zero.
const DefaultTraceCacheBytes = 256 << 20

// traceCache keeps recently used traces (spans, rollup, waterfall index) in
// memory up to a byte budget, by an estimate of each trace's size
// (traceBytes), evicting the least recently used first. A trace larger than
// the whole budget is not kept: the caller serves it and reads it again
// next time.
type traceCache struct {
	mu     sync.Mutex
	budget int64
	used   int64                    // the sum of the entries' bytes; never above budget
	lru    *list.List               // of *cacheEntry, most recently used first
	byID   map[string]*list.Element // trace id → its element in lru
}

type cacheEntry struct {
	id    string
	trace cachedTrace
}

func newTraceCache(budget int64) *traceCache {
	return &traceCache{budget: budget, lru: list.New(), byID: map[string]*list.Element{}}
}

// get returns the cached trace and marks it most recently used.
func (c *traceCache) get(id string) (cachedTrace, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byID[id]
	if !ok {
		return cachedTrace{}, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cacheEntry).trace, true
}

// put stores t under id (replacing what was there), evicting least
// recently used traces until it fits. It reports whether t was kept: a
// trace larger than the budget is not, and any older copy of it is
// dropped.
func (c *traceCache) put(id string, t cachedTrace) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byID[id]; ok {
		c.remove(el)
	}
	if t.bytes > c.budget {
		return false
	}
	for c.used+t.bytes > c.budget {
		c.remove(c.lru.Back())
	}
	c.byID[id] = c.lru.PushFront(&cacheEntry{id: id, trace: t})
	c.used += t.bytes
	return true
}

func (c *traceCache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*cacheEntry)
	delete(c.byID, e.id)
	c.used -= e.trace.bytes
}

// clear empties the cache.
func (c *traceCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Init()
	clear(c.byID)
	c.used = 0
}

// stats returns the accounted bytes and the number of cached traces.
func (c *traceCache) stats() (used int64, traces int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, c.lru.Len()
}

// The estimate's unit costs, in bytes on a 64-bit build.
// TestTraceBytesEstimateTracksTheHeap measures the heap a loaded trace
// really takes (read from SQLite, rolled up and indexed) and checks
// traceBytes against it.
const (
	// traceFixed is a trace's share beyond its spans: the rollup's and the
	// index's headers and maps, the cache entry.
	traceFixed = 2 << 10
	// spanFixed is one span's share beyond its strings and attributes: the
	// store.Span struct, its entries in the waterfall index (the id map,
	// children, depth and descendant slices) and in the rollup.
	spanFixed = int64(unsafe.Sizeof(store.Span{})) + 300
	// attrEntry is one attribute's map slot and the value's interface box.
	attrEntry = 48
	// attrMap is an attribute map's header and first group.
	attrMap = 64
	// sliceElem is a string header or interface in a slice.
	sliceElem  = 16
	eventFixed = int64(unsafe.Sizeof(store.Event{}))
	linkFixed  = int64(unsafe.Sizeof(store.Link{}))
)

// traceBytes estimates the memory a cached trace holds, in one pass over
// its spans: a fixed share per trace and per span, and each span's strings,
// attributes, events and links. Measured on SQLite reads it is within about
// 15% of the heap a loaded trace takes, for 3-span to 20,000-span traces.
func traceBytes(spans []store.Span) int64 {
	n := int64(traceFixed)
	for i := range spans {
		s := &spans[i]
		n += spanFixed + int64(len(s.TraceID)+len(s.SpanID)+len(s.ParentSpanID)+len(s.TraceState)+len(s.Name)+
			len(s.Kind)+len(s.StatusCode)+len(s.StatusMessage)+len(s.ServiceName)+len(s.ScopeName)+len(s.ScopeVersion)+
			len(s.Operation)+len(s.Provider)+len(s.RequestModel)+len(s.ResponseModel)+len(s.AgentName)+
			len(s.ConversationID)+len(s.ToolName)+len(s.ToolCallID))
		if s.CostUSD != nil {
			n += 8
		}
		n += stringsBytes(s.RetrievedDocs) + stringsBytes(s.CitedDocs)
		// Scope attributes are a copy per span, as resource attributes are;
		// the schema URL strings are shared by the spans of a scope.
		n += attrsBytes(s.Attributes) + attrsBytes(s.ResourceAttributes) + attrsBytes(s.ScopeAttributes)
		for j := range s.Events {
			n += eventFixed + int64(len(s.Events[j].Name)) + attrsBytes(s.Events[j].Attributes)
		}
		for j := range s.Links {
			l := &s.Links[j]
			n += linkFixed + int64(len(l.TraceID)+len(l.SpanID)+len(l.TraceState)) + attrsBytes(l.Attributes)
		}
	}
	return n
}

func stringsBytes(ss []string) int64 {
	n := int64(len(ss)) * sliceElem
	for _, s := range ss {
		n += int64(len(s))
	}
	return n
}

func attrsBytes(a map[string]any) int64 {
	if a == nil {
		return 0
	}
	n := int64(attrMap)
	for k, v := range a {
		n += attrEntry + int64(len(k)) + valueBytes(v)
	}
	return n
}

// valueBytes is an attribute value's size beyond its interface: string
// data, a boxed number, or (recursively) an array's or map's contents.
func valueBytes(v any) int64 {
	switch t := v.(type) {
	case string:
		return 16 + int64(len(t))
	case int64, float64:
		return 8
	case []any:
		n := int64(24 + len(t)*sliceElem)
		for _, x := range t {
			n += valueBytes(x)
		}
		return n
	case map[string]any:
		return attrsBytes(t)
	case store.Attributes:
		return attrsBytes(t)
	default: // bool and anything unexpected
		return 0
	}
}
