package main

import (
	"context"
	"errors"
)

// runServe is not built yet.
func (m *Main) runServe(ctx context.Context, args []string) error {
	return &ExitError{Code: ExitRuntimeErr, Err: errors.New("serve: not implemented yet")}
}
