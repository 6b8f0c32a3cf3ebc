package sqlite

import (
	"container/list"

	"github.com/loomwork/loomwork/store"
)

// builderCacheSpans bounds the spans the builder cache holds (each about
// 700 bytes: the span's typed fields and its index entries, so ~90 MB at
// most): enough for a 100,000-span trace being exported in batches and
// the recent small ones; a bigger trace is kept alone.
const builderCacheSpans = 128_000

// builderCache keeps the summary builders of recently written traces, so a
// trace that arrives in many batches costs each batch its own size: neither
// its stored spans nor its summary are read again. Least recently written
// traces go first. Guarded by the store's writeMu.
//
// A cached builder is trusted only while it holds as many spans as the
// trace's stored row counts (another process writing the same file, or a
// rolled-back batch, would break that; writeRows then rebuilds it from the
// stored spans), and writeRows takes builders out while it uses them and
// puts them back only after its transaction commits.
type builderCache struct {
	byTrace map[int64]*list.Element
	lru     list.List // of *cachedBuilder, most recent at the front
	spans   int
}

type cachedBuilder struct {
	seq   int64
	b     *store.SummaryBuilder
	convs map[string]struct{} // conversation ids of the trace's spans (compact traces)
}

func newBuilderCache() *builderCache {
	return &builderCache{byTrace: map[int64]*list.Element{}}
}

// take removes and returns trace seq's builder and conversation ids, nil
// when none is cached.
func (c *builderCache) take(seq int64) (*store.SummaryBuilder, map[string]struct{}) {
	e, ok := c.byTrace[seq]
	if !ok {
		return nil, nil
	}
	cb := e.Value.(*cachedBuilder)
	c.lru.Remove(e)
	delete(c.byTrace, seq)
	c.spans -= cb.b.Len()
	return cb.b, cb.convs
}

// put caches a builder, evicting the least recently written ones beyond the
// bound. A builder larger than the bound is kept alone (a huge trace still
// being exported is the one that most needs it).
func (c *builderCache) put(seq int64, b *store.SummaryBuilder, convs map[string]struct{}) {
	c.byTrace[seq] = c.lru.PushFront(&cachedBuilder{seq: seq, b: b, convs: convs})
	c.spans += b.Len()
	for c.spans > builderCacheSpans && c.lru.Len() > 1 {
		last := c.lru.Back()
		cb := last.Value.(*cachedBuilder)
		c.lru.Remove(last)
		delete(c.byTrace, cb.seq)
		c.spans -= cb.b.Len()
	}
}

func (c *builderCache) clear() {
	clear(c.byTrace)
	c.lru.Init()
	c.spans = 0
}
