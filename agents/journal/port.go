package journal

import (
	"context"
	"fmt"
)

// Journal is the port through which the runtime and the workflow write
// runs and read them back. It is written in the journal's own terms, so any
// store can implement it: package journaldb (SQLite, durable) and package
// memjournal (in memory) do, and package journaltest is the conformance
// suite both pass. What every implementation promises:
//
//   - Events returns a run's events in sequence order, and none (no error)
//     for a run never appended to.
//   - Append stores recs in run runID atomically — all of them or none — as
//     the run's next events: sequence numbers count from 1 per run without
//     gaps, each event chained to the previous one (Next). A batch holding
//     a record Next refuses, or a KindSeal record (seals exist only in
//     exported journals), appends nothing.
//   - AppendEffect runs a side effect at most once per idempotency key and
//     records its outcome with it (see its comment).
//
// Tables for effects and the statements that write them are not part of
// the port: they are the optional capabilities SchemaEnsurer and SQLTx.
type Journal interface {
	Events(ctx context.Context, runID string) ([]Event, error)
	Append(ctx context.Context, runID string, recs ...Record) ([]Event, error)
	// AppendEffect calls fn and appends the record it returns (the one
	// that completes the call: a tool_result, a workflow step's succeeded
	// event), atomically with whatever fn did through its EffectTx, and
	// returns the events appended, the completing record last.
	//
	// Once per key: when the journal holds the completing record of
	// call.Key already, fn is not called and the events recorded for the
	// key are returned as stored. Concurrent calls with one key call fn
	// once. A key belongs to the run it was first completed in; using it in
	// another run is an error.
	//
	// When fn returns an error or panics (the panic is returned as a
	// *PanicError), or ctx ends before the record is stored (the error
	// then wraps ctx.Err()), nothing is appended — so the call can be made
	// again. fn's own error is returned as it is, unwrapped.
	//
	// fn must not call the journal: an implementation may hold its write
	// lock while fn runs.
	AppendEffect(ctx context.Context, runID string, call EffectCall, fn EffectFunc) ([]Event, error)
}

// EffectCall identifies the call an AppendEffect belongs to.
type EffectCall struct {
	// Step, Tool and CallID are copied onto the effect events a store
	// records for the call (SQLTx).
	Step   int
	Tool   string
	CallID string
	// Key is the call's idempotency key (IdempotencyKey), unique in the
	// journal: derive it from the run id.
	Key string
}

// EffectFunc performs a call's side effect for AppendEffect and returns
// the record that completes the call. tx is its handle on the journal for
// the duration of the call.
type EffectFunc func(ctx context.Context, tx EffectTx) (Record, error)

// EffectTx is an effect function's handle on the journal while
// AppendEffect runs it. Every store gives the call's idempotency key; what
// else an effect may do inside the journal's atomic write depends on the
// store, and is an optional capability found by interface assertion
// (SQLTx).
//
// An effect outside the journal (an HTTP request, an email) is
// at-least-once whatever the store: a crash after it and before the
// completing record is stored repeats the call with the same key, on which
// the receiver must deduplicate.
type EffectTx interface {
	// Key is the call's idempotency key.
	Key() string
}

// SQLTx is the optional capability of an EffectTx whose store keeps
// tables in the journal's own database (package journaldb). A statement
// run through Exec is applied in the same transaction as the call's
// completing record and journaled as a KindEffect event, so the effect and
// its record commit together or not at all: exactly once, across crashes.
// Reads through QueryRow change nothing and are not journaled.
//
// Arguments are JSON-encodable values (strings, numbers, booleans, nil,
// []byte): they are journaled with the statement.
type SQLTx interface {
	EffectTx
	Exec(ctx context.Context, statement string, args ...any) error
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Row is one row read through a SQLTx. Scan copies its columns into dest,
// as database/sql's Row does (and reports that there was no row).
type Row interface {
	Scan(dest ...any) error
}

// SchemaEnsurer is the optional capability of a Journal whose effects may
// keep tables in its database (package journaldb). EnsureSchema applies
// idempotent DDL (CREATE TABLE IF NOT EXISTS ...) for them. The DDL is not
// journaled: it makes the place effects go, it is not an effect.
type SchemaEnsurer interface {
	EnsureSchema(ctx context.Context, ddl string) error
}

// PanicError is a panic recovered from an effect function or a tool,
// returned as an error.
type PanicError struct{ Value any }

func (e *PanicError) Error() string { return fmt.Sprintf("tool panicked: %v", e.Value) }

// CallEffect calls fn with tx and returns what it returns, a panic turned
// into a *PanicError: how every implementation of AppendEffect calls the
// effect function.
func CallEffect(ctx context.Context, fn EffectFunc, tx EffectTx) (rec Record, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p}
		}
	}()
	return fn(ctx, tx)
}
