package main

import (
	"context"
	"errors"
)

// runReplay is not built yet.
func (m *Main) runReplay(ctx context.Context, args []string) error {
	return &ExitError{Code: ExitRuntimeErr, Err: errors.New("replay: not implemented yet")}
}
