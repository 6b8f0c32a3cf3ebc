package contextlayer

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// countingCounter is Estimate that counts how often it is asked.
type countingCounter struct {
	mu    sync.Mutex
	calls int
}

func (c *countingCounter) Name() string { return "counting" }

func (c *countingCounter) Count(text string) int {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return Estimate{}.Count(text)
}

// The memo answers exactly what its counter answers, asks the counter
// once per long text, and stays bounded.
func TestMemoCountsAsItsCounterOncePerText(t *testing.T) {
	inner := &countingCounter{}
	m := newMemo(inner)
	if newMemo(m) != m {
		t.Fatal("a memo of a memo is a second memo")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"token", "budget", "the", "{\"json\": 1}", "naïve", "日本語", "\n", "    "}
	texts := make([]string, 300)
	for i := range texts {
		var b strings.Builder
		for j := rng.IntN(80); j >= 0; j-- {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
		}
		texts[i] = b.String()
	}
	long := 0
	for _, s := range texts {
		if len(s) >= 64 {
			long++
		}
	}
	for round := 0; round < 3; round++ {
		for _, s := range texts {
			if got, want := m.Count(s), (Estimate{}).Count(s); got != want {
				t.Fatalf("memo counts %d for %q, its counter %d", got, s, want)
			}
		}
	}
	short := len(texts) - long
	if want := long + 3*short; inner.calls != want {
		t.Fatalf("counter asked %d times, want %d (each long text once, short ones every time)", inner.calls, want)
	}
	for i := 0; i < memoEntries+10; i++ {
		m.Count(strings.Repeat("x", 64) + string(rune('a'+i%26)) + strings.Repeat("y", i%97) + string(rune(i)))
	}
	if len(m.counts) > memoEntries {
		t.Fatalf("memo holds %d entries, bound %d", len(m.counts), memoEntries)
	}
}
