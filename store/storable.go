package store

import (
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// The one rule for what a store can hold (issue 36): a span CheckStorable
// accepts, every backend stores and reads back; a span it refuses, no
// backend stores — the collector rejects it alone (OTLP partial_success)
// before acknowledging, and each backend's write refuses it too. Before,
// each store had its own idea: SQLite stored a start of 2^64−1 ns that
// ClickHouse refused, and a 2,000-level nested attribute failed its whole
// request at decoding.

// MaxAttributeDepth is how deeply an attribute value may nest arrays and
// maps: a scalar is depth 0, a map of scalars 1, a map holding a map 2.
// OTLP's decoders stop at 100 levels of protobuf messages (KeyValue,
// AnyValue and KeyValueList each count one), which is 32 levels of maps;
// deeper values, which no agent framework sends, would cost every reader
// (the stores' JSON search functions refuse documents nested ~1,000 deep).
const MaxAttributeDepth = 32

// Storable time range, inclusive of From and exclusive of Until: what
// ClickHouse's DateTime64(9) holds (1900-01-01 to 2262-04-11), within
// int64 nanoseconds since the epoch, which the embedded store keeps.
var (
	StorableFrom  = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	StorableUntil = time.Date(2262, 4, 11, 0, 0, 0, 0, time.UTC)
)

// ErrUnstorable is wrapped by CheckStorable's error: the span can never be
// stored as it is, so retrying cannot help.
var ErrUnstorable = errors.New("span cannot be stored")

// ErrTooDeep is wrapped by the error for an attribute value nested deeper
// than MaxAttributeDepth.
var ErrTooDeep = fmt.Errorf("nested deeper than %d levels of arrays and maps", MaxAttributeDepth)

// unstorable wraps ErrUnstorable into err without changing its message.
type unstorable struct{ err error }

func (e unstorable) Error() string   { return e.err.Error() }
func (e unstorable) Unwrap() []error { return []error{e.err, ErrUnstorable} }

// CheckStorable reports why no store can hold sp, or nil: an id that is
// not lower-case hex of its length or is all zero (trace_id 32 digits,
// span_id and a set parent_span_id 16), a start or end time outside
// [StorableFrom, StorableUntil), an attribute value (of the span, its
// resource, scope, events or links) nested deeper than MaxAttributeDepth.
// The error names the field and wraps ErrUnstorable; it does not name the
// span (callers do: "span %q (trace_id …, span_id …): …").
func CheckStorable(sp *Span) error {
	if err := checkStorable(sp); err != nil {
		return unstorable{err}
	}
	return nil
}

// CheckStorableExceptAttributes is CheckStorable without the depth rule
// for the span's own, resource and scope attributes (events' and links'
// are checked): for a store that encodes those maps with
// Attributes.AppendStorableJSON, which applies the rule as it goes, and
// calls CheckStorable for the words of the error when that fails.
func CheckStorableExceptAttributes(sp *Span) error {
	err := checkFields(sp)
	if err == nil {
		err = checkEventsLinks(sp)
	}
	if err != nil {
		return unstorable{err}
	}
	return nil
}

// StorableChecker is CheckStorable for the spans of one batch: the
// resource and scope attribute maps that the spans of one OTLP resource
// or scope share are checked once, not once per span. Its zero value is
// ready; it must not outlive the batch, nor the maps change while it is
// used (it knows a map checked by its address).
type StorableChecker struct {
	resource, scope unsafe.Pointer // the last map of each found storable
}

// Check is CheckStorable(sp).
func (c *StorableChecker) Check(sp *Span) error {
	if err := c.check(sp); err != nil {
		return unstorable{err}
	}
	return nil
}

func (c *StorableChecker) check(sp *Span) error {
	if err := checkFields(sp); err != nil {
		return err
	}
	if err := checkDepth("attribute", sp.Attributes); err != nil {
		return err
	}
	if p := mapPointer(sp.ResourceAttributes); p == nil || p != c.resource {
		if err := checkDepth("resource attribute", sp.ResourceAttributes); err != nil {
			return err
		}
		c.resource = p
	}
	if p := mapPointer(sp.ScopeAttributes); p == nil || p != c.scope {
		if err := checkDepth("scope attribute", sp.ScopeAttributes); err != nil {
			return err
		}
		c.scope = p
	}
	return checkEventsLinks(sp)
}

// mapPointer is a map's identity: its address, nil for a nil map.
func mapPointer(a Attributes) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&a))
}

