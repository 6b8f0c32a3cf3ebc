package sqlite

import (
	"context"

	"github.com/loomwork/loomwork/store"
)

var _ store.PreparingWriter = (*Store)(nil)

// Len is the number of spans in the batch.
func (p *PreparedSpans) Len() int { return len(p.rows) }

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
	return store.WriteTyped(ctx, batches, s.WritePrepared)
}
