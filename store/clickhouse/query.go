package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"

	"github.com/loomwork/loomwork/store"
)

// readAttempts bounds how often a read is sent: once, and up to twice more
// while the connection it went out on turns out broken (the pool can hold
// more than one connection to a server that has just died).
const readAttempts = 3

// query runs a read. The driver hands out pooled connections; one whose
// server died since it was last used (a replica killed, a proxy restarted)
// fails the first query sent on it with a reset or an end of stream before
// any row arrives. A SELECT is safe to send again, and the driver has
// discarded that connection, so the next attempt goes out on another one
// (pooled, or dialled to a live host of the DSN). database/sql retries driver.ErrBadConn the same way.
// Errors after rows began to arrive are returned to the caller: a partial
// result cannot be retried invisibly.
//
// A read honours its context even where the driver does not: the
// handshake of a new connection waits out the dial timeout (30 s by
// default) against a server that accepts and never answers, so the query
// runs on its own goroutine and is abandoned when ctx ends (its rows are
// closed when it returns). A failure to reach the server wraps
// store.ErrUnavailable and names it.
func (s *Store) query(ctx context.Context, q string, args ...any) (driver.Rows, error) {
	type result struct {
		rows driver.Rows
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		for range readAttempts {
			r.rows, r.err = s.conn.Query(ctx, q, args...)
			if r.err == nil || !brokenConn(r.err) || ctx.Err() != nil {
				break
			}
		}
		done <- r
	}()
	select {
	case r := <-done:
		return r.rows, s.unavailable(ctx, r.err)
	case <-ctx.Done():
		go func() {
			// A failed query's rows are a typed nil the driver cannot
			// close (the keeper's test crashed serve's shutdown on it).
			if r := <-done; r.err == nil && r.rows != nil {
				r.rows.Close()
			}
		}()
		return nil, s.unavailable(ctx, ctx.Err())
	}
}

// queryRow is query for a one-row read.
func (s *Store) queryRow(ctx context.Context, q string, args ...any) driver.Row {
	done := make(chan driver.Row, 1)
	go func() {
		var row driver.Row
		for range readAttempts {
			row = s.conn.QueryRow(ctx, q, args...)
			if err := row.Err(); err == nil || !brokenConn(err) || ctx.Err() != nil {
				break
			}
		}
		done <- row
	}()
	select {
	case row := <-done:
		if err := row.Err(); err != nil {
			return errRow{s.unavailable(ctx, err)}
		}
		return row
	case <-ctx.Done():
		return errRow{s.unavailable(ctx, ctx.Err())}
	}
}

// errRow is a driver.Row that failed.
type errRow struct{ err error }

func (r errRow) Err() error           { return r.err }
func (r errRow) Scan(...any) error    { return r.err }
func (r errRow) ScanStruct(any) error { return r.err }

// unavailable wraps err with store.ErrUnavailable, naming the server, when
// it says the server could not be reached or did not answer in time (not
// for a query the server refused, nor a caller that went away).
func (s *Store) unavailable(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		return err
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled) && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return err
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout(),
		brokenConn(err), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, ch.ErrAcquireConnTimeout):
		return fmt.Errorf("clickhouse %s: %w: %w", s.server(), store.ErrUnavailable, err)
	}
	return err
}

// brokenConn reports whether err says the connection itself failed (the
// peer reset or closed it), as opposed to the server refusing the query.
func brokenConn(err error) bool {
	var ex *proto.Exception
	if errors.As(err, &ex) {
		return false // the server answered
	}
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}
