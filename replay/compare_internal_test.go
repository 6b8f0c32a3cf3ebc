package replay

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/journal"
)

// A tool result that does not decode, on either side, cannot be compared:
// it is a divergence (LWR1100, field payload, naming the side), never a
// match; a decodable different result stays a result difference.
func TestAToolResultThatDoesNotDecodeIsADivergence(t *testing.T) {
	good, _ := json.Marshal(journal.ToolResult{Content: "42"})
	other, _ := json.Marshal(journal.ToolResult{Content: "43"})
	bad := json.RawMessage(`{"content": 5}`)
	ev := func(p json.RawMessage) journal.Event {
		return journal.Event{Seq: 7, Kind: journal.KindToolResult, Step: 1, Tool: "calc", CallID: "c1", Payload: p}
	}
	for _, c := range []struct {
		name      string
		want, got json.RawMessage
		side      string
	}{{"recorded", bad, good, "recorded"}, {"produced", good, bad, "produced"}} {
		ch := &checker{run: journal.Run{ID: "r"}, rep: &journal.ReplayReport{}}
		de := ch.compareResult(ev(c.want), ev(c.got))
		if de == nil || de.Code != journal.CodeMismatch || de.Field != "payload" || !strings.Contains(de.Detail, "the "+c.side+" tool_result of calc does not decode") {
			t.Errorf("%s side undecodable: %+v", c.name, de)
		}
		var target *journal.DivergenceError
		if de != nil && !errors.As(error(de), &target) {
			t.Errorf("not a *DivergenceError")
		}
	}
	ch := &checker{run: journal.Run{ID: "r"}, rep: &journal.ReplayReport{}}
	if de := ch.compareResult(ev(good), ev(other)); de != nil || len(ch.rep.ResultDiffs) != 1 || !ch.resultsDiffer {
		t.Fatalf("a different result: %+v, diffs %+v", de, ch.rep.ResultDiffs)
	}
}
