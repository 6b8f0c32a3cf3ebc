package main

import (
	"context"
	"errors"
)

// runTraces is not built yet.
func (m *Main) runTraces(ctx context.Context, args []string) error {
	return &ExitError{Code: ExitRuntimeErr, Err: errors.New("traces: not implemented yet")}
}
