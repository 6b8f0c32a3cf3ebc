package main

import (
	"context"
	"errors"
)

// runRollup is not built yet.
func (m *Main) runRollup(ctx context.Context, args []string) error {
	return &ExitError{Code: ExitRuntimeErr, Err: errors.New("rollup: not implemented yet")}
}
