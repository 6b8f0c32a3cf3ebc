package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/loomwork/loomwork/baselines/suite"
	"github.com/loomwork/loomwork/internal/coord"
)

const workerUsage = "worker --coordinator FILE.db [--id ID] [--otlp-endpoint host:4317]"

// runWorker is `loom-eval worker`: claim and run a suite's trials from a
// coordinator database (the coord.db in a `suite run --out` folder) until
// none is left. Several may run at once, on the host that holds the file.
func (m *Main) runWorker(ctx context.Context, args []string) error {
	fs := m.newFlagSet("worker", workerUsage)
	db := fs.String("coordinator", "", "the suite's coordinator `database` (OUT/coord.db of loom-eval suite run)")
	id := fs.String("id", "", "worker name in grants and logs (default: worker-PID); the pid is always appended, so a restarted worker is a new worker")
	endpoint := fs.String("otlp-endpoint", "", "send the trials' spans here instead of the suite's --otlp-endpoint (a worker on another host)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("worker: unexpected argument %q", fs.Arg(0))
	}
	if *db == "" {
		return usageError("worker: --coordinator is required")
	}
	if _, err := os.Stat(*db); err != nil {
		return usageError("worker: --coordinator %s: %v", *db, err)
	}
	name := fmt.Sprintf("worker-%d", os.Getpid())
	if *id != "" {
		name = fmt.Sprintf("%s-%d", *id, os.Getpid())
	}
	c, err := coord.Open(ctx, coord.Config{Path: *db})
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("worker: %w", err)}
	}
	defer c.Shutdown(context.WithoutCancel(ctx))
	def, err := suite.LoadDefinition(ctx, c)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("worker: %w", err)}
	}
	if *endpoint != "" {
		def.OTLPEndpoint = *endpoint
	}
	w, closeW, err := m.newSuiteWorker(ctx, c, def, name)
	if err != nil {
		return err
	}
	defer closeW()
	if err := w.Run(ctx); err != nil {
		if errors.Is(err, context.Canceled) {
			return nil // stopped by a signal: the trial was given back
		}
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	return nil
}