func checkStorable(sp *Span) error {
	if err := checkFields(sp); err != nil {
		return err
	}
	if err := checkDepth("attribute", sp.Attributes); err != nil {
		return err
	}
	if err := checkDepth("resource attribute", sp.ResourceAttributes); err != nil {
		return err
	}
	if err := checkDepth("scope attribute", sp.ScopeAttributes); err != nil {
		return err
	}
	return checkEventsLinks(sp)
}

// checkFields checks the ids and the times.
func checkFields(sp *Span) error {
	if err := checkHexID(sp.TraceID, 16); err != nil {
		return fmt.Errorf("trace_id: %w", err)
	}
	if err := checkHexID(sp.SpanID, 8); err != nil {
		return fmt.Errorf("span_id: %w", err)
	}
	if sp.ParentSpanID != "" {
		if err := checkHexID(sp.ParentSpanID, 8); err != nil {
			return fmt.Errorf("parent_span_id: %w", err)
		}
	}
	if err := CheckStorableTime(sp.StartTime); err != nil {
		return fmt.Errorf("start_time: %w", err)
	}
	if err := CheckStorableTime(sp.EndTime); err != nil {
		return fmt.Errorf("end_time: %w", err)
	}
	return nil
}

// checkEventsLinks applies the depth rule to events' and links'
// attributes.
func checkEventsLinks(sp *Span) error {
	for i := range sp.Events {
		if err := checkDepth(fmt.Sprintf("event %d attribute", i), sp.Events[i].Attributes); err != nil {
			return err
		}
	}
	for i := range sp.Links {
		if err := checkDepth(fmt.Sprintf("link %d attribute", i), sp.Links[i].Attributes); err != nil {
			return err
		}
	}
	return nil
}

// CheckStorableTime reports a time outside [StorableFrom, StorableUntil).
func CheckStorableTime(t time.Time) error {
	if t.Before(StorableFrom) || !t.Before(StorableUntil) {
		return fmt.Errorf("%s is outside the storable range (1900-01-01 to 2262-04-11); is it unset?", t.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// TooDeep is the error for attribute key (what: "attribute", "resource
// attribute", …) nested deeper than MaxAttributeDepth: the words
// CheckStorable uses, for a decoder that stops before the value is whole.
func TooDeep(what, key string) error {
	return unstorable{fmt.Errorf("%s %q: %w", what, key, ErrTooDeep)}
}

// checkDepth reports the first attribute of attrs nested too deep.
func checkDepth(what string, attrs Attributes) error {
	for k, v := range attrs {
		if !shallow(v, MaxAttributeDepth) {
			return TooDeep(what, k)
		}
	}
	return nil
}

// shallow reports whether v nests arrays and maps at most left deep.
func shallow(v any, left int) bool {
	switch t := v.(type) {
	case []any:
		if left == 0 {
			return false
		}
		for _, e := range t {
			if !shallow(e, left-1) {
				return false
			}
		}
	case map[string]any:
		if left == 0 {
			return false
		}
		for _, e := range t {
			if !shallow(e, left-1) {
				return false
			}
		}
	case Attributes:
		return shallow(map[string]any(t), left)
	}
	return true
}

// notHex[c] is 1 unless c is a lower-case hex digit.
var notHex = func() (t [256]byte) {
	for c := range t {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			t[c] = 1
		}
	}
	return t
}()

// checkHexID accepts n bytes as lower-case hex, not all zero (OTLP's
// invalid id). Every span's ids pass here on the way in: one pass without
// branches for the common case, the slower one only to say what is wrong.
func checkHexID(id string, n int) error {
	if len(id) != 2*n {
		return fmt.Errorf("%q is not %d lower-case hex digits", id, 2*n)
	}
	var bad, nonZero byte
	for i := 0; i < len(id); i++ {
		bad |= notHex[id[i]]
		nonZero |= id[i] ^ '0'
	}
	if bad == 0 && nonZero != 0 {
		return nil
	}
	for i := 0; i < len(id); i++ {
		if notHex[id[i]] != 0 {
			return fmt.Errorf("%q is not %d lower-case hex digits (bad character at offset %d)", id, 2*n, i)
		}
	}
	return fmt.Errorf("%q: the all-zero id is invalid", id)
}
