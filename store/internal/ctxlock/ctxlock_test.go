package ctxlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLockWaitsForUnlockOrGivesUpWithTheContext(t *testing.T) {
	m := New()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Lock(done); err != nil {
		t.Fatalf("a free mutex must be taken even with a done context: %v", err)
	}
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer stop()
	if err := m.Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a held mutex: %v, want the context's deadline", err)
	}
	go func() { time.Sleep(10 * time.Millisecond); m.Unlock() }()
	if err := m.Lock(context.Background()); err != nil {
		t.Fatalf("after Unlock: %v", err)
	}
}
