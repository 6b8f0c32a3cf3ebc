package genai

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/loomwork/loomwork/store"
)

// The OTLP trace protobuf decoded straight into store spans, without
// building the Collector's pdata tree first. Decoding to pdata and walking
// it was ~30% of the collector's CPU (docs/bench-ingest.md); this reads each
// field once, shares repeated keys and short values between spans, and
// allocates only what the stored span keeps.
//
// It accepts exactly what pdata accepts (v1.71: the same wire-type checks,
// identifier lengths, recursion limit, unknown-field and group skipping,
// merging of a repeated singular message, the deprecated scope-spans field
// used when the current one is empty) and maps exactly as the pdata walk
// did; FuzzDecodeProtoMatchesPdata holds it to the pdata path kept in
// pdataref_*_test.go.

// Wire types.
const (
	wireVarint     = 0
	wireFixed64    = 1
	wireLen        = 2
	wireStartGroup = 3
	wireEndGroup   = 4
	wireFixed32    = 5
)

// recursionLimit bounds the nesting of attribute values (KeyValue,
// AnyValue, ArrayValue and KeyValueList each count one), as pdata does:
// 100, which is store.MaxAttributeDepth levels of maps. A value nested
// deeper is not a malformed request but a span no store can hold: the
// decoder stops reading the value there and rejects the span alone
// (deepAttr), where pdata refuses the whole request.
const recursionLimit = 3*store.MaxAttributeDepth + 4

var (
	errIntOverflow    = errors.New("varint overflows 64 bits")
	errRecursionDepth = errors.New("attribute values nested deeper than 100")
	errEndGroup       = errors.New("unexpected end of group")
)

func consumeVarint(b []byte, pos int) (uint64, int, error) {
	var n uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= 64 {
			return 0, 0, errIntOverflow
		}
		if pos >= len(b) {
			return 0, 0, io.ErrUnexpectedEOF
		}
		c := b[pos]
		pos++
		n |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return n, pos, nil
		}
	}
}

func consumeTag(b []byte, pos int) (num int32, wt int8, next int, err error) {
	tag, next, err := consumeVarint(b, pos)
	if err != nil {
		return 0, 0, 0, err
	}
	num, wt = int32(tag>>3), int8(tag&7)
	if num <= 0 {
		return 0, 0, 0, fmt.Errorf("illegal field number %d at byte %d", num, pos)
	}
	return num, wt, next, nil
}

// consumeLen reads a length prefix and returns the field's bytes.
func consumeLen(b []byte, pos int) (start, end int, err error) {
	n, pos, err := consumeVarint(b, pos)
	if err != nil {
		return 0, 0, err
	}
	l := int(n)
	if l < 0 {
		return 0, 0, errors.New("negative length")
	}
	end = pos + l
	if end < 0 || end > len(b) {
		return 0, 0, io.ErrUnexpectedEOF
	}
	return pos, end, nil
}

func consumeFixed64(b []byte, pos int) (uint64, int, error) {
	if pos+8 < 0 || pos+8 > len(b) {
		return 0, 0, io.ErrUnexpectedEOF
	}
	return binary.LittleEndian.Uint64(b[pos:]), pos + 8, nil
}

func consumeFixed32(b []byte, pos int) (uint32, int, error) {
	if pos+4 < 0 || pos+4 > len(b) {
		return 0, 0, io.ErrUnexpectedEOF
	}
	return binary.LittleEndian.Uint32(b[pos:]), pos + 4, nil
}

// skipField skips an unknown field's value, groups included, with pdata's
// rules (proto.ConsumeUnknown).
func skipField(b []byte, pos int, wt int8) (int, error) {
	var err error
	depth := 0
	for pos < len(b) {
		switch wt {
		case wireVarint:
			_, pos, err = consumeVarint(b, pos)
			return pos, err
		case wireFixed64:
			_, pos, err = consumeFixed64(b, pos)
			return pos, err
		case wireLen:
			_, pos, err = consumeLen(b, pos)
			return pos, err
		case wireStartGroup:
			depth++
		case wireEndGroup:
			if depth == 0 {
				return 0, errEndGroup
			}
			depth--
		case wireFixed32:
			_, pos, err = consumeFixed32(b, pos)
			return pos, err
		default:
			return 0, fmt.Errorf("illegal wire type %d", wt)
		}
		if depth == 0 {
			return pos, nil
		}
		if _, wt, pos, err = consumeTag(b, pos); err != nil {
			return 0, err
		}
	}
	return 0, io.ErrUnexpectedEOF
}

