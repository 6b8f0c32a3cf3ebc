package contextlayer

import (
	"crypto/sha256"
	"sync"
)

// memoEntries bounds a memo; when full it starts afresh (the counts of one
// conversation fit many times over).
const memoEntries = 8192

// memo remembers a counter's counts. Apply counts the same messages many
// times (the whole conversation before and after each stage, each
// candidate cut of a summary), and a count is a function of the text
// alone, so every number the layer sees is still the counter's own. Keys
// are digests, so the memo holds no conversation text. Safe for
// concurrent use.
type memo struct {
	c      Counter
	mu     sync.Mutex
	counts map[[sha256.Size]byte]int
}

func newMemo(c Counter) *memo {
	if m, ok := c.(*memo); ok {
		return m
	}
	return &memo{c: c, counts: make(map[[sha256.Size]byte]int)}
}

// Name implements Counter.
func (m *memo) Name() string { return m.c.Name() }

// Count implements Counter.
func (m *memo) Count(text string) int {
	if len(text) < 64 {
		return m.c.Count(text) // cheaper than a digest
	}
	k := sha256.Sum256([]byte(text))
	m.mu.Lock()
	n, ok := m.counts[k]
	m.mu.Unlock()
	if ok {
		return n
	}
	n = m.c.Count(text)
	m.mu.Lock()
	if len(m.counts) >= memoEntries {
		clear(m.counts)
	}
	m.counts[k] = n
	m.mu.Unlock()
	return n
}
