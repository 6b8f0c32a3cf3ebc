package clickhouse_test

import (
	"context"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/store"
)

type storeAndDB struct {
	s   store.Store
	db  string
	srv *chtest.Server
}

func chtestStart(tb testing.TB) *chtest.Server { return chtest.Start(tb) }

// rawConn is a plain driver connection for checks below the store's API.
func rawConn(srv *chtest.Server) (driver.Conn, error) {
	opts, err := ch.ParseDSN(srv.DSN("default"))
	if err != nil {
		return nil, err
	}
	return ch.Open(opts)
}

func execSQL(srv *chtest.Server, q string) error {
	conn, err := rawConn(srv)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(store.WithDefaultProject(context.Background()), 2*time.Minute)
	defer cancel()
	return conn.Exec(ctx, q)
}

func queryCount(t testing.TB, srv *chtest.Server, q string) uint64 {
	t.Helper()
	return srv.QueryUint(t, q)
}

func queryStrings(t testing.TB, srv *chtest.Server, q string) []string {
	t.Helper()
	conn, err := rawConn(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(store.WithDefaultProject(context.Background()), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func dropDatabase(t testing.TB, srv *chtest.Server, db string) {
	if err := execSQL(srv, "DROP DATABASE IF EXISTS "+db+" SYNC"); err != nil {
		t.Errorf("drop %s: %v", db, err)
	}
}