func wrongWire(field string, wt int8) error {
	return fmt.Errorf("wrong wire type %d for field %s", wt, field)
}

// field is the next field of a message: its number, wire type and, for a
// length-delimited one, its bytes; for a varint or fixed one its value.
type field struct {
	num   int32
	wt    int8
	bytes []byte
	u     uint64
}

// next reads the field at pos. Varint, fixed64, fixed32 and
// length-delimited fields are read whole; anything else (groups) is
// skipped and reported with wt set, so the caller only has to reject a
// known field of the wrong type.
func next(b []byte, pos int) (field, int, error) {
	num, wt, pos, err := consumeTag(b, pos)
	if err != nil {
		return field{}, 0, err
	}
	f := field{num: num, wt: wt}
	switch wt {
	case wireVarint:
		f.u, pos, err = consumeVarint(b, pos)
	case wireFixed64:
		f.u, pos, err = consumeFixed64(b, pos)
	case wireFixed32:
		var u uint32
		u, pos, err = consumeFixed32(b, pos)
		f.u = uint64(u)
	case wireLen:
		var s, e int
		s, e, err = consumeLen(b, pos)
		f.bytes, pos = b[s:e], e
	default:
		pos, err = skipField(b, pos, wt)
	}
	if err != nil {
		return field{}, 0, err
	}
	return f, pos, nil
}

// decoder holds what one DecodeProto call shares between spans.
type decoder struct {
	c        converter
	intern   *internTable
	spans    []store.Span
	rejected []Rejection
	// Scratch, reused span after span.
	scopeRanges [][]byte
	kvs         []kv
	// The previous span's trace id and its hex form: the spans of a trace
	// usually arrive together.
	lastTID    [16]byte
	lastTIDHex string
	// spanDeep is why the span being read cannot be stored: an attribute
	// of it, its events or links nested too deep (store.TooDeep).
	spanDeep error
}

// deepAttr is attribute() reading a value nested deeper than
// recursionLimit: the request is well formed so far, but the span (or
// resource, or scope) it belongs to cannot be stored.
type deepAttr struct{ key string }

func (e deepAttr) Error() string { return fmt.Sprintf("attribute %q: %v", e.key, store.ErrTooDeep) }

// tooDeep turns a deepAttr from attribute() into the rejection reason of
// store.CheckStorable's words (what: "attribute", "resource attribute", …),
// or returns err as it is.
func tooDeep(err error, what func() string) (deep, rest error) {
	if da, ok := errors.AsType[deepAttr](err); ok {
		return store.TooDeep(what(), da.key), nil
	}
	return nil, err
}

// maxInternedLen bounds the strings one request shares.
const maxInternedLen = 64

// internTable is a direct-mapped cache of short strings, a slot per hash.
// A string that was found again keeps its slot against the next newcomer
// (a second chance), so keys repeated span after span are not pushed out
// by values seen once (ids). A collision only costs an allocation; a Go
// map here (hashing, probing) was a tenth of the decoder's time.
type internTable [512]struct {
	s    string
	box  any  // validUTF8(s) as an interface value, made once: see strVal
	used bool // found again since it was stored or last spared
}

// internSlot hashes the length and the first and last eight bytes (all
// of a shorter string): what tells apart the short strings of a request
// (attribute keys, names, models).
func internSlot(b []byte) int {
	n := len(b)
	var lo, hi uint64
	if n >= 8 {
		lo, hi = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[n-8:])
	} else {
		for i, c := range b {
			lo |= uint64(c) << (8 * i)
		}
	}
	h := (lo*0x9E3779B97F4A7C15 ^ hi) * 0xC2B2AE3D27D4EB4F
	h ^= uint64(n) * 0x165667B19E3779F9
	return int(h >> 55) // 9 bits: 512 slots
}

// str returns b as a string, sharing short strings seen before in this
// request (attribute keys, service and model names) instead of allocating
// each again.
func (d *decoder) str(b []byte) string {
	s, _ := d.intern.get(b, false)
	return s
}

