package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// stepClock is an injected clock that advances one millisecond per reading.
func stepClock() func() time.Time {
	t := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Millisecond); return t }
}

// chain builds a run's events with Next, as the store would.
func chain(t testing.TB, run string, clock func() time.Time, recs ...Record) []Event {
	var out []Event
	var prev *Event
	for _, r := range recs {
		e, err := Next(run, prev, r, clock())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
		prev = &out[len(out)-1]
	}
	return out
}

// goodJournal returns an exported two-run journal (5 lines each).
func goodJournal(t testing.TB) []byte {
	clock := stepClock()
	var runs [][]Event
	for _, run := range []string{"a", "b"} {
		var recs []Record
		for i, k := range []Kind{KindRunStarted, KindToolCall, KindToolResult, KindRunFinished} {
			recs = append(recs, Record{Kind: k, Step: i, Tool: "calc", Payload: map[string]any{"n": i, "run": run}})
		}
		runs = append(runs, chain(t, run, clock, recs...))
	}
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, runs...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func lines(b []byte) []string {
	return strings.SplitAfter(string(b), "\n")[:strings.Count(string(b), "\n")]
}

func TestReadJSONLRejectsCorruptionNamingTheLine(t *testing.T) {
	good := goodJournal(t)
	cases := []struct {
		name     string
		corrupt  func(ls []string) []string
		wantLine int
		wantErr  error
	}{
		{"altered payload", func(ls []string) []string {
			ls[2] = strings.Replace(ls[2], `"n":2`, `"n":7`, 1)
			return ls
		}, 3, ErrHashMismatch},
		{"altered tool name", func(ls []string) []string {
			ls[1] = strings.Replace(ls[1], `"tool":"calc"`, `"tool":"rm"`, 1)
			return ls
		}, 2, ErrHashMismatch},
		{"removed middle line", func(ls []string) []string { return append(ls[:2:2], ls[3:]...) }, 3, ErrSeqGap},
		{"swapped lines", func(ls []string) []string { ls[1], ls[2] = ls[2], ls[1]; return ls }, 2, ErrSeqGap},
		{"truncated tail (last seal and event gone)", func(ls []string) []string { return ls[:len(ls)-2] }, 9, ErrTruncated},
		{"torn last line", func(ls []string) []string {
			ls[len(ls)-1] = ls[len(ls)-1][:40] // no newline: the write was cut short
			return ls
		}, 10, ErrBadLine},
		{"unknown field", func(ls []string) []string {
			ls[0] = strings.Replace(ls[0], `{"v":1,`, `{"v":1,"extra":1,`, 1)
			return ls
		}, 1, ErrBadLine},
		{"future version", func(ls []string) []string {
			ls[0] = strings.Replace(ls[0], `{"v":1,`, `{"v":2,`, 1)
			return ls
		}, 1, ErrVersion},
		{"empty line", func(ls []string) []string { return append(ls[:3:3], append([]string{"\n"}, ls[3:]...)...) }, 4, ErrBadLine},
		{"event after seal", func(ls []string) []string { return append(ls, ls[3]) }, 11, ErrAfterSeal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ls := tc.corrupt(lines(good))
			_, err := ReadJSONL(strings.NewReader(strings.Join(ls, "")), "fixture.jsonl")
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *CorruptionError", err)
			}
			if ce.Line != tc.wantLine || !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v (line %d), want line %d and %v", err, ce.Line, tc.wantLine, tc.wantErr)
			}
			if !strings.Contains(err.Error(), "fixture.jsonl:") {
				t.Fatalf("error does not name the file: %v", err)
			}
		})
	}
}

func TestReadJSONLSkipsNothingAndKeepsUnknownKinds(t *testing.T) {
	runs, err := ReadJSONL(bytes.NewReader(goodJournal(t)), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[1].ID != "b" || len(runs[1].Events) != 4 || runs[1].LineOf(1) != 6 {
		t.Fatalf("runs = %+v", runs)
	}
}

func FuzzReadJSONL(f *testing.F) {
	good := goodJournal(f)
	f.Add(good)
	ls := lines(good)
	f.Add([]byte(strings.Join(ls[:3], "")))
	f.Add([]byte(ls[0]))
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte("{}\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		runs, err := ReadJSONL(bytes.NewReader(data), "fuzz")
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.Line < 1 {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		// Whatever is accepted must re-export to a journal that reads back
		// the same.
		var all [][]Event
		for _, r := range runs {
			if err := VerifyChain(r.Events); err != nil {
				t.Fatalf("accepted a broken chain: %v", err)
			}
			all = append(all, r.Events)
		}
		var buf bytes.Buffer
		if err := WriteJSONL(&buf, all...); err != nil {
			t.Fatal(err)
		}
		again, err := ReadJSONL(&buf, "again")
		if err != nil || len(again) != len(runs) {
			t.Fatalf("re-export does not read back: %v", err)
		}
	})
}

func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1,"\u0001",{"b":null}]`, `"é\n"`, `{"a":{"a":{}}}`, `1e5`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Canonical(data)
		if err != nil {
			return
		}
		c2, err := Canonical(c)
		if err != nil || !bytes.Equal(c, c2) {
			t.Fatalf("canonical form is not a fixed point: %q -> %q (%v)", c, c2, err)
		}
	})
}

// BenchmarkReadJSONL measures reading and verifying an exported journal
// (MB/s is JSONL throughput).
func BenchmarkReadJSONL(b *testing.B) {
	recs := make([]Record, 1000)
	for i := range recs {
		recs[i] = Record{Kind: KindToolResult, Step: i, Tool: "search", CallID: fmt.Sprint(i),
			Payload: ToolResult{Content: "[doc:policy/meals] Meals are reimbursed up to 40 EUR per day with a receipt.", Documents: []string{"policy/meals"}}}
	}
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, chain(b, "r", stepClock(), recs...)); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadJSONL(bytes.NewReader(data), "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestNextBuildsAVerifiableChain(t *testing.T) {
	evs := chain(t, "r", stepClock(), Record{Kind: KindRunStarted}, Record{Kind: KindModelRequest, Payload: json.RawMessage(`{"b":1, "a":2}`)})
	if err := VerifyChain(evs); err != nil {
		t.Fatal(err)
	}
	if string(evs[1].Payload) != `{"a":2,"b":1}` || evs[1].Prev != evs[0].Hash || evs[1].Seq != 2 {
		t.Fatalf("events = %+v", evs)
	}
	evs[1].Payload = json.RawMessage(`{"a":3,"b":1}`)
	if err := VerifyChain(evs); !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("altered payload: %v", err)
	}
}
