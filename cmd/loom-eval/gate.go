package main

import (
	"context"
	"errors"
)

// runGate is not built yet.
func (m *Main) runGate(ctx context.Context, args []string) error {
	return &ExitError{Code: ExitRuntimeErr, Err: errors.New("gate: not implemented yet")}
}
