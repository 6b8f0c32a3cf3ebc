package storeurl

import (
	"context"
	"log/slog"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
)

// openClickHouse opens the ClickHouse store; the driver parses the DSN and
// Start (through Open) applies the schema migrations. ClickHouse has no
// read-only mode here: readers simply never write.
func openClickHouse(ctx context.Context, loc Location, log *slog.Logger, o options) (store.Store, error) {
	// The DSN may name a cluster (cluster=…, cluster_coordinator=…).
	cfg, err := clickhouse.ConfigFromDSN(loc.DSN)
	if err != nil {
		return nil, err
	}
	cfg.Logger = log
	cfg.ConnectWait = o.connectWait
	cfg.ConnectInBackground = o.background
	st, err := clickhouse.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return st, nil
}
