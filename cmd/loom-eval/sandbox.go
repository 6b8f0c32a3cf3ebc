package main

import (
	"context"
	"errors"
)

// runSandbox is not built yet.
func (m *Main) runSandbox(ctx context.Context, args []string) error {
	return &ExitError{Code: ExitRuntimeErr, Err: errors.New("sandbox: not implemented yet")}
}
