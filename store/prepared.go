package store

import (
	"context"
	"errors"
	"fmt"
)

// PreparedBatch is a batch of spans a PreparingWriter checked and encoded;
// only the writer that prepared it can write it.
type PreparedBatch interface {
	// Len is the number of spans in the batch.
	Len() int
}

// PreparingWriter is an optional capability of a Writer whose write splits
// in two: Prepare, the CPU-heavy half (checks and encoding), which takes no
// lock and may run concurrently (one call per incoming request), and
// WriteBatches, the write proper, which stores any number of prepared
// batches in one insert or transaction with WriteSpans' guarantees
// (durable when it returns nil; spans repeated across the batches, or
// already stored, are stored once). Prepare fails, naming the span, for
// the spans WriteSpans would reject.
//
// Consumers find it with a type assertion and fall back to WriteSpans; a
// backend declares it with var _ store.PreparingWriter = (*Store)(nil).
// The batches must not be used again after WriteBatches, and the spans they
// were prepared from must not change until it returns.
type PreparingWriter interface {
	Writer
	Prepare(spans []Span) (PreparedBatch, error)
	WriteBatches(ctx context.Context, batches []PreparedBatch) error
}

// ErrForeignBatch is wrapped by WriteBatches for a batch that another
// kind of store prepared.
var ErrForeignBatch = errors.New("prepared batch was made by another store")

// WriteTyped is how a backend implements WriteBatches over its own batch
// type P: every batch must be a P (else ErrForeignBatch, naming the
// batch), and write stores them all in one go.
func WriteTyped[P PreparedBatch](ctx context.Context, batches []PreparedBatch, write func(context.Context, ...P) error) error {
	ps := make([]P, len(batches))
	for i, b := range batches {
		p, ok := b.(P)
		if !ok {
			return fmt.Errorf("write batch %d (%T): %w", i, b, ErrForeignBatch)
		}
		ps[i] = p
	}
	return write(ctx, ps...)
}

// SpanChecker is an optional capability of a Writer that can never store
// some spans a sender may send (a timestamp outside the range its columns
// hold, say). CheckSpan says why such a span can never be stored, so a
// caller rejects that span alone instead of failing the batch it came in —
// a failure the sender would retry for ever. A span CheckSpan accepts is
// one WriteSpans and Prepare accept.
type SpanChecker interface {
	CheckSpan(sp *Span) error
}

// SpoolingWriter is an optional capability of a PreparingWriter whose
// prepared batches can be written to a durable spool and read back after a
// restart: a writer can then acknowledge data once the spool has it and feed
// the store large batches later, without encoding the spans twice.
//
// AppendBatch appends a self-describing encoding of b (which this store
// prepared) to dst and consumes b, as WriteBatches would. WriteSpooled
// stores such encodings, in order, exactly as WriteBatches would have
// stored the batches they came from, and returns how many spans they
// hold; recs must stay unchanged until it returns. Its error wraps
// ErrBadSpoolRecord, naming the record and offset, for input AppendBatch
// did not write (and then nothing is stored).
type SpoolingWriter interface {
	PreparingWriter
	AppendBatch(dst []byte, b PreparedBatch) ([]byte, error)
	WriteSpooled(ctx context.Context, recs [][]byte) (int, error)
}

// ErrBadSpoolRecord is wrapped by WriteSpooled for input that is not an
// encoding AppendBatch wrote (truncated, another format, a newer version).
var ErrBadSpoolRecord = errors.New("not a spooled batch this store can read")

// Pinger is an optional capability of a store that can tell whether it is
// reachable now (a health check asks; it does not change anything).
type Pinger interface {
	Ping(ctx context.Context) error
}
