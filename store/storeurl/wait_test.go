package storeurl

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
)

// TestWaitForServerKeepsTryingAClickHouseThatHangsUp: a ClickHouse URL
// whose server hangs up on every connection fails at once by default, and
// with WaitForServer is tried again and again until the caller's context
// ends. (That a waited open succeeds once the server answers is
// store/clickhouse's TestStartWaitsForAServerThatHangsUpUntilItAnswersOrTheContextEnds.)
func TestWaitForServerKeepsTryingAClickHouseThatHangsUp(t *testing.T) {
	addr, accepted := chtest.HangUpFirst(t, 1<<30, "") // hangs up on every connection
	url := "clickhouse://" + addr + "/loomwork"

	if _, err := OpenWithLogger(context.Background(), url, false, nil); err == nil {
		t.Fatal("opening a ClickHouse that hangs up succeeded")
	}
	once := accepted.Load()

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := OpenWithLogger(ctx, url, false, nil, WaitForServer(time.Hour))
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waited open of a ClickHouse that always hangs up: %v; want the context's deadline", err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("the waited open gave up after %s, before its context's 1.5 s", d)
	}
	if n := accepted.Load() - once; n < 3 {
		t.Errorf("the waited open connected %d times; want it to keep trying", n)
	}
}
