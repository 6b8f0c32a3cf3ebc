package clickhouse

import (
	"testing"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

// Without a compress parameter, the store compresses what it sends only
// to a server across a network: to one on a loopback address LZ4 would
// cost both processes CPU for every byte and save nothing scarce. A DSN
// that names a compression keeps it.
func TestWireCompressionDefaultsToNoneOnLoopbackOnly(t *testing.T) {
	for dsn, want := range map[string]ch.CompressionMethod{
		"clickhouse://127.0.0.1:9000/db":               ch.CompressionNone,
		"clickhouse://127.0.0.2:9000/db":               ch.CompressionNone,
		"clickhouse://localhost:9000/db":               ch.CompressionNone,
		"clickhouse://[::1]:9000/db":                   ch.CompressionNone,
		"clickhouse://10.0.0.5:9000/db":                ch.CompressionLZ4,
		"clickhouse://ch.example.com:9000/db":          ch.CompressionLZ4,
		"clickhouse://127.0.0.1:9000,10.0.0.5:9000/db": ch.CompressionLZ4,
		"clickhouse://127.0.0.1:9000/db?compress=lz4":  ch.CompressionLZ4,
		"clickhouse://127.0.0.1:9000/db?compress=zstd": ch.CompressionZSTD,
		"clickhouse://10.0.0.5:9000/db?compress=none":  ch.CompressionNone,
		"clickhouse://10.0.0.5:9000/db?compress=false": ch.CompressionNone,
	} {
		s, err := New(Config{DSN: dsn})
		if err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		if got := s.opts.Compression; got == nil || got.Method != want {
			t.Errorf("%s: compression %v, want %v", dsn, got, want)
		}
	}
}
