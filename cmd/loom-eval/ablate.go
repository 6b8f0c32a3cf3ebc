package main

import (
	"context"
	"errors"
)

// runAblate is not built yet.
func (m *Main) runAblate(ctx context.Context, args []string) error {
	return &ExitError{Code: ExitRuntimeErr, Err: errors.New("ablate: not implemented yet")}
}