// strVal is str for a string attribute value. It also returns the value
// as the attributes map will hold it (repaired UTF-8 in an interface),
// shared like the string, or nil when the string is not shared: boxing
// each repeated model or provider name again was an allocation per value.
func (d *decoder) strVal(b []byte) (string, any) {
	return d.intern.get(b, true)
}

func (t *internTable) get(b []byte, boxed bool) (string, any) {
	if len(b) == 0 {
		return "", nil
	}
	if len(b) > maxInternedLen {
		return string(b), nil
	}
	slot := &t[internSlot(b)]
	if slot.s == string(b) {
		slot.used = true
		if boxed && slot.box == nil {
			slot.box = validUTF8(slot.s)
		}
		return slot.s, slot.box
	}
	s := string(b)
	if slot.used {
		slot.used = false // spared once
		return s, nil
	}
	slot.s, slot.box = s, nil
	if boxed {
		slot.box = validUTF8(s)
	}
	return s, slot.box
}

// DecodeProto decodes one OTLP/protobuf ExportTraceServiceRequest (or
// TracesData, which has the same shape) and maps every span. Spans with
// invalid identifiers or a negative token count are returned as
// rejections, and so are spans with an attribute value (their own, their
// events' or links', their scope's or resource's) nested deeper than
// store.MaxAttributeDepth, with store.TooDeep's words — where pdata
// refuses the whole request. A malformed message is an error naming where it went wrong
// (e.g. "resource_spans[0]: scope_spans[1]: spans[3]: trace_id is 15
// bytes, want 16"; a byte offset counts from the start of the innermost
// message named), and then no span is returned.
func DecodeProto(b []byte, opts Options) ([]store.Span, []Rejection, error) {
	d := decoder{c: opts.converter(), intern: new(internTable)}
	d.spans = make([]store.Span, 0, countSpans(b))
	for pos, i := 0, 0; pos < len(b); {
		f, np, err := next(b, pos)
		if err != nil {
			return nil, nil, fmt.Errorf("at byte %d: %w", pos, err)
		}
		pos = np
		if f.num != 1 {
			continue
		}
		if f.wt != wireLen {
			return nil, nil, wrongWire("resource_spans", f.wt)
		}
		if err := d.resourceSpans(f.bytes); err != nil {
			return nil, nil, fmt.Errorf("resource_spans[%d]: %w", i, err)
		}
		i++
	}
	return d.spans, d.rejected, nil
}

// countSpans counts the spans of a request without decoding them (0 if it
// is malformed), so the result is allocated once.
func countSpans(b []byte) int {
	n := 0
	walk(b, 1, func(rs []byte) {
		walk(rs, 2, func(ss []byte) { walk(ss, 2, func([]byte) { n++ }) })
	})
	return n
}

// walk calls fn with every length-delimited field num of message b, up to
// the first malformed field.
func walk(b []byte, num int32, fn func([]byte)) {
	for pos := 0; pos < len(b); {
		f, np, err := next(b, pos)
		if err != nil {
			return
		}
		pos = np
		if f.num == num && f.wt == wireLen {
			fn(f.bytes)
		}
	}
}

// fieldSpec is a known field of a message: its name (for errors) and the
// wire type it must have.
type fieldSpec struct {
	name string
	wt   int8
}

// schema lists a message's known fields by number; the rest are skipped as
// unknown.
type schema []fieldSpec

// known is one row of a schema's definition.
type known struct {
	num  int32
	name string
	wt   int8
}

func fields(list []known) schema {
	var s schema
	for _, k := range list {
		if int(k.num) >= len(s) {
			s = append(s, make(schema, int(k.num)+1-len(s))...)
		}
		s[k.num] = fieldSpec{name: k.name, wt: k.wt}
	}
	return s
}

