package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// MaxLineBytes bounds one JSONL line; a longer line is reported as corrupt
// rather than read into memory without limit.
const MaxLineBytes = 64 << 20

// line is the JSONL form of an event: the Event fields plus the format
// version, with the time as text.
type line struct {
	V        int             `json:"v"`
	Run      string          `json:"run"`
	Seq      int64           `json:"seq"`
	Kind     Kind            `json:"kind"`
	Step     int             `json:"step"`
	Tool     string          `json:"tool,omitempty"`
	CallID   string          `json:"call_id,omitempty"`
	ArgsHash string          `json:"args_hash,omitempty"`
	Label    string          `json:"label,omitempty"`
	Time     string          `json:"time"`
	Payload  json.RawMessage `json:"payload"`
	Prev     string          `json:"prev"`
	Hash     string          `json:"hash"`
}

// Run is one run's verified events read from a JSONL journal.
type Run struct {
	ID     string
	Events []Event // seq 1..n, without the seal
	Lines  []int   // Lines[i] is the line Events[i] was read from
	File   string
}

// LineOf returns the line the event with seq was read from, or 0.
func (r *Run) LineOf(seq int64) int {
	if seq >= 1 && int(seq) <= len(r.Lines) {
		return r.Lines[seq-1]
	}
	return 0
}

// WriteJSONL writes runs as JSONL: each run's events in order, one per
// line, followed by its seal line. Every run must be a complete, verified
// chain (as returned by Store.Events).
func WriteJSONL(w io.Writer, runs ...[]Event) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for _, evs := range runs {
		if len(evs) == 0 {
			continue
		}
		if err := VerifyChain(evs); err != nil {
			return fmt.Errorf("export journal: %w", err)
		}
		for _, e := range evs {
			if err := enc.Encode(toLine(e)); err != nil {
				return fmt.Errorf("export journal: run %s seq %d: %w", e.RunID, e.Seq, err)
			}
		}
		last := evs[len(evs)-1]
		seal := Event{RunID: last.RunID, Seq: last.Seq + 1, Kind: KindSeal, Time: last.Time, Prev: last.Hash}
		seal.Payload, _ = json.Marshal(Seal{Events: last.Seq})
		h, err := computeHash(&seal)
		if err != nil {
			return fmt.Errorf("export journal: seal run %s: %w", last.RunID, err)
		}
		seal.Hash = h
		if err := enc.Encode(toLine(seal)); err != nil {
			return fmt.Errorf("export journal: seal run %s: %w", last.RunID, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export journal: %w", err)
	}
	return nil
}

func toLine(e Event) line {
	return line{
		V: FormatVersion, Run: e.RunID, Seq: e.Seq, Kind: e.Kind, Step: e.Step, Tool: e.Tool,
		CallID: e.CallID, ArgsHash: e.ArgsHash, Label: e.Label, Time: formatTime(e.Time),
		Payload: e.Payload, Prev: e.Prev, Hash: e.Hash,
	}
}

// ReadJSONLFile opens path and reads it with ReadJSONL.
func ReadJSONLFile(path string) ([]Run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	defer f.Close()
	return ReadJSONL(f, path)
}

// ReadJSONL reads and verifies a JSONL journal. Runs may interleave; each
// must be a gap-free hash chain from seq 1 closed by its seal. Any line
// that fails — bad JSON, unknown field, wrong version, altered content,
// broken chain, gap, event after a seal, or a run without a seal (a
// truncated file) — rejects the whole journal with a *CorruptionError
// naming the file and line. Unknown event kinds (from a later format
// revision) are kept: the chain covers them, and readers skip them.
func ReadJSONL(r io.Reader, name string) ([]Run, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	type state struct {
		run      *Run
		lastHash string
		lastLine int
		sealed   bool
	}
	byID := map[string]*state{}
	var order []string
	n := 0
	for sc.Scan() {
		n++
		raw := sc.Bytes()
		fail := func(runID string, seq int64, err error) error {
			return &CorruptionError{File: name, Line: n, RunID: runID, Seq: seq, Err: err}
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			return nil, fail("", 0, fmt.Errorf("%w: empty line", ErrBadLine))
		}
		e, err := decodeLine(raw)
		if err != nil {
			return nil, fail("", 0, err)
		}
		st := byID[e.RunID]
		if st == nil {
			st = &state{run: &Run{ID: e.RunID, File: name}}
			byID[e.RunID] = st
			order = append(order, e.RunID)
		}
		if st.sealed {
			return nil, fail(e.RunID, e.Seq, ErrAfterSeal)
		}
		want := int64(len(st.run.Events)) + 1
		if e.Seq != want {
			return nil, fail(e.RunID, e.Seq, fmt.Errorf("%w: expected seq %d", ErrSeqGap, want))
		}
		h, err := computeHash(&e)
		if err != nil {
			return nil, fail(e.RunID, e.Seq, fmt.Errorf("%w: %v", ErrBadLine, err))
		}
		if h != e.Hash {
			return nil, fail(e.RunID, e.Seq, ErrHashMismatch)
		}
		if e.Prev != st.lastHash {
			return nil, fail(e.RunID, e.Seq, ErrChainBroken)
		}
		st.lastHash, st.lastLine = e.Hash, n
		if e.Kind == KindSeal {
			var seal Seal
			if err := json.Unmarshal(e.Payload, &seal); err != nil || seal.Events != e.Seq-1 {
				return nil, fail(e.RunID, e.Seq, fmt.Errorf("%w: seal payload must be {\"events\": %d}", ErrBadLine, e.Seq-1))
			}
			st.sealed = true
			continue
		}
		st.run.Events = append(st.run.Events, e)
		st.run.Lines = append(st.run.Lines, n)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("%w: longer than %d bytes", ErrBadLine, MaxLineBytes)
		}
		return nil, &CorruptionError{File: name, Line: n + 1, Err: err}
	}
	if n == 0 {
		return nil, &CorruptionError{File: name, Line: 1, Err: fmt.Errorf("%w: empty journal", ErrTruncated)}
	}
	runs := make([]Run, 0, len(order))
	for _, id := range order {
		st := byID[id]
		if !st.sealed {
			return nil, &CorruptionError{File: name, Line: n + 1, RunID: id, Seq: int64(len(st.run.Events)) + 1,
				Err: fmt.Errorf("%w (its last event is on line %d)", ErrTruncated, st.lastLine)}
		}
		runs = append(runs, *st.run)
	}
	return runs, nil
}

