package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestRecordAgentRequests writes requests 0..N-1 of the agent load (seed
// 42, the default pool, 1,000 spans a request: what `go run .` sends) as
// DIR/req-NNNNN.pb, for BenchmarkIngest -ingest.requests DIR (collector),
// which profiles serve's pipeline in one process on the bytes serve sees
// here. Skipped unless THROUGHPUT_RECORD=DIR is set (THROUGHPUT_RECORD_N,
// default 400, ~2.3 MB each):
//
//	THROUGHPUT_RECORD=/tmp/agentload go test -run TestRecordAgentRequests .
func TestRecordAgentRequests(t *testing.T) {
	dir := os.Getenv("THROUGHPUT_RECORD")
	if dir == "" {
		t.Skip("THROUGHPUT_RECORD is not set")
	}
	n := 400
	if s := os.Getenv("THROUGHPUT_RECORD_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("THROUGHPUT_RECORD_N=%q: want a positive number", s)
		}
	}
	l, err := makeAgentLoad(42, 250_000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var scratch []placement
	var buf []byte
	for k := range n {
		buf, _, scratch = l.request(buf, uint64(k), now, scratch)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("req-%05d.pb", k)), buf, 0o644); err != nil {
			t.Fatalf("record request %d: %v", k, err)
		}
	}
}
