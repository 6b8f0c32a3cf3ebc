package clickhouse

import (
	"context"
	"errors"

	"github.com/loomwork/loomwork/store"
)

// ErrProjectsUnsupported: this backend stores and reads the default
// project only (issue 21's project column is in the embedded store; the
// ClickHouse schema has none yet). It fails closed: a span of another
// project is refused (the collector answers partial_success, not
// retryable), and a read scoped to another project is an error, never the
// default project's data.
var ErrProjectsUnsupported = errors.New("the ClickHouse store keeps the default project only; use the embedded store for projects")

// defaultProjectOnly refuses reads scoped to a project other than the
// default one.
func defaultProjectOnly(ctx context.Context) error {
	if store.ProjectOf(ctx) != "" {
		return ErrProjectsUnsupported
	}
	return nil
}