// The messages of an ExportTraceServiceRequest, as pdata v1.71 knows them.
var (
	resourceSpansMsg = fields([]known{{1, "resource", wireLen}, {2, "scope_spans", wireLen}, {3, "schema_url", wireLen}, {1000, "instrumentation_library_spans", wireLen}})
	resourceMsg      = fields([]known{{1, "attributes", wireLen}, {2, "dropped_attributes_count", wireVarint}, {3, "entity_refs", wireLen}})
	entityRefMsg     = fields([]known{{1, "schema_url", wireLen}, {2, "type", wireLen}, {3, "id_keys", wireLen}, {4, "description_keys", wireLen}})
	scopeSpansMsg    = fields([]known{{1, "scope", wireLen}, {2, "spans", wireLen}, {3, "schema_url", wireLen}})
	scopeMsg         = fields([]known{{1, "name", wireLen}, {2, "version", wireLen}, {3, "attributes", wireLen}, {4, "dropped_attributes_count", wireVarint}})
	spanMsg          = fields([]known{
		{1, "trace_id", wireLen}, {2, "span_id", wireLen}, {3, "trace_state", wireLen}, {4, "parent_span_id", wireLen},
		{5, "name", wireLen}, {6, "kind", wireVarint}, {7, "start_time_unix_nano", wireFixed64}, {8, "end_time_unix_nano", wireFixed64},
		{9, "attributes", wireLen}, {10, "dropped_attributes_count", wireVarint}, {11, "events", wireLen}, {12, "dropped_events_count", wireVarint},
		{13, "links", wireLen}, {14, "dropped_links_count", wireVarint}, {15, "status", wireLen}, {16, "flags", wireFixed32},
	})
	statusMsg = fields([]known{{2, "message", wireLen}, {3, "code", wireVarint}})
	eventMsg  = fields([]known{{1, "time_unix_nano", wireFixed64}, {2, "name", wireLen}, {3, "attributes", wireLen}, {4, "dropped_attributes_count", wireVarint}})
	linkMsg   = fields([]known{
		{1, "trace_id", wireLen}, {2, "span_id", wireLen}, {3, "trace_state", wireLen}, {4, "attributes", wireLen},
		{5, "dropped_attributes_count", wireVarint}, {6, "flags", wireFixed32},
	})
	// key_strindex and string_value_strindex are profiles dictionary
	// indexes: meaningless in a trace, but typed.
	keyValueMsg = fields([]known{{1, "key", wireLen}, {2, "value", wireLen}, {3, "key_strindex", wireVarint}})
	anyValueMsg = fields([]known{
		{1, "string_value", wireLen}, {2, "bool_value", wireVarint}, {3, "int_value", wireVarint}, {4, "double_value", wireFixed64},
		{5, "array_value", wireLen}, {6, "kvlist_value", wireLen}, {7, "bytes_value", wireLen}, {8, "string_value_strindex", wireVarint},
	})
	listMsg = fields([]known{{1, "values", wireLen}})
)