func decodeLine(raw []byte) (Event, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var l line
	if err := dec.Decode(&l); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrBadLine, err)
	}
	if dec.More() {
		return Event{}, fmt.Errorf("%w: data after the event object", ErrBadLine)
	}
	if l.V != FormatVersion {
		return Event{}, fmt.Errorf("%w: v is %d, this build reads %d", ErrVersion, l.V, FormatVersion)
	}
	switch {
	case l.Run == "":
		return Event{}, fmt.Errorf("%w: field run is missing", ErrBadLine)
	case l.Kind == "":
		return Event{}, fmt.Errorf("%w: field kind is missing", ErrBadLine)
	case l.Hash == "":
		return Event{}, fmt.Errorf("%w: field hash is missing", ErrBadLine)
	case len(l.Payload) == 0:
		return Event{}, fmt.Errorf("%w: field payload is missing", ErrBadLine)
	}
	t, err := time.Parse(time.RFC3339Nano, l.Time)
	if err != nil {
		return Event{}, fmt.Errorf("%w: field time: %v", ErrBadLine, err)
	}
	cp, err := Canonical(l.Payload)
	if err != nil {
		return Event{}, fmt.Errorf("%w: field payload: %v", ErrBadLine, err)
	}
	return Event{
		RunID: l.Run, Seq: l.Seq, Kind: l.Kind, Step: l.Step, Tool: l.Tool, CallID: l.CallID,
		ArgsHash: l.ArgsHash, Label: l.Label, Time: t.UTC(), Payload: cp, Prev: l.Prev, Hash: l.Hash,
	}, nil
}
