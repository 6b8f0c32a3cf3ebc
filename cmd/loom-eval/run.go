package main

import (
	"context"
	"errors"
)

// runRun is not built yet.
func (m *Main) runRun(ctx context.Context, args []string) error {
	return &ExitError{Code: ExitRuntimeErr, Err: errors.New("run: not implemented yet")}
}
