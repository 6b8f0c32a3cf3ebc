package rollup

import (
	"reflect"
	"testing"
	"time"

	"github.com/loomwork/loomwork/store"
)

func TestTreeOrdersChildrenByStartAndMakesOrphansCyclesAndDuplicatesSafe(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sp := func(id, parent string, start int) store.Span {
		return store.Span{SpanID: id, ParentSpanID: parent, Name: id, StartTime: t0.Add(time.Duration(start) * time.Millisecond), EndTime: t0.Add(time.Duration(start+5) * time.Millisecond)}
	}
	spans := []store.Span{
		sp("root", "", 0),
		sp("late", "root", 30),
		sp("early", "root", 10),
		sp("grand", "early", 12),
		sp("orphan", "gone", 40),
		sp("a", "b", 50), sp("b", "a", 51), // a parent cycle
		sp("early", "root", 10), // a retried export's duplicate
	}
	tr := NewTree(spans)
	var order []string
	depth := map[string]int{}
	tr.Walk(func(i, d int) { order = append(order, spans[i].Name); depth[spans[i].Name] = d })
	want := []string{"root", "early", "grand", "late", "orphan", "a", "b"}
	if !reflect.DeepEqual(order, want) {
		t.Fatalf("walk order %v, want %v (each span once, children by start)", order, want)
	}
	if depth["grand"] != 2 || depth["orphan"] != 0 || depth["b"] != 1 {
		t.Fatalf("depths %v", depth)
	}
	if !tr.Orphaned(4) || tr.Orphaned(0) || tr.Orphaned(5) {
		t.Fatal("only the span whose parent never arrived is orphaned")
	}
}
