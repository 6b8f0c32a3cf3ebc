package clickhouse

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

// Config configures the ClickHouse trace store.
type Config struct {
	// DSN addresses the server, e.g. clickhouse://127.0.0.1:9000/loomwork
	// (native protocol; unless the DSN's compress parameter says otherwise,
	// LZ4 compression to a server across a network and none to one on a
	// loopback address). Its database is where the tables go unless Database
	// is set.
	DSN string
	// Database overrides the DSN's database. It is created if missing.
	Database string
	// Cluster, when set, names the ClickHouse cluster (remote_servers) the
	// DDL runs ON: each node gets Replicated*MergeTree local tables, and
	// reads and writes go through Distributed tables sharded by trace id.
	// Empty means a single server.
	Cluster string
	// Coordinator says what keeps a cluster's nodes in step (with Cluster
	// only). CoordinatorKeeper, the default, needs ClickHouse Keeper or
	// ZooKeeper: DDL runs ON CLUSTER and local tables are
	// Replicated*MergeTree. CoordinatorNone needs nothing: the store runs
	// every DDL statement on each node of the cluster itself (from
	// system.clusters), local tables are plain *MergeTree, and replicas of
	// a shard are kept equal by the Distributed table writing each insert
	// to all of them (remote_servers must set internal_replication=false).
	// It is the form the libchdb engine can run (docs/clickhouse.md).
	Coordinator string
	// TTL, when positive, deletes spans and trace index rows whose day is
	// older than this. It applies when the tables are created; from schema
	// version 6 it is folded into the rows' per-project expiry (the earlier
	// of the two), deleted by merges row by row.
	TTL time.Duration
	// IndexRepairWindow is how far back Start looks for traces whose spans
	// were stored without their trace_index row (a process that died
	// between a write's two inserts); 0 means DefaultIndexRepairWindow,
	// negative turns the repair off.
	IndexRepairWindow time.Duration
	// ConnectWait is how long Start keeps trying a first connection that
	// fails below the protocol (refused, reset, EOF during the handshake,
	// a timeout): a server that is still starting, or a proxy in front of
	// one. An answer from the server (an exception: bad credentials, an
	// unknown database) ends Start at once. 0 makes one attempt, for
	// commands a user waits on; `loom-eval serve` waits, since it is often
	// started beside its ClickHouse.
	ConnectWait time.Duration
	// ConnectInBackground: when the server still cannot be reached after
	// ConnectWait (a failure below the protocol), Start returns nil anyway
	// and keeps connecting — and migrating — in the background until it
	// succeeds or Shutdown. Meanwhile reads, writes and Ping fail with an
	// error wrapping store.ErrUnavailable that names the server and the
	// last failure, while Prepare and AppendBatch (which need no server)
	// work, so a spool can take data. An answer from the server (an
	// exception) still fails Start. `loom-eval serve` sets it: an outage
	// at start is then just an outage.
	ConnectInBackground bool
	// Logger receives migration progress (default: discard).
	Logger *slog.Logger

	_ struct{} // keyed literals only
}

// Coordinator values.
const (
	CoordinatorKeeper = "keeper"
	CoordinatorNone   = "none"
)

var (
	errNoDSN   = errors.New("dsn: must be set (e.g. clickhouse://127.0.0.1:9000/loomwork)")
	identRe    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	clusterRe  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.\-]*$`)
	defaultDB  = "default"
	maxTTLDays = 100 * 365
)

// Validate reports every problem with c; the DSN goes through the driver's
// own parser last, so a DSN the driver would reject fails here, not at the
// first write.
func (c Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.DSN) == "" {
		errs = append(errs, errNoDSN)
	}
	if c.Database != "" && !identRe.MatchString(c.Database) {
		errs = append(errs, fmt.Errorf("database: %q is not a plain identifier (letters, digits, underscore; not starting with a digit)", c.Database))
	}
	if c.Cluster != "" && !clusterRe.MatchString(c.Cluster) {
		errs = append(errs, fmt.Errorf("cluster: %q is not a cluster name (letters, digits, '_', '.', '-')", c.Cluster))
	}
	switch c.Coordinator {
	case "", CoordinatorKeeper, CoordinatorNone:
		if c.Coordinator != "" && c.Cluster == "" {
			errs = append(errs, fmt.Errorf("coordinator: %q needs a cluster", c.Coordinator))
		}
	default:
		errs = append(errs, fmt.Errorf("coordinator: %q is not %q or %q", c.Coordinator, CoordinatorKeeper, CoordinatorNone))
	}
	if c.TTL < 0 {
		errs = append(errs, fmt.Errorf("ttl: must not be negative (got %s)", c.TTL))
	} else if c.TTL > 0 && (c.TTL < 24*time.Hour || c.TTL%(24*time.Hour) != 0) {
		errs = append(errs, fmt.Errorf("ttl: must be a whole number of days, data is dropped by day partition (got %s)", c.TTL))
	} else if c.TTL > time.Duration(maxTTLDays)*24*time.Hour {
		errs = append(errs, fmt.Errorf("ttl: %s is more than %d days; use 0 to keep data for ever", c.TTL, maxTTLDays))
	}
	if len(errs) == 0 {
		// Last chance to catch an invalid DSN.
		opts, err := ch.ParseDSN(c.DSN)
		if err != nil {
			errs = append(errs, fmt.Errorf("dsn: %w", err))
		} else if c.Database == "" && opts.Auth.Database != "" && !identRe.MatchString(opts.Auth.Database) {
			errs = append(errs, fmt.Errorf("dsn: database %q is not a plain identifier", opts.Auth.Database))
		}
	}
	return errors.Join(errs...)
}

// database returns the database the tables live in.
func (c Config) database(opts *ch.Options) string {
	switch {
	case c.Database != "":
		return c.Database
	case opts.Auth.Database != "":
		return opts.Auth.Database
	default:
		return defaultDB
	}
}

func (c Config) indexRepairWindow() time.Duration {
	if c.IndexRepairWindow == 0 {
		return DefaultIndexRepairWindow
	}
	return c.IndexRepairWindow
}

// DSN query parameters that configure the store rather than the driver
// (which would send an unknown parameter to the server as a setting).
const (
	dsnCluster     = "cluster"
	dsnCoordinator = "cluster_coordinator"
)

// ConfigFromDSN returns the Config a store URL describes: the DSN with the
// store's own parameters, cluster=NAME and cluster_coordinator=keeper|none,
// moved to Cluster and Coordinator. E.g.
// clickhouse://n1:9000,n2:9000/loomwork?cluster=lw&cluster_coordinator=none.
func ConfigFromDSN(dsn string) (Config, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return Config{}, fmt.Errorf("dsn: %w", err)
	}
	q := u.Query()
	cfg := Config{Cluster: q.Get(dsnCluster), Coordinator: q.Get(dsnCoordinator)}
	if !q.Has(dsnCluster) && !q.Has(dsnCoordinator) {
		cfg.DSN = dsn
		return cfg, nil
	}
	q.Del(dsnCluster)
	q.Del(dsnCoordinator)
	u.RawQuery = q.Encode()
	cfg.DSN = u.String()
	return cfg, nil
}
