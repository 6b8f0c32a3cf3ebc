package clickhouse

import (
	"context"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/internal/testtier"
)

// TestClusterDDLParsesOnClickHouse cannot run the cluster DDL (one
// clickhouse-local has no Keeper and no remote_servers), but has the real
// server's parser check every statement: formatQuery parses without
// executing. DDL must keep its ON CLUSTER clause.
func TestClusterDDLParsesOnClickHouse(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtest.Start(t)
	opts, err := ch.ParseDSN(srv.DSN("default"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := newDDL("loomwork", "loomwork_cluster", 30*24*time.Hour)
	boot, err := d.render("bootstrap", bootstrapSQL)
	if err != nil {
		t.Fatal(err)
	}
	migs, err := d.migrations()
	if err != nil {
		t.Fatal(err)
	}
	steps := boot
	for _, m := range migs {
		steps = append(steps, m.steps...)
	}
	for _, st := range steps {
		var formatted string
		if err := conn.QueryRow(ctx, "SELECT formatQuery(?)", st.sql).Scan(&formatted); err != nil {
			t.Errorf("step %q does not parse: %v\n%s", st.name, err, st.sql)
			continue
		}
		// Data steps (the backfill INSERT) go through the Distributed
		// tables and have no ON CLUSTER form; every DDL step needs it.
		if strings.HasPrefix(formatted, "INSERT INTO") {
			continue
		}
		if !strings.Contains(formatted, "ON CLUSTER loomwork_cluster") {
			t.Errorf("step %q lost its ON CLUSTER clause: %s", st.name, formatted)
		}
	}
}
