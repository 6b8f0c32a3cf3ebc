package coord

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestShutdownWhileOperationsRunIsRaceFreeAndLaterOperationsSayClosed runs
// operations from several goroutines while Shutdown closes the
// coordinator (run with -race: Shutdown used to clear the database handle
// the operations read without synchronisation). Every operation after
// Shutdown returned fails with ErrClosed, none panics, and Shutdown stays
// safe to repeat.
func TestShutdownWhileOperationsRunIsRaceFreeAndLaterOperationsSayClosed(t *testing.T) {
	ctx := context.Background()
	c, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "tasks.sqlite")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, TaskSpec{Key: "k0", Kind: "trial"}); err != nil {
		t.Fatal(err)
	}
	ops := map[string]func(i int) error{
		"Enqueue": func(i int) error {
			_, err := c.Enqueue(ctx, TaskSpec{Key: fmt.Sprintf("k%d", i), Kind: "trial"})
			return err
		},
		"Get":       func(int) error { _, err := c.Get(ctx, "k0"); return err },
		"Tasks":     func(int) error { _, err := c.Tasks(ctx, "", true); return err },
		"Count":     func(int) error { _, err := c.Count(ctx, "trial"); return err },
		"Refusals":  func(int) error { _, err := c.Refusals(ctx); return err },
		"Meta":      func(int) error { _, err := c.Meta(ctx, "m"); return err },
		"ClaimNext": func(i int) error { _, err := c.ClaimNext(ctx, "none", "w", time.Second); return err },
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for name, op := range ops {
		wg.Go(func() {
			for i := 1; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := op(i); err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrUnknownTask) {
					// An operation that Shutdown interrupts may fail in
					// the driver; it must still say the coordinator closed.
					t.Errorf("%s during Shutdown: %v, want nil or ErrClosed", name, err)
					return
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if err := c.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()

	for name, op := range ops {
		if err := op(1000); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Shutdown: %v, want ErrClosed", name, err)
		}
	}
	if err := c.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	if err := c.Start(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Shutdown: %v, want ErrClosed", err)
	}
}
