package web

import (
	"context"
	"net/http/httptest"
	"testing"
)

// BenchmarkTracePage50kSpans measures the server time to open a 50,000-span
// trace: read from the embedded store, roll up (critical path, cost), build
// the waterfall index and render the first page. "cold" empties the rollup
// cache before every open (a trace opened for the first time); "warm"
// re-opens it (paging, expanding, selecting spans).
func BenchmarkTracePage50kSpans(b *testing.B) {
	st := openStore(b)
	spans := bigTraceSpans(50_000)
	if err := st.WriteSpans(context.Background(), spans); err != nil {
		b.Fatal(err)
	}
	srv, err := New(Config{}, Deps{Traces: st})
	if err != nil {
		b.Fatal(err)
	}
	path := "/traces/" + spans[0].TraceID
	open := func(b *testing.B) {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 {
			b.Fatalf("status %d", rec.Code)
		}
		b.SetBytes(int64(rec.Body.Len()))
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			srv.cache.clear()
			open(b)
		}
	})
	b.Run("warm", func(b *testing.B) {
		open(b)
		for b.Loop() {
			open(b)
		}
	})
}
