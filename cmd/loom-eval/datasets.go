package main

import (
	"context"
	"errors"
)

// runDatasets is not built yet.
func (m *Main) runDatasets(ctx context.Context, args []string) error {
	return &ExitError{Code: ExitRuntimeErr, Err: errors.New("datasets: not implemented yet")}
}
