package genai

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loomwork/loomwork/collector/agenttrace"
)

// BenchmarkDecodeProto decodes one 1,000-span request of agent-shaped
// traces (100 traces of 10 spans, ~14 GenAI attributes a span, the load of
// scripts/throughput) into store spans: directly, and the way it was done
// before through pdata (refDecodeProto). Reported per request; spans/s is the
// throughput of one core.
//
//	go test -run '^$' -bench DecodeProto -benchmem -count 6 ./collector/genai/
func BenchmarkDecodeProto(b *testing.B) {
	td := agenttrace.NewGenerator(3, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).Batch(100, 10)
	req, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		b.Fatal(err)
	}
	n := td.SpanCount()
	run := func(b *testing.B, decode func() (int, error)) {
		b.SetBytes(int64(len(req)))
		b.ReportAllocs()
		for b.Loop() {
			got, err := decode()
			if err != nil || got != n {
				b.Fatalf("decoded %d of %d spans: %v", got, n, err)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "spans/s")
	}
	b.Run("direct", func(b *testing.B) {
		run(b, func() (int, error) {
			s, _, err := DecodeProto(req, Options{})
			return len(s), err
		})
	})
	b.Run("pdata", func(b *testing.B) {
		run(b, func() (int, error) {
			s, _, err := refDecodeProto(req, refOptions{})
			return len(s), err
		})
	})
}
