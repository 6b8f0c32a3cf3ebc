package clickhouse

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
)

// presizeColumns leaves every column empty, and a presized column sends
// byte for byte what a fresh one sends; and it does size them (fewer
// allocations for the append that follows).
func TestPresizedColumnsEncodeLikeFreshOnes(t *testing.T) {
	const rows = 1000
	strs := make([]string, rows)
	ints := make([]int64, rows)
	u32s := make([]uint32, rows)
	times := make([]time.Time, rows)
	bools := make([]bool, rows)
	for i := range rows {
		strs[i] = strings.Repeat("é", i%40) + "x"
		ints[i] = int64(i) * -7
		u32s[i] = uint32(i) * 3
		times[i] = time.Unix(1700000000, int64(i)).UTC()
		bools[i] = i%3 == 0
	}
	// Two String columns: the sizer one column leaves must size the next.
	types := []column.Type{"String", "Int64", "String", "UInt32", "DateTime64(9)", "Bool"}
	data := []any{strs, ints, strs[:rows/2], u32s, times, bools}
	newCols := func() []column.Interface {
		cols := make([]column.Interface, len(types))
		for i, typ := range types {
			c, err := typ.Column("c", &column.ServerContext{})
			if err != nil {
				t.Fatalf("column %s: %v", typ, err)
			}
			cols[i] = c
		}
		return cols
	}
	encode := func(cols []column.Interface) [][]byte {
		out := make([][]byte, len(cols))
		for i, c := range cols {
			if _, err := c.Append(data[i]); err != nil {
				t.Fatalf("append to %s: %v", types[i], err)
			}
			var b proto.Buffer
			c.Encode(&b)
			out[i] = b.Buf
		}
		return out
	}
	presized := newCols()
	presizeColumns(presized, data, rows, newSizer())
	for i, c := range presized {
		if c.Rows() != 0 {
			t.Fatalf("presized %s column holds %d rows, want 0", types[i], c.Rows())
		}
	}
	want, got := encode(newCols()), encode(presized)
	for i := range want {
		if !bytes.Equal(want[i], got[i]) {
			t.Errorf("%s column: presized encoding differs from a fresh column's", types[i])
		}
	}

	allocs := func(presize bool) float64 {
		return testing.AllocsPerRun(20, func() {
			c, _ := column.Type("String").Column("c", &column.ServerContext{})
			if presize {
				presizeColumns([]column.Interface{c}, []any{strs}, rows, newSizer())
			}
			_, _ = c.Append(strs)
		})
	}
	// The real append into a presized column allocates nothing but the
	// driver's null mask; measured here with the presizing included.
	fresh, sized := allocs(false), allocs(true)
	t.Logf("appending %d strings: %v allocations fresh, %v presized (presizing included)", rows, fresh, sized)
	if sized >= fresh {
		t.Errorf("appending %d strings: %v allocations presized, %v fresh; want fewer presized", rows, sized, fresh)
	}
}

// BenchmarkAppendColumns appends one insert's worth of rows (32,768) to
// fresh driver columns of the span table's kinds, with and without
// presizeColumns, and encodes them as the driver sends them.
func BenchmarkAppendColumns(b *testing.B) {
	const rows = 1 << 15
	var data []any
	var types []column.Type
	for c := range 20 {
		strs := make([]string, rows)
		for i := range strs {
			strs[i] = strings.Repeat("a", (c*7+i)%48)
		}
		data, types = append(data, strs), append(types, "String")
	}
	for range 6 {
		data, types = append(data, make([]int64, rows)), append(types, "Int64")
		data, types = append(data, make([]uint32, rows)), append(types, "UInt32")
	}
	for _, presize := range []bool{false, true} {
		name := "fresh"
		if presize {
			name = "presized"
		}
		b.Run(name, func(b *testing.B) {
			z := newSizer()
			var buf proto.Buffer
			b.ReportAllocs()
			for b.Loop() {
				cols := make([]column.Interface, len(types))
				for i, typ := range types {
					cols[i], _ = typ.Column("c", &column.ServerContext{})
				}
				if presize {
					presizeColumns(cols, data, rows, z)
				}
				buf.Reset()
				for i, c := range cols {
					if _, err := c.Append(data[i]); err != nil {
						b.Fatal(err)
					}
					c.Encode(&buf)
				}
			}
		})
	}
}
