package memory

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/journal"
)

// FuzzFromJournal feeds arbitrary payloads to the journal reader: it never
// panics, and whatever it accepts distills into records with a key, a
// known kind, a salience in [0, 1] and non-empty text.
func FuzzFromJournal(f *testing.F) {
	f.Add("step", []byte(`{"step":"diagnose","event":"failed","error":"x"}`))
	f.Add("tool_result", []byte(`{"content":"boom","is_error":true}`))
	f.Add("policy_decision", []byte(`{"verdict":{"decision":"deny"}}`))
	f.Add("run_finished", []byte(`{"answer":"see [docs/a.md#b]","citations":["docs/a.md"]}`))
	f.Add("run_started", []byte(`{"input":"q"}`))
	f.Add("policy_decision", []byte(`"allow"`))
	f.Fuzz(func(t *testing.T, kind string, payload []byte) {
		if !json.Valid(payload) {
			return
		}
		run := journal.Run{ID: "r", Events: []journal.Event{
			{RunID: "r", Seq: 1, Kind: journal.KindRunStarted, Payload: json.RawMessage(`{"input":"task"}`)},
			{RunID: "r", Seq: 2, Kind: journal.Kind(kind), Tool: "t", Payload: payload},
			{RunID: "r", Seq: 3, Kind: journal.Kind(kind), Tool: "t", Payload: payload},
		}}
		evs, err := FromJournal(run)
		if err != nil {
			return
		}
		for _, r := range Distill(evs, "r", time.Unix(0, 0)) {
			if r.Key == "" || r.Text == "" || r.Salience < 0 || r.Salience > 1 {
				t.Fatalf("bad record %+v", r)
			}
			if _, err := ParseKind(string(r.Kind)); err != nil {
				t.Fatal(err)
			}
		}
	})
}
