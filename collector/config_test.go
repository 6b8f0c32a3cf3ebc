package collector

import (
	"strings"
	"testing"
)

func TestConfigValidateNamesEveryBadKey(t *testing.T) {
	c := &Config{Store: "redis://x", MaxAttributeBytes: -5, Timeout: -1, MaxBatchSpans: -1, Writers: 100, RetryAfter: -1}
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad config")
	}
	for _, key := range []string{"store:", "max_attribute_bytes:", "timeout:", "max_batch_spans:", "writers:", "retry_after:"} {
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
