package collector

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.uber.org/zap"

	"github.com/loomwork/loomwork/collector/agenttrace"
	"github.com/loomwork/loomwork/collector/genai"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
)

// storableSeeds are OTLP requests mixing spans a store can hold with spans
// none can (nested too deep, times out of range, bad ids), in every place
// a deep value can hide.
func storableSeeds() [][]byte {
	var seeds [][]byte
	add := func(td ptrace.Traces) {
		b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			panic(err)
		}
		seeds = append(seeds, b)
	}
	add(agenttrace.NewGenerator(7, time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)).Batch(3, 5))
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "seed")
	ss := rs.ScopeSpans().AppendEmpty()
	start := pcommon.NewTimestampFromTime(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	for i := range 8 {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID([16]byte{0x36, 15: byte(i + 1)})
		sp.SetSpanID([8]byte{0x44, 7: byte(i + 1)})
		sp.SetName(fmt.Sprintf("span %d", i))
		sp.SetStartTimestamp(start)
		sp.SetEndTimestamp(start + 1000)
		sp.Attributes().PutStr("gen_ai.request.model", "model-a")
		switch i {
		case 1:
			m := sp.Attributes().PutEmptyMap("deep")
			for range 60 {
				m = m.PutEmptyMap("k")
			}
		case 2:
			sp.SetStartTimestamp(pcommon.Timestamp(math.MaxUint64))
		case 3:
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(time.Date(1850, 1, 1, 0, 0, 0, 0, time.UTC)))
		case 4:
			s := sp.Attributes().PutEmptySlice("arr")
			for range 40 {
				s = s.AppendEmpty().SetEmptySlice()
			}
		case 5:
			sp.SetSpanID([8]byte{})
		case 6:
			m := sp.Events().AppendEmpty().Attributes().PutEmptyMap("deep")
			for range 33 {
				m = m.PutEmptyMap("k")
			}
		}
	}
	add(td)
	return seeds
}

// FuzzStorableAcceptedPlusRejectedIsOffered holds issue 36's rule to any
// request: what the decoder maps and the ingester stores, and what they
// reject, add up to every span offered; no span the rule lets through
// makes the store refuse its batch; and every span accepted is read back.
// The store is the embedded one (a file per run).
func FuzzStorableAcceptedPlusRejectedIsOffered(f *testing.F) {
	for _, s := range storableSeeds() {
		f.Add(s)
	}
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(f.TempDir(), "traces.db"),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	in := &ingester{cfg: Config{}, log: zap.NewNop(), slog: slog.New(slog.DiscardHandler), injected: st}
	if err := in.start(context.Background()); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		in.shutdown(context.Background())
		st.Shutdown(context.Background())
	})
	ctx := store.WithDefaultProject(context.Background())
	f.Fuzz(func(t *testing.T, b []byte) {
		spans, rejected, err := genai.DecodeProto(b, in.mapOptions())
		if err != nil {
			return // malformed: refused whole, as INVALID_ARGUMENT
		}
		offered := len(spans) + len(rejected)
		// consume may reorder spans in place; keep what was offered.
		mapped := append([]store.Span(nil), spans...)
		all, err := in.consume(ctx, spans, rejected)
		if err != nil {
			t.Fatalf("the store refused a batch of %d spans the rule let through: %v", len(mapped), err)
		}
		out := map[string]bool{}
		for _, r := range all {
			out[r.TraceID+"/"+r.SpanID] = true
		}
		accepted := 0
		for i := range mapped {
			sp := &mapped[i]
			if out[sp.TraceID+"/"+sp.SpanID] {
				continue
			}
			accepted++
			got, err := st.GetTrace(ctx, sp.TraceID)
			if err != nil {
				t.Fatalf("accepted span %s/%s: %v", sp.TraceID, sp.SpanID, err)
			}
			found := false
			for j := range got {
				found = found || got[j].SpanID == sp.SpanID
			}
			if !found {
				t.Fatalf("accepted span %s/%s is not read back (its trace has %d spans)", sp.TraceID, sp.SpanID, len(got))
			}
		}
		if accepted+len(all) != offered {
			t.Fatalf("%d accepted + %d rejected != %d offered", accepted, len(all), offered)
		}
	})
}
