// Package sse reads Server-Sent Events streams (the WHATWG "text/event-stream"
// format) as both model providers send them for streamed responses.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxEventBytes bounds one event's data, so a misbehaving server cannot make
// the reader buffer without limit.
const MaxEventBytes = 8 << 20

// Event is one dispatched event.
type Event struct {
	Name string // the "event:" field; empty when the server sent none
	Data []byte // the "data:" lines joined with "\n"
}

// Reader yields events from a stream.
type Reader struct {
	r    *bufio.Reader
	line int
}

// NewReader reads events from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 4<<10)} // long lines are reassembled in readLine
}

// ErrEventTooLarge is returned when an event's data exceeds MaxEventBytes.
var ErrEventTooLarge = errors.New("sse: event larger than limit")

// Next returns the next event. It returns io.EOF when the stream ends
// cleanly between events, and io.ErrUnexpectedEOF when it ends inside one.
func (r *Reader) Next() (Event, error) {
	var (
		ev      Event
		hasData bool
		inEvent bool
	)
	for {
		line, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if inEvent {
					// The spec discards an undispatched event at EOF; report it
					// so callers can tell a cut stream from a finished one.
					return Event{}, io.ErrUnexpectedEOF
				}
				return Event{}, io.EOF
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if !inEvent {
				continue
			}
			if !hasData {
				// An event with no data is not dispatched (spec); reset.
				ev, inEvent = Event{}, false
				continue
			}
			return ev, nil
		}
		if line[0] == ':' { // comment, e.g. keep-alive
			continue
		}
		inEvent = true
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.Name = string(value)
		case "data":
			if hasData {
				ev.Data = append(ev.Data, '\n')
			}
			if len(ev.Data)+len(value) > MaxEventBytes {
				return Event{}, fmt.Errorf("line %d: %w", r.line, ErrEventTooLarge)
			}
			ev.Data = append(ev.Data, value...)
			hasData = true
		}
		// id and retry fields are irrelevant for one-shot model streams.
	}
}

// readLine returns one line without its terminator (\n, \r\n or \r).
func (r *Reader) readLine() ([]byte, error) {
	var buf []byte
	for {
		frag, err := r.r.ReadSlice('\n')
		if len(buf)+len(frag) > MaxEventBytes+64 {
			return nil, fmt.Errorf("line %d: %w", r.line+1, ErrEventTooLarge)
		}
		buf = append(buf, frag...)
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && len(buf) > 0 {
			break // last line without terminator
		}
		return nil, err
	}
	r.line++
	buf = bytes.TrimSuffix(buf, []byte("\n"))
	buf = bytes.TrimSuffix(buf, []byte("\r"))
	return buf, nil
}
