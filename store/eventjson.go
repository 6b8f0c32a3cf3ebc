package store

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// AppendEventsJSON appends the JSON encoding of events to dst: the bytes
// encoding/json.Marshal writes for them, without its reflection (which
// was ~8% of serve's CPU at ingest on agent traffic, whose failed spans
// carry exception events with stack traces). FuzzAppendEventsJSON holds
// it to json.Marshal.
func AppendEventsJSON(dst []byte, events []Event) ([]byte, error) {
	if events == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	for i := range events {
		e := &events[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"time":`...)
		var err error
		if dst, err = appendJSONTime(dst, e.Time); err != nil {
			return nil, fmt.Errorf("event %d: time: %w", i, err)
		}
		dst = append(dst, `,"name":`...)
		dst = AppendJSONString(dst, e.Name)
		if len(e.Attributes) > 0 {
			dst = append(dst, `,"attributes":`...)
			if dst, err = appendJSONMap(dst, e.Attributes, nil, -1, nil); err != nil {
				return nil, fmt.Errorf("event %d: %w", i, err)
			}
		}
		if e.DroppedAttributesCount != 0 {
			dst = append(dst, `,"dropped_attributes_count":`...)
			dst = strconv.AppendUint(dst, uint64(e.DroppedAttributesCount), 10)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']'), nil
}

// AppendLinksJSON appends the JSON encoding of links to dst, as
// encoding/json.Marshal writes it (FuzzAppendLinksJSON).
func AppendLinksJSON(dst []byte, links []Link) ([]byte, error) {
	if links == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	for i := range links {
		l := &links[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"trace_id":`...)
		dst = AppendJSONString(dst, l.TraceID)
		dst = append(dst, `,"span_id":`...)
		dst = AppendJSONString(dst, l.SpanID)
		if l.TraceState != "" {
			dst = append(dst, `,"trace_state":`...)
			dst = AppendJSONString(dst, l.TraceState)
		}
		if len(l.Attributes) > 0 {
			dst = append(dst, `,"attributes":`...)
			var err error
			if dst, err = appendJSONMap(dst, l.Attributes, nil, -1, nil); err != nil {
				return nil, fmt.Errorf("link %d: %w", i, err)
			}
		}
		if l.Flags != 0 {
			dst = append(dst, `,"flags":`...)
			dst = strconv.AppendUint(dst, uint64(l.Flags), 10)
		}
		if l.DroppedAttributesCount != 0 {
			dst = append(dst, `,"dropped_attributes_count":`...)
			dst = strconv.AppendUint(dst, uint64(l.DroppedAttributesCount), 10)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']'), nil
}

// appendJSONTime writes t as time.Time.MarshalJSON does: RFC 3339 with
// nanoseconds, quoted, refusing what RFC 3339 cannot say.
func appendJSONTime(dst []byte, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		return nil, errors.New("Time.MarshalJSON: year outside of range [0,9999]")
	}
	if _, off := t.Zone(); off <= -24*60*60 || off >= 24*60*60 {
		return nil, errors.New("Time.MarshalJSON: timezone hour outside of range [0,23]")
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"'), nil
}
