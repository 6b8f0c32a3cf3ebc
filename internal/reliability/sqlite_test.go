package reliability

import (
	"context"
	"database/sql"
	"testing"

	_ "modernc.org/sqlite" // the driver the embedded store uses
)

// sqliteKeys reads every stored span of the embedded store at path (serve
// has exited): the suite's keys with how many rows each has. The store's
// unique index on (trace, span id) makes a count above 1 impossible; the
// suite counts anyway rather than trust it.
func sqliteKeys(t *testing.T, path string, nonce [8]byte) (map[uint64]int, storeCounts) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer db.Close()
	ctx := context.Background()
	rows, err := db.QueryContext(ctx, "SELECT t.trace_id, s.span_id FROM spans s JOIN traces t ON t.seq = s.trace_seq")
	if err != nil {
		t.Fatalf("read span ids of %s: %v", path, err)
	}
	defer rows.Close()
	keys := map[uint64]int{}
	var sc storeCounts
	for rows.Next() {
		var tid, sid []byte
		if err := rows.Scan(&tid, &sid); err != nil {
			t.Fatal(err)
		}
		sc.Rows++
		k, ok := keyOf(tid, sid, nonce)
		if !ok {
			sc.Foreign++
			continue
		}
		keys[k]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sc.Distinct = uint64(len(keys))
	return keys, sc
}
