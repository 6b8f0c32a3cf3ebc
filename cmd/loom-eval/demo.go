package main

import (
	"context"
	"errors"
)

// runDemo is not built yet.
func (m *Main) runDemo(ctx context.Context, args []string) error {
	return &ExitError{Code: ExitRuntimeErr, Err: errors.New("demo: not implemented yet")}
}
