package clickhouse

import (
	"context"
	"fmt"

	"github.com/loomwork/loomwork/store"
)

var _ store.PreparingWriter = (*Store)(nil)

// Len is the number of spans in the batch.
func (p *PreparedSpans) Len() int { return len(p.spans) }

// Prepare is PrepareSpans behind the store.PreparingWriter capability.
func (s *Store) Prepare(spans []store.Span) (store.PreparedBatch, error) {
	p, err := s.PrepareSpans(spans)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// WriteBatches is WritePrepared behind the store.PreparingWriter capability.
func (s *Store) WriteBatches(ctx context.Context, batches []store.PreparedBatch) error {
	ps := make([]*PreparedSpans, len(batches))
	for i, b := range batches {
		p, ok := b.(*PreparedSpans)
		if !ok || p == nil {
			return fmt.Errorf("write batch %d (%T): %w", i, b, store.ErrForeignBatch)
		}
		ps[i] = p
	}
	return s.WritePrepared(ctx, ps...)
}
