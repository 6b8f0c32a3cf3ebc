package journal

import (
	"fmt"
)

// Divergence codes. They are stable: tools and CI logs match on them.
const (
	// CodeMismatch: the journal's event at a sequence number and the event
	// the run produces there differ in kind, step, tool, call id or
	// argument hash. The run is not the one that was recorded.
	CodeMismatch = "LWR1100"
	// CodeExtra: the run produced an event after the journal's last one
	// where the journal is complete (it ends with run_finished).
	CodeExtra = "LWR1101"
	// CodeMissing: the run finished while the journal still has events.
	CodeMissing = "LWR1102"
	// CodeResultDiffers: a re-executed tool returned a different result
	// than the recorded one (reported by the replay engine; not a
	// divergence of control flow).
	CodeResultDiffers = "LWR1200"
)

// EventRef is the part of an event divergence checking compares.
type EventRef struct {
	Kind     Kind   `json:"kind"`
	Step     int    `json:"step"`
	Tool     string `json:"tool,omitempty"`
	CallID   string `json:"call_id,omitempty"`
	ArgsHash string `json:"args_hash,omitempty"`
}

// RefOf is the part of a journal event divergence checking compares.
func RefOf(e Event) EventRef {
	return EventRef{Kind: e.Kind, Step: e.Step, Tool: e.Tool, CallID: e.CallID, ArgsHash: e.ArgsHash}
}

// RefOfRecord is the same for a record about to be appended.
func RefOfRecord(r Record) EventRef {
	return EventRef{Kind: r.Kind, Step: r.Step, Tool: r.Tool, CallID: r.CallID, ArgsHash: r.ArgsHash}
}

func (r EventRef) String() string {
	s := fmt.Sprintf("%s(step=%d", r.Kind, r.Step)
	if r.Tool != "" {
		s += " tool=" + r.Tool
	}
	if r.CallID != "" {
		s += " call=" + r.CallID
	}
	if r.ArgsHash != "" {
		h := r.ArgsHash
		if len(h) > 19 {
			h = h[:19] // "sha256:" + 12 hex digits is enough to tell two apart
		}
		s += " args=" + h
	}
	return s + ")"
}

// Compare returns the name of the first field in which a and b differ
// ("" when they agree).
func Compare(a, b EventRef) string {
	switch {
	case a.Kind != b.Kind:
		return "kind"
	case a.Step != b.Step:
		return "step"
	case a.Tool != b.Tool:
		return "tool"
	case a.CallID != b.CallID:
		return "call_id"
	case a.ArgsHash != b.ArgsHash:
		return "args_hash"
	}
	return ""
}

// DivergenceError reports the first point where a run departs from its
// journal, with both sides, in the manner of Temporal's [TMPRL1100].
type DivergenceError struct {
	Code     string    `json:"code"`
	RunID    string    `json:"run_id"`
	Seq      int64     `json:"seq"`                // the journal sequence number where the run departs
	Field    string    `json:"field,omitempty"`    // the first differing field, for CodeMismatch
	Recorded *EventRef `json:"recorded,omitempty"` // nil for CodeExtra
	Produced *EventRef `json:"produced,omitempty"` // nil for CodeMissing
	Detail   string    `json:"detail,omitempty"`
}

func (e *DivergenceError) Error() string {
	switch e.Code {
	case CodeExtra:
		return fmt.Sprintf("[%s] nondeterministic run %s at seq %d: the journal has no event here, the run produced %s", e.Code, e.RunID, e.Seq, e.Produced)
	case CodeMissing:
		return fmt.Sprintf("[%s] nondeterministic run %s at seq %d: the journal has %s, the run produced nothing more", e.Code, e.RunID, e.Seq, e.Recorded)
	}
	msg := fmt.Sprintf("[%s] nondeterministic run %s at seq %d: journal has %s, run produced %s", e.Code, e.RunID, e.Seq, e.Recorded, e.Produced)
	if e.Field != "" {
		msg += " (" + e.Field + " differs)"
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}
