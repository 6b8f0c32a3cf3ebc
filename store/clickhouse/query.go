package clickhouse

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"
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
func (s *Store) query(ctx context.Context, q string, args ...any) (driver.Rows, error) {
	var err error
	for range readAttempts {
		var rows driver.Rows
		rows, err = s.conn.Query(ctx, q, args...)
		if err == nil || !brokenConn(err) || ctx.Err() != nil {
			return rows, err
		}
	}
	return nil, err
}

// queryRow is query for a one-row read.
func (s *Store) queryRow(ctx context.Context, q string, args ...any) driver.Row {
	var row driver.Row
	for range readAttempts {
		row = s.conn.QueryRow(ctx, q, args...)
		if err := row.Err(); err == nil || !brokenConn(err) || ctx.Err() != nil {
			return row
		}
	}
	return row
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
