package main

import (
	"context"
	"errors"
)

// runContext is not built yet.
func (m *Main) runContext(ctx context.Context, args []string) error {
	return &ExitError{Code: ExitRuntimeErr, Err: errors.New("context: not implemented yet")}
}
