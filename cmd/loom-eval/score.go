package main

import (
	"context"
	"errors"
)

// runScore is not built yet.
func (m *Main) runScore(ctx context.Context, args []string) error {
	return &ExitError{Code: ExitRuntimeErr, Err: errors.New("score: not implemented yet")}
}
