package collector

import (
	"strings"
	"testing"
)

func TestConfigValidateNamesEveryBadKey(t *testing.T) {
	c := &Config{Store: "redis://x", MaxAttributeBytes: -5, Timeout: -1, MaxBatchSpans: -1, Writers: 100, RetryAfter: -1, SpoolBatchMiB: 2048}
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad config")
	}
	for _, key := range []string{"store:", "max_attribute_bytes:", "timeout:", "max_batch_spans:", "writers:", "retry_after:", "spool_batch_mib:"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error %q does not name %s", err, key)
		}
	}
	if err := createDefaultConfig().Validate(); err != nil {
		t.Errorf("default config invalid: %v", err)
	}
	sc := &ServerConfig{Receiver: "jaeger", GRPCAddr: "nohostport", MemoryLimitPercent: 101}
	err = sc.Validate()
	for _, key := range []string{"receiver:", "grpc_addr:", "memory_limit_percent:"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("server config error %v does not name %s", err, key)
		}
	}
}

// The feeder's insert size follows the memory limit: a thirty-second,
// never under 16 MiB nor over 64 (the feeder holds about three times it).
func TestDefaultSpoolBatchFollowsTheMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		limitMiB uint32
		want     int
	}{{0, 16}, {128, 16}, {512, 16}, {1024, 32}, {2048, 64}, {64 << 10, 64}} {
		if got := DefaultSpoolBatchMiB(c.limitMiB); got != c.want {
			t.Errorf("DefaultSpoolBatchMiB(%d) = %d, want %d", c.limitMiB, got, c.want)
		}
	}
	var c Config
	if got := c.spoolBatchBytes(); got != defaultSpoolBatchMiB<<20 {
		t.Errorf("an exporter config without spool_batch_mib reads %d bytes, want %d", got, defaultSpoolBatchMiB<<20)
	}
}
