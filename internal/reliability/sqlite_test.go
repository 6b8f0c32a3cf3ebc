package reliability

import (
	"context"
	"testing"

	"github.com/loomwork/loomwork/store/sqlite"
)

// sqliteKeys reads every stored span record of the embedded store at path
// (serve has exited), whichever layout holds it (span rows, or a trace's
// compact blocks): the suite's keys with how many records each has. The
// store's rules make a count above 1 impossible; the suite counts anyway
// rather than trust them (sqlite.EachStoredSpan passes a span stored twice
// twice).
func sqliteKeys(t *testing.T, path string, nonce [8]byte) (map[uint64]int, storeCounts) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path, ReadOnly: true})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer st.Shutdown(ctx)
	keys := map[uint64]int{}
	var sc storeCounts
	err = st.EachStoredSpan(ctx, func(tid [16]byte, sid [8]byte) {
		sc.Rows++
		k, ok := keyOf(tid[:], sid[:], nonce)
		if !ok {
			sc.Foreign++
			return
		}
		keys[k]++
	})
	if err != nil {
		t.Fatalf("read span ids of %s: %v", path, err)
	}
	sc.Distinct = uint64(len(keys))
	return keys, sc
}
