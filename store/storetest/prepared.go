package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/loomwork/loomwork/store"
)

// foreignBatch is a batch no backend prepared.
type foreignBatch struct{}

func (foreignBatch) Len() int { return 0 }

// testPreparedBatches runs on a backend that declares the
// store.PreparingWriter capability: batches prepared apart and written
// together are stored exactly as WriteSpans would store them (a span in two
// batches once), and a batch from elsewhere is refused.
func (s *suite) testPreparedBatches(t *testing.T) {
	st := s.open(t)
	pw, ok := st.(store.PreparingWriter)
	if !ok {
		t.Skipf("%T does not declare the optional store.PreparingWriter capability", st)
	}
	m := newRefModel()
	spans := GenerateTraces(6, 4, 11)
	var batches []store.PreparedBatch
	for i := 0; i < len(spans); i += 5 {
		end := min(i+7, len(spans)) // overlapping: two spans in two batches
		b, err := pw.Prepare(spans[i:end])
		if err != nil {
			t.Fatalf("prepare spans %d..%d: %v", i, end, err)
		}
		if b.Len() != end-i {
			t.Fatalf("prepared batch of %d spans says Len %d", end-i, b.Len())
		}
		batches = append(batches, b)
	}
	if err := pw.WriteBatches(store.WithDefaultProject(context.Background()), batches); err != nil {
		t.Fatal(err)
	}
	m.add(spans...)
	s.checkTraces(t, st, m)

	bad := append([]store.Span(nil), spans[:1]...)
	bad[0].TraceID = "not-hex"
	if _, err := pw.Prepare(bad); err == nil {
		t.Error("Prepare accepted a span with an invalid trace id")
	}
	err := pw.WriteBatches(store.WithDefaultProject(context.Background()), []store.PreparedBatch{foreignBatch{}})
	if !errors.Is(err, store.ErrForeignBatch) {
		t.Errorf("a foreign batch: %v, want ErrForeignBatch", err)
	}
}
