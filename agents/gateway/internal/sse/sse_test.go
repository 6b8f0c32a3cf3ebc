package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func readAll(t *testing.T, s string) ([]Event, error) {
	t.Helper()
	r := NewReader(strings.NewReader(s))
	var evs []Event
	for {
		ev, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return evs, nil
			}
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func TestEventsAreSplitOnBlankLinesWithNamesCommentsAndCRLF(t *testing.T) {
	in := ": ping\r\n\r\nevent: message_start\r\ndata: {\"a\":1}\r\n\r\ndata: line one\ndata:line two\n\nevent: empty\n\ndata: [DONE]\n\n"
	evs, err := readAll(t, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Fatalf("events = %+v", evs)
	}
	if evs[0].Name != "message_start" || string(evs[0].Data) != `{"a":1}` {
		t.Fatalf("first = %+v", evs[0])
	}
	if evs[1].Name != "" || string(evs[1].Data) != "line one\nline two" {
		t.Fatalf("second = %q", evs[1].Data)
	}
	if string(evs[2].Data) != "[DONE]" {
		t.Fatalf("third = %q", evs[2].Data)
	}
}

func TestStreamCutInsideAnEventIsUnexpectedEOF(t *testing.T) {
	_, err := readAll(t, "data: {\"a\":1}\n\ndata: {\"partial\"")
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v", err)
	}
}

func TestOversizedEventIsRefused(t *testing.T) {
	big := "data: " + strings.Repeat("x", MaxEventBytes+10) + "\n\n"
	_, err := readAll(t, big)
	if !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("err = %v", err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("event: a\ndata: 1\n\n"))
	f.Add([]byte(": c\r\n\r\ndata: x\r\ndata: y\r\n\r\n"))
	f.Add([]byte("data: cut"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		total := 0
		for i := 0; ; i++ {
			ev, err := r.Next()
			if err != nil {
				break
			}
			total += len(ev.Data)
			if total > len(in) || i > len(in) {
				t.Fatalf("reader produced more than it read")
			}
		}
	})
}
