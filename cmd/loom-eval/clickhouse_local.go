package main

import (
	"context"
	"errors"
)

// runClickHouseLocal is not built yet.
func (m *Main) runClickHouseLocal(ctx context.Context, args []string) error {
	return &ExitError{Code: ExitRuntimeErr, Err: errors.New("clickhouse_local: not implemented yet")}
}
