package collector

import (
	"errors"
	"fmt"
	"time"

	"github.com/loomwork/loomwork/collector/genai"
	"github.com/loomwork/loomwork/store/storeurl"
)

// Config configures the Loomwork exporter. In a Collector configuration it
// is the `loomwork` exporter's section:
//
//	exporters:
//	  loomwork:
//	    store: clickhouse://127.0.0.1:9000/loomwork
type Config struct {
	// Store is the store URL (see store/storeurl): empty for the embedded
	// default, a file path or sqlite:PATH, or clickhouse://HOST:PORT/DB.
	// Ignored when the factory was given an open store (WithStore).
	Store string `mapstructure:"store"`
	// MaxAttributeBytes limits one attribute value; larger values are
	// truncated with a marker. 0 means genai.DefaultMaxAttrBytes, -1 turns
	// truncation off.
	MaxAttributeBytes int `mapstructure:"max_attribute_bytes"`
	// Timeout bounds one export (mapping plus the store write) as seen by
	// the caller, and each store write. 0 leaves exports to the caller's
	// deadline; store writes are then bounded by DefaultTimeout.
	Timeout time.Duration `mapstructure:"timeout"`
	// MaxBatchSpans caps how many spans concurrent requests are coalesced
	// into for one store write. Default 50000.
	MaxBatchSpans int `mapstructure:"max_batch_spans"`
	// Writers is how many store writes may run at once. Default 1.
	Writers int `mapstructure:"writers"`
	// MaxQueueWait bounds how long a request may expect to wait for the
	// store behind the requests already queued (judged from their spans and
	// the store's recent rate); one that would wait longer is refused at
	// once with RESOURCE_EXHAUSTED / 429, so it is retried later instead of
	// running into its sender's deadline. Default 2s (SDKs time out at 10s);
	// -1 turns the bound off. Not used with a spool (the spool is the queue).
	MaxQueueWait time.Duration `mapstructure:"max_queue_wait"`
	// SpoolDir, when set, puts a durable spool between the exporter and
	// the store: a request is acknowledged once its spans are fsynced in
	// the spool, and the store is fed from it in large inserts, riding out
	// store outages until the spool is full. It needs a store that can
	// spool (store.SpoolingWriter: ClickHouse); the embedded store writes
	// directly, its own commit being as durable as the spool's.
	SpoolDir string `mapstructure:"spool_dir"`
	// SpoolMaxMiB bounds the spool's unconsumed bytes; a full spool answers
	// RESOURCE_EXHAUSTED / 429. Default 1024.
	SpoolMaxMiB int `mapstructure:"spool_max_mib"`
	// SpoolBatchMiB is how much of the spool the feeder reads for one
	// insert: ClickHouse spends less CPU on few large inserts (fewer parts
	// to write and merge), the collector holds that much (and the
	// driver's copy) in memory. Default 32; the collector server derives
	// it from its memory limit (DefaultSpoolBatchMiB).
	SpoolBatchMiB int `mapstructure:"spool_batch_mib"`
	// RetryAfter is the delay suggested to senders (gRPC RetryInfo, HTTP
	// Retry-After) when the store fails. Default 1s.
	RetryAfter time.Duration `mapstructure:"retry_after"`

	_ struct{} // keyed literals only
}

// Defaults.
const (
	DefaultMaxBatchSpans = 50000
	DefaultWriters       = 1
	DefaultRetryAfter    = time.Second
	DefaultTimeout       = 30 * time.Second
	DefaultSpoolMaxMiB   = 1024
	defaultSpoolBatchMiB = 32
	DefaultMaxQueueWait  = 2 * time.Second
	maxWriters           = 64
)

func createDefaultConfig() *Config {
	return &Config{Timeout: DefaultTimeout}
}

// Validate reports every problem with the configuration, naming the key.
func (c *Config) Validate() error {
	var errs []error
	if c.Store != "" {
		if _, err := storeurl.Parse(c.Store); err != nil {
			errs = append(errs, fmt.Errorf("store: %w", err))
		}
	}
	if c.MaxAttributeBytes < -1 {
		errs = append(errs, fmt.Errorf("max_attribute_bytes: must be -1 (no limit), 0 (default %d) or positive (got %d)", genai.DefaultMaxAttrBytes, c.MaxAttributeBytes))
	} else if c.MaxAttributeBytes > 0 && c.MaxAttributeBytes < 64 {
		errs = append(errs, fmt.Errorf("max_attribute_bytes: %d is too small to keep a useful value; use at least 64", c.MaxAttributeBytes))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout: must not be negative (got %s)", c.Timeout))
	}
	if c.MaxBatchSpans < 0 {
		errs = append(errs, fmt.Errorf("max_batch_spans: must not be negative (got %d)", c.MaxBatchSpans))
	}
	if c.Writers < 0 || c.Writers > maxWriters {
		errs = append(errs, fmt.Errorf("writers: must be between 0 (default %d) and %d (got %d)", DefaultWriters, maxWriters, c.Writers))
	}
	if c.MaxQueueWait < -1 {
		errs = append(errs, fmt.Errorf("max_queue_wait: must be -1 (no bound), 0 (default %s) or positive (got %s)", DefaultMaxQueueWait, c.MaxQueueWait))
	}
	if c.SpoolBatchMiB < 0 || c.SpoolBatchMiB > 1024 {
		errs = append(errs, fmt.Errorf("spool_batch_mib: must be between 0 (default) and 1024 (got %d)", c.SpoolBatchMiB))
	}
	if c.SpoolMaxMiB < 0 {
		errs = append(errs, fmt.Errorf("spool_max_mib: must not be negative (got %d)", c.SpoolMaxMiB))
	} else if c.SpoolMaxMiB > 0 && c.SpoolMaxMiB < 64 {
		errs = append(errs, fmt.Errorf("spool_max_mib: %d is less than one segment; use at least 64", c.SpoolMaxMiB))
	}
	if c.RetryAfter < 0 {
		errs = append(errs, fmt.Errorf("retry_after: must not be negative (got %s)", c.RetryAfter))
	}
	return errors.Join(errs...)
}

func (c *Config) maxBatchSpans() int {
	if c.MaxBatchSpans == 0 {
		return DefaultMaxBatchSpans
	}
	return c.MaxBatchSpans
}

func (c *Config) writers() int {
	if c.Writers == 0 {
		return DefaultWriters
	}
	return c.Writers
}

func (c *Config) retryAfter() time.Duration {
	if c.RetryAfter == 0 {
		return DefaultRetryAfter
	}
	return c.RetryAfter
}

func (c *Config) maxQueueWait() time.Duration {
	switch c.MaxQueueWait {
	case 0:
		return DefaultMaxQueueWait
	case -1:
		return 0
	}
	return c.MaxQueueWait
}

func (c *Config) spoolBatchBytes() int {
	if c.SpoolBatchMiB == 0 {
		return defaultSpoolBatchMiB << 20
	}
	return c.SpoolBatchMiB << 20
}

func (c *Config) spoolMaxBytes() int64 {
	if c.SpoolMaxMiB == 0 {
		return DefaultSpoolMaxMiB << 20
	}
	return int64(c.SpoolMaxMiB) << 20
}

func (c *Config) mapOptions() genai.Options {
	return genai.Options{MaxAttrBytes: c.MaxAttributeBytes}
}