// each reads message b field by field: a known field of the wrong wire type
// is an error naming it, an unknown one is skipped, and fn sees every known
// field in wire order.
func each(b []byte, s schema, fn func(f field) error) error {
	for pos := 0; pos < len(b); {
		f, np, err := next(b, pos)
		if err != nil {
			return fmt.Errorf("at byte %d: %w", pos, err)
		}
		pos = np
		if int(f.num) >= len(s) || s[f.num].name == "" {
			continue
		}
		if spec := s[f.num]; f.wt != spec.wt {
			return wrongWire(spec.name, f.wt)
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// resource is what a ResourceSpans shares with its spans.
type resource struct {
	service string
	attrs   store.Attributes
	dropped uint32
	schema  string
	deep    error // an attribute nested too deep: its spans are rejected
}

func (d *decoder) resourceSpans(b []byte) error {
	var (
		resKVs     []kv
		dropped    uint32
		schema     []byte
		scopes     = d.scopeRanges[:0]
		deprecated [][]byte
		nres       int
		deep       error
	)
	err := each(b, resourceSpansMsg, func(f field) error {
		switch f.num {
		case 1: // resource, merged when repeated
			var err error
			if resKVs, dropped, err = d.resourceMsg(f.bytes, resKVs, dropped, &deep); err != nil {
				return fmt.Errorf("resource[%d]: %w", nres, err)
			}
			nres++
		case 2:
			scopes = append(scopes, f.bytes)
		case 3:
			schema = f.bytes
		case 1000: // the deprecated instrumentation_library_spans
			deprecated = append(deprecated, f.bytes)
		}
		return nil
	})
	if err != nil {
		return err
	}
	d.scopeRanges = scopes

	var res resource
	res.attrs = d.c.convertMap(resKVs, func(k string, v *val) {
		if k == "service.name" && v.kind == kindStr && res.service == "" {
			res.service = validUTF8(v.s)
		}
	})
	res.dropped = dropped
	res.schema = validUTF8(d.str(schema))
	res.deep = deep

	// pdata reads the deprecated field only when the current one is empty,
	// but refuses the request when either is malformed.
	use := scopes
	if len(scopes) == 0 {
		use = deprecated
	} else if len(deprecated) > 0 {
		ns, nr := len(d.spans), len(d.rejected)
		for i, ss := range deprecated {
			if err := d.scopeSpans(ss, &res); err != nil {
				return fmt.Errorf("instrumentation_library_spans[%d]: %w", i, err)
			}
		}
		clear(d.spans[ns:])
		d.spans, d.rejected = d.spans[:ns], d.rejected[:nr]
	}
	// scopeSpans reuses nothing of d.scopeRanges, so ranging over it is safe.
	for i, ss := range use {
		if err := d.scopeSpans(ss, &res); err != nil {
			return fmt.Errorf("scope_spans[%d]: %w", i, err)
		}
	}
	return nil
}

// attribute appends the KeyValue in b to kvs. A value nested deeper than
// recursionLimit is left out, with a deepAttr error naming its key.
func (d *decoder) attribute(kvs []kv, b []byte) ([]kv, error) {
	kvs = append(kvs, kv{})
	if err := d.keyValue(b, &kvs[len(kvs)-1], 0); err != nil {
		if errors.Is(err, errRecursionDepth) {
			key := validUTF8(kvs[len(kvs)-1].k)
			return kvs[:len(kvs)-1], deepAttr{key}
		}
		return kvs, fmt.Errorf("attributes[%d]: %w", len(kvs)-1, err)
	}
	return kvs, nil
}

// resourceMsg reads one Resource message, appending its attributes; an
// attribute nested too deep is left out and said in *deep.
func (d *decoder) resourceMsg(b []byte, kvs []kv, dropped uint32, deep *error) ([]kv, uint32, error) {
	err := each(b, resourceMsg, func(f field) error {
		var err error
		switch f.num {
		case 1:
			kvs, err = d.attribute(kvs, f.bytes)
			var dp error
			if dp, err = tooDeep(err, func() string { return "resource attribute" }); dp != nil && *deep == nil {
				*deep = dp
			}
		case 2:
			dropped = uint32(f.u)
		case 3: // entity_refs: not kept, but validated
			if err = each(f.bytes, entityRefMsg, func(field) error { return nil }); err != nil {
				err = fmt.Errorf("entity_refs: %w", err)
			}
		}
		return err
	})
	return kvs, dropped, err
}

// scope is what a ScopeSpans shares with its spans.
type scope struct {
	name, version, schema string
	attrs                 store.Attributes
	dropped               uint32
	deep                  error // an attribute nested too deep: its spans are rejected
}

func (d *decoder) scopeSpans(b []byte, res *resource) error {
	var (
		kvs                   []kv
		name, version, schema []byte
		dropped               uint32
		spans                 [][]byte
		deep                  error
	)
	err := each(b, scopeSpansMsg, func(f field) error {
		switch f.num {
		case 1: // scope, merged when repeated
			err := each(f.bytes, scopeMsg, func(f field) error {
				var err error
				switch f.num {
				case 1:
					name = f.bytes
				case 2:
					version = f.bytes
				case 3:
					kvs, err = d.attribute(kvs, f.bytes)
					var dp error
					if dp, err = tooDeep(err, func() string { return "scope attribute" }); dp != nil && deep == nil {
						deep = dp
					}
				case 4:
					dropped = uint32(f.u)
				}
				return err
			})
			if err != nil {
				return fmt.Errorf("scope: %w", err)
			}
		case 2:
			spans = append(spans, f.bytes)
		case 3:
			schema = f.bytes
		}
		return nil
	})
	if err != nil {
		return err
	}
	sc := scope{
		name:    validUTF8(d.str(name)),
		version: validUTF8(d.str(version)),
		schema:  validUTF8(d.str(schema)),
		attrs:   d.c.convertMap(kvs, nil), // shared by the scope's spans
		dropped: dropped,
		deep:    deep,
	}
	for i, sb := range spans {
		if err := d.span(sb, res, &sc); err != nil {
			return fmt.Errorf("spans[%d]: %w", i, err)
		}
	}
	return nil
}

// id reads a trace or span id: empty is all zero, any other length than
// the id's is an error.
func id(dst []byte, b []byte, what string) error {
	if len(b) == 0 {
		clear(dst)
		return nil
	}
	if len(b) != len(dst) {
		return fmt.Errorf("%s is %d bytes, want %d", what, len(b), len(dst))
	}
	copy(dst, b)
	return nil
}

// rawSpan is a Span as read, before mapping.
type rawSpan struct {
	tid                                  [16]byte
	sid, pid                             [8]byte
	traceState, name, statusMsg          []byte
	kind, statusCode                     int32
	start, end                           uint64
	flags                                uint32
	dropped, droppedEvents, droppedLinks uint32
	events, links                        [][]byte
}

func (d *decoder) span(b []byte, res *resource, sc *scope) error {
	var r rawSpan
	d.kvs = d.kvs[:0] // the previous span's, converted already
	d.spanDeep = nil
	err := each(b, spanMsg, func(f field) error {
		var err error
		switch f.num {
		case 1:
			err = id(r.tid[:], f.bytes, "trace_id")
		case 2:
			err = id(r.sid[:], f.bytes, "span_id")
		case 3:
			r.traceState = f.bytes
		case 4:
			err = id(r.pid[:], f.bytes, "parent_span_id")
		case 5:
			r.name = f.bytes
		case 6:
			r.kind = int32(f.u)
		case 7:
			r.start = f.u
		case 8:
			r.end = f.u
		case 9:
			d.kvs, err = d.attribute(d.kvs, f.bytes)
			err = d.noteDeep(err, func() string { return "attribute" })
		case 10:
			r.dropped = uint32(f.u)
		case 11:
			r.events = append(r.events, f.bytes)
		case 12:
			r.droppedEvents = uint32(f.u)
		case 13:
			r.links = append(r.links, f.bytes)
		case 14:
			r.droppedLinks = uint32(f.u)
		case 15: // status, merged when repeated
			err = each(f.bytes, statusMsg, func(f field) error {
				if f.num == 2 {
					r.statusMsg = f.bytes
				} else {
					r.statusCode = int32(f.u)
				}
				return nil
			})
			if err != nil {
				err = fmt.Errorf("status: %w", err)
			}
		case 16:
			r.flags = uint32(f.u)
		}
		return err
	})
	if err != nil {
		return err
	}

	// Events and links are decoded (and so validated) before the span is
	// judged, as pdata decodes the whole request before anything is mapped.
	var events []store.Event
	if len(r.events) > 0 {
		events = make([]store.Event, len(r.events))
		for i, eb := range r.events {
			if err := d.event(eb, &events[i], i); err != nil {
				return fmt.Errorf("events[%d]: %w", i, err)
			}
		}
	}
	var links []store.Link
	if len(r.links) > 0 {
		links = make([]store.Link, len(r.links))
		for i, lb := range r.links {
			if err := d.link(lb, &links[i], i); err != nil {
				return fmt.Errorf("links[%d]: %w", i, err)
			}
		}
	}

	var zero8 [8]byte
	reason := ""
	switch {
	case r.tid == [16]byte{}:
		reason = ReasonEmptyTraceID
	case r.sid == zero8:
		reason = ReasonEmptySpanID
	case r.pid != zero8 && r.pid == r.sid:
		reason = ReasonSelfParent
	case res.deep != nil:
		reason = res.deep.Error()
	case sc.deep != nil:
		reason = sc.deep.Error()
	case d.spanDeep != nil:
		reason = d.spanDeep.Error()
	}
	if reason != "" {
		d.rejected = append(d.rejected, newRejection(r.tid, r.sid, string(r.name), reason))
		return nil
	}

	// Filled in place: a store.Span is ~700 bytes of which most are
	// pointers, and copying one into the slice (with the GC's write
	// barriers) was a sixth of the decoder's time.
	d.spans = append(d.spans, store.Span{})
	out := &d.spans[len(d.spans)-1]
	*out = store.Span{
		ServiceName:                    res.service,
		ScopeName:                      sc.name,
		ScopeVersion:                   sc.version,
		ScopeAttributes:                sc.attrs,
		ScopeDroppedAttributesCount:    sc.dropped,
		ScopeSchemaURL:                 sc.schema,
		ResourceAttributes:             res.attrs,
		ResourceSchemaURL:              res.schema,
		ResourceDroppedAttributesCount: res.dropped,

		TraceID:                d.traceID(r.tid),
		SpanID:                 hex.EncodeToString(r.sid[:]),
		TraceState:             validUTF8(d.str(r.traceState)),
		Name:                   validUTF8(d.str(r.name)),
		Kind:                   spanKind(r.kind),
		StartTime:              timestamp(r.start),
		EndTime:                timestamp(r.end),
		StatusCode:             statusCode(r.statusCode),
		StatusMessage:          validUTF8(d.str(r.statusMsg)),
		Flags:                  r.flags,
		DroppedAttributesCount: r.dropped,
		DroppedEventsCount:     r.droppedEvents,
		DroppedLinksCount:      r.droppedLinks,
		Events:                 events,
		Links:                  links,
	}
	if r.pid != zero8 {
		out.ParentSpanID = hex.EncodeToString(r.pid[:])
	}
	x := extractor{max: d.c.max}
	out.Attributes = d.c.convertMap(d.kvs, x.visit)
	if x.invalid != "" {
		*out = store.Span{}
		d.spans = d.spans[:len(d.spans)-1]
		d.rejected = append(d.rejected, newRejection(r.tid, r.sid, string(r.name), x.invalid))
		return nil
	}
	x.apply(out)
	return nil
}

// traceID is tid in hex, shared with the previous span when it is the same.
func (d *decoder) traceID(tid [16]byte) string {
	if d.lastTIDHex == "" || tid != d.lastTID {
		d.lastTID, d.lastTIDHex = tid, hex.EncodeToString(tid[:])
	}
	return d.lastTIDHex
}

// noteDeep keeps the first attribute of the span being read that is
// nested too deep (what names where it is) and returns err's other
// failures.
func (d *decoder) noteDeep(err error, what func() string) error {
	dp, err := tooDeep(err, what)
	if dp != nil && d.spanDeep == nil {
		d.spanDeep = dp
	}
	return err
}

func (d *decoder) event(b []byte, e *store.Event, i int) error {
	var (
		kvs  []kv
		name []byte
	)
	e.Time = timestamp(0)
	err := each(b, eventMsg, func(f field) error {
		var err error
		switch f.num {
		case 1:
			e.Time = timestamp(f.u)
		case 2:
			name = f.bytes
		case 3:
			kvs, err = d.attribute(kvs, f.bytes)
			err = d.noteDeep(err, func() string { return fmt.Sprintf("event %d attribute", i) })
		case 4:
			e.DroppedAttributesCount = uint32(f.u)
		}
		return err
	})
	if err != nil {
		return err
	}
	e.Name = validUTF8(d.str(name))
	e.Attributes = d.c.convertMap(kvs, nil)
	return nil
}

func (d *decoder) link(b []byte, l *store.Link, i int) error {
	var (
		kvs []kv
		tid [16]byte
		sid [8]byte
		ts  []byte
	)
	err := each(b, linkMsg, func(f field) error {
		var err error
		switch f.num {
		case 1:
			err = id(tid[:], f.bytes, "trace_id")
		case 2:
			err = id(sid[:], f.bytes, "span_id")
		case 3:
			ts = f.bytes
		case 4:
			kvs, err = d.attribute(kvs, f.bytes)
			err = d.noteDeep(err, func() string { return fmt.Sprintf("link %d attribute", i) })
		case 5:
			l.DroppedAttributesCount = uint32(f.u)
		case 6:
			l.Flags = uint32(f.u)
		}
		return err
	})
	if err != nil {
		return err
	}
	if tid != ([16]byte{}) {
		l.TraceID = hex.EncodeToString(tid[:])
	}
	if sid != ([8]byte{}) {
		l.SpanID = hex.EncodeToString(sid[:])
	}
	l.TraceState = validUTF8(d.str(ts))
	l.Attributes = d.c.convertMap(kvs, nil)
	return nil
}

// keyValue reads a KeyValue into kv (merging into what a repeated value
// field left, as pdata does).
func (d *decoder) keyValue(b []byte, out *kv, depth int) error {
	if depth >= recursionLimit {
		return errRecursionDepth
	}
	depth++
	if k, v, ok := splitKeyValue(b); ok {
		out.k = d.str(k)
		if v == nil || d.scalar(v, &out.v) {
			return nil
		}
		if err := d.anyValue(v, &out.v, depth); err != nil {
			return fmt.Errorf("value of %q: %w", validUTF8(out.k), err)
		}
		return nil
	}
	return each(b, keyValueMsg, func(f field) error {
		switch f.num {
		case 1:
			out.k = d.str(f.bytes)
		case 2:
			if err := d.anyValue(f.bytes, &out.v, depth); err != nil {
				return fmt.Errorf("value of %q: %w", validUTF8(out.k), err)
			}
		}
		return nil
	})
}

// splitKeyValue reads a KeyValue the way SDKs write one: a key field and
// at most one value field, in either order (pdata writes the value first),
// nothing else. Attributes are most of a request's fields, and this is
// several times faster than the general reader (each), which anything
// else falls back to (and which then reports what is wrong). v is nil
// when there is no value field.
func splitKeyValue(b []byte) (k, v []byte, ok bool) {
	var haveKey bool
	for pos, n := 0, 0; pos < len(b); n++ {
		if n == 2 {
			return nil, nil, false
		}
		tag := b[pos]
		if tag != 1<<3|wireLen && tag != 2<<3|wireLen {
			return nil, nil, false
		}
		s, e, err := consumeLen(b, pos+1)
		if err != nil {
			return nil, nil, false
		}
		if tag == 1<<3|wireLen {
			if haveKey {
				return nil, nil, false
			}
			k, haveKey = b[s:e], true
		} else {
			if v != nil {
				return nil, nil, false
			}
			v = b[s:e]
		}
		pos = e
	}
	return k, v, haveKey
}

// scalar reads an AnyValue that is exactly one string, bool, int or double
// field into v, and reports whether it was one; anything else is left to
// anyValue.
func (d *decoder) scalar(b []byte, v *val) bool {
	if len(b) < 2 {
		return false
	}
	f := field{num: int32(b[0] >> 3)}
	switch b[0] {
	case 1<<3 | wireLen:
		s, e, err := consumeLen(b, 1)
		if err != nil || e != len(b) {
			return false
		}
		f.bytes = b[s:e]
	case 2<<3 | wireVarint, 3<<3 | wireVarint:
		u, e, err := consumeVarint(b, 1)
		if err != nil || e != len(b) {
			return false
		}
		f.u = u
	case 4<<3 | wireFixed64:
		if len(b) != 9 {
			return false
		}
		f.u = binary.LittleEndian.Uint64(b[1:])
	default:
		return false
	}
	d.setScalar(f, v)
	return true
}

// setScalar stores an AnyValue's string, bool, int or double field (of
// the right wire type) in v, replacing what an earlier field set.
func (d *decoder) setScalar(f field, v *val) {
	switch f.num {
	case 1:
		*v = val{kind: kindStr}
		v.s, v.box = d.strVal(f.bytes)
	case 2:
		*v = val{kind: kindBool}
		if f.u != 0 {
			v.n = 1
		}
	case 3:
		*v = val{kind: kindInt, n: int64(f.u)}
	case 4:
		*v = val{kind: kindDouble, f: math.Float64frombits(f.u)}
	}
}

// anyValue reads an AnyValue into v; each field of its oneof replaces what
// an earlier one set.
func (d *decoder) anyValue(b []byte, v *val, depth int) error {
	if depth >= recursionLimit {
		return errRecursionDepth
	}
	depth++
	return each(b, anyValueMsg, func(f field) error {
		switch f.num {
		case 1, 2, 3, 4:
			d.setScalar(f, v)
		case 5, 6:
			nv := val{kind: kindArray}
			if f.num == 6 {
				nv.kind = kindMap
			}
			if err := d.list(f.bytes, &nv, depth); err != nil {
				return err
			}
			*v = nv
		case 7:
			*v = val{kind: kindBytes, s: string(f.bytes)}
		case 8:
			// pdata reads a string_value_strindex as an empty value.
			*v = val{}
		}
		return nil
	})
}

// list reads an ArrayValue (v.kind kindArray) or a KeyValueList (kindMap).
func (d *decoder) list(b []byte, v *val, depth int) error {
	if depth >= recursionLimit {
		return errRecursionDepth
	}
	depth++
	return each(b, listMsg, func(f field) error {
		v.elems = append(v.elems, kv{})
		e := &v.elems[len(v.elems)-1]
		var err error
		if v.kind == kindArray {
			err = d.anyValue(f.bytes, &e.v, depth)
		} else {
			err = d.keyValue(f.bytes, e, depth)
		}
		if err != nil {
			return fmt.Errorf("values[%d]: %w", len(v.elems)-1, err)
		}
		return nil
	})
}
