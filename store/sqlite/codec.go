package sqlite

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// Payload encodings (first byte of spans.payload and resources.attrs).
const (
	encRaw  byte = 0 // JSON as is: used when compression does not help
	encZstd byte = 1 // one zstd frame
)

// compressMin is the size below which a payload is stored raw.
const compressMin = 64

// payload is the part of a span kept in a payload block, as appendPayload
// writes it. Field names are short because every byte is per span; nil and
// empty are kept apart, so a span reads back exactly as written.
type payload struct {
	Attributes store.Attributes `json:"a"`
	Events     []eventRec       `json:"e"`
	Links      []linkRec        `json:"l"`
	Retrieved  []string         `json:"r"`
	Cited      []string         `json:"c"`
	// CostNaN marks a CostUSD that was NaN: SQLite stores NaN as NULL, which
	// would otherwise read back as "no cost".
	CostNaN bool `json:"cn,omitempty"`
	// OTLP's span flags and dropped counts; absent when 0 (most spans).
	Flags         uint32 `json:"f,omitempty"`
	DroppedAttrs  uint32 `json:"da,omitempty"`
	DroppedEvents uint32 `json:"de,omitempty"`
	DroppedLinks  uint32 `json:"dl,omitempty"`
	// Derived has bit i set when the attribute derivedAttrs[i] was left
	// out of Attributes because it equals the typed field the span
	// carries it in (compact.go); it is put back from that field.
	Derived uint32 `json:"dv,omitempty"`
}

// derivedAttrs are the attributes a payload leaves out when they equal a
// span's typed field (the collector derives the field from them, so they
// usually do): a tenth of a compact block's bytes. The positions are
// stored (payload.Derived): append only.
var derivedAttrs = [...]struct {
	key   string
	field func(sp *store.Span) any // the field's value as an attribute value; nil: none
}{
	{semconv.AttrOperationName, func(sp *store.Span) any { return sp.Operation }},
	{semconv.AttrProviderName, func(sp *store.Span) any { return sp.Provider }},
	{semconv.AttrRequestModel, func(sp *store.Span) any { return sp.RequestModel }},
	{semconv.AttrResponseModel, func(sp *store.Span) any { return sp.ResponseModel }},
	{semconv.AttrAgentName, func(sp *store.Span) any { return sp.AgentName }},
	{semconv.AttrConversationID, func(sp *store.Span) any { return sp.ConversationID }},
	{semconv.AttrToolName, func(sp *store.Span) any { return sp.ToolName }},
	{semconv.AttrToolCallID, func(sp *store.Span) any { return sp.ToolCallID }},
	{semconv.AttrUsageInputTokens, func(sp *store.Span) any { return sp.InputTokens }},
	{semconv.AttrUsageOutputTokens, func(sp *store.Span) any { return sp.OutputTokens }},
	{semconv.AttrUsageCacheReadInputTokens, func(sp *store.Span) any { return sp.CacheReadTokens }},
	{semconv.AttrCost, func(sp *store.Span) any {
		if sp.CostUSD == nil {
			return nil
		}
		return *sp.CostUSD
	}},
	{semconv.AttrRetrievalDocuments, func(sp *store.Span) any { return anyStrings(sp.RetrievedDocs) }},
	{semconv.AttrCitations, func(sp *store.Span) any { return anyStrings(sp.CitedDocs) }},
}

func anyStrings(l []string) any {
	if l == nil {
		return nil
	}
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}

// derivedMask returns the derivedAttrs sp's attributes hold with exactly
// its typed field's value and type (strings only when valid UTF-8, which
// JSON would not carry unchanged; numbers bit for bit).
func derivedMask(sp *store.Span) uint32 {
	var mask uint32
	for i, d := range derivedAttrs {
		v, ok := sp.Attributes[d.key]
		if ok && sameValue(v, d.field(sp)) {
			mask |= 1 << i
		}
	}
	return mask
}

func sameValue(v, f any) bool {
	switch t := v.(type) {
	case string:
		s, ok := f.(string)
		return ok && s == t && utf8.ValidString(t)
	case int64:
		n, ok := f.(int64)
		return ok && n == t
	case float64:
		x, ok := f.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(t)
	case []any:
		l, ok := f.([]any)
		if !ok || len(l) != len(t) {
			return false
		}
		for i := range t {
			if !sameValue(t[i], l[i]) {
				return false
			}
		}
		return true
	}
	return false
}

type eventRec struct {
	TimeNS     int64            `json:"t"`
	Name       string           `json:"n"`
	Attributes store.Attributes `json:"a"`
	Dropped    uint32           `json:"d,omitempty"`
}

type linkRec struct {
	TraceID    string           `json:"t"`
	SpanID     string           `json:"s"`
	TraceState string           `json:"ts,omitempty"`
	Attributes store.Attributes `json:"a"`
	Flags      uint32           `json:"f,omitempty"`
	Dropped    uint32           `json:"d,omitempty"`
}

// scopeRec is the JSON of a scopes row (migration 0002): what a span's
// OTLP ScopeSpans and ResourceSpans carry besides the scope's name and
// version and the resource attributes, which have their own places.
type scopeRec struct {
	Attributes        store.Attributes `json:"a"`
	Dropped           uint32           `json:"d,omitempty"`
	SchemaURL         string           `json:"u,omitempty"`
	ResourceSchemaURL string           `json:"ru,omitempty"`
	ResourceDropped   uint32           `json:"rd,omitempty"`
}

// hasScope reports whether sp has anything a scopes row holds.
func hasScope(sp *store.Span) bool {
	return sp.ScopeAttributes != nil || sp.ScopeDroppedAttributesCount != 0 || sp.ScopeSchemaURL != "" ||
		sp.ResourceSchemaURL != "" || sp.ResourceDroppedAttributesCount != 0
}

// appendScope appends the scopeRec JSON of sp to dst.
func appendScope(dst []byte, sp *store.Span) ([]byte, error) {
	var err error
	dst = append(dst, `{"a":`...)
	if dst, err = sp.ScopeAttributes.AppendJSON(dst); err != nil {
		return nil, fmt.Errorf("scope attributes: %w", err)
	}
	dst = appendUint(dst, `,"d":`, sp.ScopeDroppedAttributesCount)
	if sp.ScopeSchemaURL != "" {
		dst = append(dst, `,"u":`...)
		dst = store.AppendJSONString(dst, sp.ScopeSchemaURL)
	}
	if sp.ResourceSchemaURL != "" {
		dst = append(dst, `,"ru":`...)
		dst = store.AppendJSONString(dst, sp.ResourceSchemaURL)
	}
	dst = appendUint(dst, `,"rd":`, sp.ResourceDroppedAttributesCount)
	return append(dst, '}'), nil
}

// appendUint appends key (`,"k":`) and n, or nothing when n is 0.
func appendUint(dst []byte, key string, n uint32) []byte {
	if n == 0 {
		return dst
	}
	dst = append(dst, key...)
	return strconv.AppendUint(dst, uint64(n), 10)
}

// applyTo copies a decoded scopes row into sp.
func (r *scopeRec) applyTo(sp *store.Span) {
	sp.ScopeAttributes = r.Attributes
	sp.ScopeDroppedAttributesCount = r.Dropped
	sp.ScopeSchemaURL = r.SchemaURL
	sp.ResourceSchemaURL = r.ResourceSchemaURL
	sp.ResourceDroppedAttributesCount = r.ResourceDropped
}

// codec compresses payloads. Safe for concurrent use.
type codec struct {
	enc *zstd.Encoder
	// dense compresses compact blocks (compact.go), at a higher level:
	// they are most of the file, and compressing them costs a fraction of
	// what the span rows they replace cost to insert.
	dense *zstd.Encoder
	dec   *zstd.Decoder
}

// newCodec builds a codec.
//
// No dictionary: payloads are compressed a block of many spans at a time,
// where a dictionary gained under 2% (measured) and resetting the encoder
// to one cost more than the compression itself.
func newCodec() (*codec, error) {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderConcurrency(2),
		zstd.WithEncoderCRC(false), // SQLite pages have their own integrity checks
	)
	if err != nil {
		return nil, fmt.Errorf("create zstd encoder: %w", err)
	}
	dense, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedBetterCompression),
		zstd.WithEncoderConcurrency(2),
		zstd.WithEncoderCRC(false),
	)
	if err != nil {
		enc.Close()
		return nil, fmt.Errorf("create zstd encoder: %w", err)
	}
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(2),
		// Cap what a corrupt frame can make the decoder allocate.
		zstd.WithDecoderMaxMemory(256<<20),
	)
	if err != nil {
		enc.Close()
		dense.Close()
		return nil, fmt.Errorf("create zstd decoder: %w", err)
	}
	return &codec{enc: enc, dense: dense, dec: dec}, nil
}

func (c *codec) close() {
	c.enc.Close()
	c.dense.Close()
	c.dec.Close()
}

// pack compresses b, prefixed with its encoding byte.
func (c *codec) pack(b []byte) []byte { return c.packWith(c.enc, b) }

// packDense is pack at the compact blocks' level.
func (c *codec) packDense(b []byte) []byte { return c.packWith(c.dense, b) }

func (c *codec) packWith(enc *zstd.Encoder, b []byte) []byte {
	if len(b) < compressMin {
		out := make([]byte, 0, len(b)+1)
		return append(append(out, encRaw), b...)
	}
	out := make([]byte, 1, len(b)/2+16)
	out[0] = encZstd
	out = enc.EncodeAll(b, out)
	if len(out) > len(b)+1 {
		out = append(append(out[:0], encRaw), b...)
	}
	return out
}

// unpack reverses pack.
func (c *codec) unpack(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("empty payload")
	}
	switch b[0] {
	case encRaw:
		return b[1:], nil
	case encZstd:
		out, err := c.dec.DecodeAll(b[1:], nil)
		if err != nil {
			return nil, fmt.Errorf("decompress payload: %w", err)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("unknown payload encoding %d", b[0])
	}
}

// unpackOwned is unpack for input that is only valid briefly (a
// sql.RawBytes): the result never shares memory with b.
func (c *codec) unpackOwned(b []byte) ([]byte, error) {
	if len(b) > 0 && b[0] == encRaw {
		return bytes.Clone(b[1:]), nil
	}
	return c.unpack(b)
}

// appendPayload appends the JSON payload of sp to dst. It writes the JSON
// directly (json.Marshal of a payload value re-validates and compacts every
// Attributes MarshalJSON output, and was a fifth of the ingest CPU).
//
// The attributes that equal a typed field (derivedAttrs) are left out.
func appendPayload(dst []byte, sp *store.Span) ([]byte, error) {
	var err error
	dst = append(dst, `{"a":`...)
	mask := derivedMask(sp)
	if mask == 0 {
		dst, err = sp.Attributes.AppendJSON(dst)
	} else {
		dst, err = sp.Attributes.AppendJSONExcept(dst, func(k string, _ any) bool {
			for i, d := range derivedAttrs {
				if mask&(1<<i) != 0 && d.key == k {
					return true
				}
			}
			return false
		})
	}
	if err != nil {
		return nil, fmt.Errorf("attributes: %w", err)
	}
	// Absent reads as null does (nil); most spans have no events, links
	// or documents.
	if sp.Events != nil {
		dst = append(dst, `,"e":[`...)
		for i, e := range sp.Events {
			ns, err := unixNanos(e.Time)
			if err != nil {
				return nil, fmt.Errorf("event %d (%q) time: %w", i, e.Name, err)
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"t":`...)
			dst = strconv.AppendInt(dst, ns, 10)
			dst = append(dst, `,"n":`...)
			dst = store.AppendJSONString(dst, e.Name)
			dst = append(dst, `,"a":`...)
			if dst, err = e.Attributes.AppendJSON(dst); err != nil {
				return nil, fmt.Errorf("event %d (%q) attributes: %w", i, e.Name, err)
			}
			dst = appendUint(dst, `,"d":`, e.DroppedAttributesCount)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if sp.Links != nil {
		dst = append(dst, `,"l":[`...)
		for i, l := range sp.Links {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"t":`...)
			dst = store.AppendJSONString(dst, l.TraceID)
			dst = append(dst, `,"s":`...)
			dst = store.AppendJSONString(dst, l.SpanID)
			dst = append(dst, `,"ts":`...)
			dst = store.AppendJSONString(dst, l.TraceState)
			dst = append(dst, `,"a":`...)
			if dst, err = l.Attributes.AppendJSON(dst); err != nil {
				return nil, fmt.Errorf("link %d attributes: %w", i, err)
			}
			dst = appendUint(dst, `,"f":`, l.Flags)
			dst = appendUint(dst, `,"d":`, l.DroppedAttributesCount)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if sp.RetrievedDocs != nil {
		dst = append(dst, `,"r":`...)
		dst = appendStrings(dst, sp.RetrievedDocs)
	}
	if sp.CitedDocs != nil {
		dst = append(dst, `,"c":`...)
		dst = appendStrings(dst, sp.CitedDocs)
	}
	if sp.CostUSD != nil && math.IsNaN(*sp.CostUSD) {
		dst = append(dst, `,"cn":true`...)
	}
	dst = appendUint(dst, `,"f":`, sp.Flags)
	dst = appendUint(dst, `,"da":`, sp.DroppedAttributesCount)
	dst = appendUint(dst, `,"de":`, sp.DroppedEventsCount)
	dst = appendUint(dst, `,"dl":`, sp.DroppedLinksCount)
	dst = appendUint(dst, `,"dv":`, mask)
	return append(dst, '}'), nil
}

func appendStrings(dst []byte, l []string) []byte {
	if l == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, v := range l {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = store.AppendJSONString(dst, v)
	}
	return append(dst, ']')
}

// minTime and maxTime bound what int64 unix nanoseconds can hold.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// unixNanos converts t, failing for times int64 nanoseconds cannot hold
// (years before 1678 or after 2262, including the zero time.Time).
func unixNanos(t time.Time) (int64, error) {
	if t.Before(minTime) || t.After(maxTime) {
		return 0, fmt.Errorf("%s is outside the storable range (1678-2262); is it unset?", t.UTC().Format(time.RFC3339Nano))
	}
	return t.UnixNano(), nil
}

// maxJSONDepth is encoding/json's nesting limit, kept so that what one
// decoder rejects the other rejects too.
const maxJSONDepth = 10000

// payloadDecoder decodes the payload JSON appendPayload writes (and the
// resource attribute JSON) straight into store types. It accepts exactly
// the JSON that encoding/json would accept for the payload struct and
// produces the same values (numbers without '.', 'e' or 'E' that fit become
// int64, others float64, as store.Attributes.UnmarshalJSON does; field names
// match case-insensitively; unknown fields are skipped; null leaves a field
// unset), which FuzzPayloadDecoderMatchesEncodingJSON checks.
//
// It exists because encoding/json was two thirds of GetTrace's CPU on a
// 50,000-span trace: it validates the payload, then re-scans every attribute
// map through a json.Decoder, allocates a json.Number per number and a
// string per key and value, and grows each map from empty.
//
// Strings are substrings of src when share is set (no allocation: the
// caller made src from a whole decompressed block most of whose spans it
// keeps), otherwise copies, with attribute keys interned.
type payloadDecoder struct {
	src   string
	pos   int
	depth int
	share bool
	// skipping is set while checking an unknown field's value, which
	// encoding/json only checks for syntax (an out-of-range number there is
	// no error).
	skipping bool
	// badNumbers counts the out-of-range numbers decoded as badNumber in
	// the current attribute map.
	badNumbers int
	keys       map[string]string // interned keys (share == false)
	kv         []kv              // stack of object members being built
	buf        []byte            // unescaping scratch
}

type kv struct {
	k string
	v any
}

func (d *payloadDecoder) reset(src string, share bool) {
	d.src, d.pos, d.depth, d.share, d.skipping = src, 0, 0, share, false
}

func (d *payloadDecoder) errorf(format string, args ...any) error {
	return fmt.Errorf("decode payload: offset %d: %s", d.pos, fmt.Sprintf(format, args...))
}

// decode parses one payload (the whole of d.src) into sp's payload fields.
func (d *payloadDecoder) decode(sp *store.Span) error {
	var p payload
	d.skipSpace()
	if d.literal("null") {
		return d.end()
	}
	err := d.object(func(key string) error {
		switch {
		case fieldIs(key, "a"):
			return d.attributes(&p.Attributes)
		case fieldIs(key, "e"):
			return d.array(func(isNull bool) {
				p.Events = resetSlice(p.Events, isNull)
			}, func() error {
				p.Events = growSlice(p.Events)
				return d.event(&p.Events[len(p.Events)-1])
			})
		case fieldIs(key, "l"):
			return d.array(func(isNull bool) {
				p.Links = resetSlice(p.Links, isNull)
			}, func() error {
				p.Links = growSlice(p.Links)
				return d.link(&p.Links[len(p.Links)-1])
			})
		case fieldIs(key, "r"):
			return d.stringList(&p.Retrieved)
		case fieldIs(key, "c"):
			return d.stringList(&p.Cited)
		case fieldIs(key, "cn"):
			return d.boolean(&p.CostNaN)
		case fieldIs(key, "f"):
			return d.uintField(&p.Flags)
		case fieldIs(key, "da"):
			return d.uintField(&p.DroppedAttrs)
		case fieldIs(key, "de"):
			return d.uintField(&p.DroppedEvents)
		case fieldIs(key, "dl"):
			return d.uintField(&p.DroppedLinks)
		case fieldIs(key, "dv"):
			return d.uintField(&p.Derived)
		default:
			return d.skipValue()
		}
	})
	if err != nil {
		return err
	}
	if err := d.end(); err != nil {
		return err
	}
	p.applyTo(sp)
	return nil
}

// applyTo copies a decoded payload's fields into sp, whose typed fields
// are set.
func (p *payload) applyTo(sp *store.Span) {
	sp.Attributes = p.Attributes
	sp.RetrievedDocs = p.Retrieved
	sp.CitedDocs = p.Cited
	sp.Flags = p.Flags
	sp.DroppedAttributesCount = p.DroppedAttrs
	sp.DroppedEventsCount = p.DroppedEvents
	sp.DroppedLinksCount = p.DroppedLinks
	if p.CostNaN {
		nan := math.NaN()
		sp.CostUSD = &nan
	}
	if p.Events != nil {
		sp.Events = make([]store.Event, len(p.Events))
		for i, e := range p.Events {
			sp.Events[i] = store.Event{Time: time.Unix(0, e.TimeNS).UTC(), Name: e.Name, Attributes: e.Attributes, DroppedAttributesCount: e.Dropped}
		}
	}
	if p.Links != nil {
		sp.Links = make([]store.Link, len(p.Links))
		for i, l := range p.Links {
			sp.Links[i] = store.Link{TraceID: l.TraceID, SpanID: l.SpanID, TraceState: l.TraceState, Attributes: l.Attributes,
				Flags: l.Flags, DroppedAttributesCount: l.Dropped}
		}
	}
	// Last: the fields are all set.
	if p.Derived != 0 && sp.Attributes != nil {
		for i, d := range derivedAttrs {
			if p.Derived&(1<<i) != 0 {
				sp.Attributes[d.key] = d.field(sp)
			}
		}
	}
}

// decodeAttributes parses a whole of d.src that is one attribute map (or
// null), as store.Attributes.UnmarshalJSON does.
func (d *payloadDecoder) decodeAttributes(a *store.Attributes) error {
	d.skipSpace()
	if err := d.attributes(a); err != nil {
		return err
	}
	return d.end()
}

// decodeScope parses a whole of d.src that is one scopes row's JSON (or
// null), as encoding/json does into a scopeRec.
func (d *payloadDecoder) decodeScope(r *scopeRec) error {
	d.skipSpace()
	if d.literal("null") {
		return d.end()
	}
	err := d.object(func(key string) error {
		switch {
		case fieldIs(key, "a"):
			return d.attributes(&r.Attributes)
		case fieldIs(key, "d"):
			return d.uintField(&r.Dropped)
		case fieldIs(key, "u"):
			return d.stringField(&r.SchemaURL)
		case fieldIs(key, "ru"):
			return d.stringField(&r.ResourceSchemaURL)
		case fieldIs(key, "rd"):
			return d.uintField(&r.ResourceDropped)
		default:
			return d.skipValue()
		}
	})
	if err != nil {
		return err
	}
	return d.end()
}

// fieldIs matches a JSON object key to a struct field name the way
// encoding/json does: exactly, or else case-insensitively.
func fieldIs(key, name string) bool {
	return key == name || strings.EqualFold(key, name)
}

func (d *payloadDecoder) end() error {
	d.skipSpace()
	if d.pos != len(d.src) {
		return d.errorf("unexpected data after the value")
	}
	return nil
}

func (d *payloadDecoder) skipSpace() {
	for d.pos < len(d.src) {
		switch d.src[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// literal consumes word (true, false, null) if it is next.
func (d *payloadDecoder) literal(word string) bool {
	if strings.HasPrefix(d.src[d.pos:], word) {
		d.pos += len(word)
		return true
	}
	return false
}

func (d *payloadDecoder) enter() error {
	d.depth++
	if d.depth > maxJSONDepth {
		return d.errorf("nested deeper than %d", maxJSONDepth)
	}
	return nil
}

// object parses an object (the next value must be one), calling member for
// each key with d positioned at the member's value.
func (d *payloadDecoder) object(member func(key string) error) error {
	if d.pos >= len(d.src) || d.src[d.pos] != '{' {
		return d.errorf("expected an object")
	}
	if err := d.enter(); err != nil {
		return err
	}
	d.pos++
	d.skipSpace()
	if d.pos < len(d.src) && d.src[d.pos] == '}' {
		d.pos++
		d.depth--
		return nil
	}
	for {
		key, err := d.key()
		if err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		d.skipSpace()
		if d.pos >= len(d.src) {
			return d.errorf("unterminated object")
		}
		switch d.src[d.pos] {
		case ',':
			d.pos++
			d.skipSpace()
		case '}':
			d.pos++
			d.depth--
			return nil
		default:
			return d.errorf("expected ',' or '}' in object")
		}
	}
}

// key parses `"key" :` and leaves d at the start of the value.
func (d *payloadDecoder) key() (string, error) {
	if d.pos >= len(d.src) || d.src[d.pos] != '"' {
		return "", d.errorf("expected a string key")
	}
	k, err := d.str(true)
	if err != nil {
		return "", err
	}
	d.skipSpace()
	if d.pos >= len(d.src) || d.src[d.pos] != ':' {
		return "", d.errorf("expected ':' after object key")
	}
	d.pos++
	d.skipSpace()
	return k, nil
}

// array parses null (calling start(true)) or an array (start(false), then
// elem for each element, d positioned at it). An array may be parsed
// although the destination ends up unchanged, as encoding/json does.
func (d *payloadDecoder) array(start func(isNull bool), elem func() error) error {
	if d.literal("null") {
		start(true)
		return nil
	}
	if d.pos >= len(d.src) || d.src[d.pos] != '[' {
		return d.errorf("expected an array or null")
	}
	if err := d.enter(); err != nil {
		return err
	}
	start(false)
	d.pos++
	d.skipSpace()
	if d.pos < len(d.src) && d.src[d.pos] == ']' {
		d.pos++
		d.depth--
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		d.skipSpace()
		if d.pos >= len(d.src) {
			return d.errorf("unterminated array")
		}
		switch d.src[d.pos] {
		case ',':
			d.pos++
			d.skipSpace()
		case ']':
			d.pos++
			d.depth--
			return nil
		default:
			return d.errorf("expected ',' or ']' in array")
		}
	}
}

func (d *payloadDecoder) event(e *eventRec) error {
	if d.literal("null") {
		return nil
	}
	return d.object(func(key string) error {
		switch {
		case fieldIs(key, "t"):
			return d.intField(&e.TimeNS)
		case fieldIs(key, "n"):
			return d.stringField(&e.Name)
		case fieldIs(key, "a"):
			return d.attributes(&e.Attributes)
		case fieldIs(key, "d"):
			return d.uintField(&e.Dropped)
		default:
			return d.skipValue()
		}
	})
}

func (d *payloadDecoder) link(l *linkRec) error {
	if d.literal("null") {
		return nil
	}
	return d.object(func(key string) error {
		switch {
		case key == "ts":
			return d.stringField(&l.TraceState)
		case fieldIs(key, "t"):
			return d.stringField(&l.TraceID)
		case fieldIs(key, "s"):
			return d.stringField(&l.SpanID)
		case fieldIs(key, "ts"):
			return d.stringField(&l.TraceState)
		case fieldIs(key, "a"):
			return d.attributes(&l.Attributes)
		case fieldIs(key, "f"):
			return d.uintField(&l.Flags)
		case fieldIs(key, "d"):
			return d.uintField(&l.Dropped)
		default:
			return d.skipValue()
		}
	})
}

func (d *payloadDecoder) stringList(dst *[]string) error {
	return d.array(func(isNull bool) {
		*dst = resetSlice(*dst, isNull)
	}, func() error {
		*dst = growSlice(*dst)
		return d.stringField(&(*dst)[len(*dst)-1])
	})
}

// resetSlice and growSlice reproduce how encoding/json decodes an array
// into a slice that may already hold one (a repeated key): null makes it
// nil; an array reuses its backing array, elements decoding over what was
// there; an empty array gives an empty, non-nil slice.
func resetSlice[T any](l []T, isNull bool) []T {
	switch {
	case isNull:
		return nil
	case l == nil:
		return []T{}
	default:
		return l[:0]
	}
}

func growSlice[T any](l []T) []T {
	if len(l) < cap(l) {
		return l[:len(l)+1]
	}
	var zero T
	return append(l, zero)
}

// stringField parses a string into dst; null leaves dst as it is.
func (d *payloadDecoder) stringField(dst *string) error {
	if d.literal("null") {
		return nil
	}
	if d.pos >= len(d.src) || d.src[d.pos] != '"' {
		return d.errorf("expected a string")
	}
	s, err := d.str(false)
	if err != nil {
		return err
	}
	*dst = s
	return nil
}

func (d *payloadDecoder) boolean(dst *bool) error {
	switch {
	case d.literal("null"):
	case d.literal("true"):
		*dst = true
	case d.literal("false"):
		*dst = false
	default:
		return d.errorf("expected a boolean")
	}
	return nil
}

// int64 parses an integer into dst as encoding/json does for an int64
// field: no fraction or exponent; null leaves dst as it is.
func (d *payloadDecoder) intField(dst *int64) error {
	if d.literal("null") {
		return nil
	}
	lit, err := d.number()
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	if err != nil {
		return d.errorf("number %s is not an int64", lit)
	}
	*dst = n
	return nil
}

// uintField parses a number into dst as encoding/json does for a uint32
// field: a whole, non-negative number that fits; null leaves dst as it is.
func (d *payloadDecoder) uintField(dst *uint32) error {
	if d.literal("null") {
		return nil
	}
	lit, err := d.number()
	if err != nil {
		return err
	}
	n, err := strconv.ParseUint(lit, 10, 32)
	if err != nil {
		return d.errorf("number %s is not a uint32", lit)
	}
	*dst = uint32(n)
	return nil
}

// attributes parses null (dst = nil) or an attribute map.
func (d *payloadDecoder) attributes(dst *store.Attributes) error {
	if d.literal("null") {
		*dst = nil
		return nil
	}
	d.badNumbers = 0
	m, err := d.mapValue()
	if err != nil {
		return err
	}
	if d.badNumbers > 0 {
		if lit, ok := findBadNumber(m); ok {
			return fmt.Errorf("decode attributes: number %s is out of range for a double", lit)
		}
	}
	*dst = store.Attributes(m)
	return nil
}

// badNumber is a number too large for a double, kept in place until the
// attribute map is complete: it is an error only if no later duplicate key
// replaced it, as with store.Attributes.UnmarshalJSON, which converts
// numbers after decoding the whole map.
type badNumber string

func findBadNumber(v any) (badNumber, bool) {
	switch t := v.(type) {
	case badNumber:
		return t, true
	case map[string]any:
		for _, e := range t {
			if b, ok := findBadNumber(e); ok {
				return b, true
			}
		}
	case []any:
		for _, e := range t {
			if b, ok := findBadNumber(e); ok {
				return b, true
			}
		}
	}
	return "", false
}

// mapValue parses an object into a map sized for its members (collected
// on d.kv first); later duplicates of a key win, as in encoding/json.
func (d *payloadDecoder) mapValue() (map[string]any, error) {
	base := len(d.kv)
	err := d.object(func(key string) error {
		v, err := d.value()
		if err != nil {
			return err
		}
		d.kv = append(d.kv, kv{d.intern(key), v})
		return nil
	})
	if err != nil {
		d.kv = d.kv[:base]
		return nil, err
	}
	m := make(map[string]any, len(d.kv)-base)
	for _, e := range d.kv[base:] {
		m[e.k] = e.v
	}
	clear(d.kv[base:]) // drop references for the GC
	d.kv = d.kv[:base]
	return m, nil
}

// intern returns the shared copy of an attribute key. Keys repeat on every
// span; in share mode they are free substrings already.
func (d *payloadDecoder) intern(k string) string {
	if d.share {
		return k
	}
	if s, ok := d.keys[k]; ok {
		return s
	}
	k = strings.Clone(k)
	if d.keys == nil {
		d.keys = make(map[string]string)
	}
	if len(d.keys) < 4096 {
		d.keys[k] = k
	}
	return k
}

// value parses any attribute value.
func (d *payloadDecoder) value() (any, error) {
	if d.pos >= len(d.src) {
		return nil, d.errorf("unexpected end of input")
	}
	switch c := d.src[d.pos]; {
	case c == '"':
		return d.str(false)
	case c == '{':
		return d.mapValue()
	case c == '[':
		var l []any
		err := d.array(func(bool) { l = []any{} }, func() error {
			v, err := d.value()
			if err != nil {
				return err
			}
			l = append(l, v)
			return nil
		})
		return l, err
	case c == '-' || (c >= '0' && c <= '9'):
		lit, err := d.number()
		if err != nil || d.skipping {
			return nil, err
		}
		v, err := attrNumber(lit)
		if err != nil {
			d.badNumbers++
			return badNumber(lit), nil
		}
		return v, nil
	case d.literal("true"):
		return true, nil
	case d.literal("false"):
		return false, nil
	case d.literal("null"):
		return nil, nil
	default:
		return nil, d.errorf("invalid character %q looking for a value", c)
	}
}

// attrNumber converts a JSON number as store.Attributes.UnmarshalJSON does.
func attrNumber(lit string) (any, error) {
	if !strings.ContainsAny(lit, ".eE") {
		if i, err := strconv.ParseInt(lit, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && (math.IsInf(f, 0) || math.IsNaN(f)) {
		return nil, fmt.Errorf("decode attributes: number %s is out of range for a double", lit)
	}
	return f, nil
}

// number consumes a JSON number and returns its text.
func (d *payloadDecoder) number() (string, error) {
	s, i := d.src, d.pos
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return "", d.errorf("invalid number")
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return "", d.errorf("invalid number")
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return "", d.errorf("invalid number")
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	lit := s[d.pos:i]
	d.pos = i
	return lit, nil
}

// str consumes a string literal (d at its opening quote) and returns its
// value, decoded as encoding/json does (invalid UTF-8 and unpaired
// surrogates become U+FFFD). Keys are never copied here: intern does that.
func (d *payloadDecoder) str(isKey bool) (string, error) {
	s := d.src
	i := d.pos + 1
	ascii := true
	for i < len(s) {
		c := s[i]
		if c == '"' {
			v := s[d.pos+1 : i]
			if !ascii && !utf8.ValidString(v) {
				break // needs U+FFFD replacement: slow path
			}
			d.pos = i + 1
			if d.share || isKey {
				return v, nil
			}
			return strings.Clone(v), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", d.errorf("invalid character %q in string", c)
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
		i++
	}
	if i >= len(s) {
		return "", d.errorf("unterminated string")
	}
	return d.unquote()
}

// unquote is str's slow path for strings with escapes or invalid UTF-8.
func (d *payloadDecoder) unquote() (string, error) {
	s := d.src
	b := d.buf[:0]
	i := d.pos + 1
	for {
		if i >= len(s) {
			return "", d.errorf("unterminated string")
		}
		c := s[i]
		switch {
		case c == '"':
			d.pos = i + 1
			d.buf = b
			return string(b), nil
		case c < 0x20:
			return "", d.errorf("invalid character %q in string", c)
		case c == '\\':
			if i+1 >= len(s) {
				return "", d.errorf("unterminated string")
			}
			switch e := s[i+1]; e {
			case '"', '\\', '/':
				b = append(b, e)
				i += 2
			case 'b':
				b, i = append(b, '\b'), i+2
			case 'f':
				b, i = append(b, '\f'), i+2
			case 'n':
				b, i = append(b, '\n'), i+2
			case 'r':
				b, i = append(b, '\r'), i+2
			case 't':
				b, i = append(b, '\t'), i+2
			case 'u':
				r := hex4(s[i+2:])
				if r < 0 {
					return "", d.errorf("invalid \\u escape in string")
				}
				i += 6
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
						r2 = hex4(s[i+2:])
					}
					if dec := utf16.DecodeRune(r, r2); dec != unicode.ReplacementChar {
						i += 6
						b = utf8.AppendRune(b, dec)
						continue
					}
					r = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", d.errorf("invalid escape '\\%c' in string", e)
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			b = utf8.AppendRune(b, r)
			i += size
		}
	}
}

// hex4 decodes the 4 hex digits starting s, or returns -1.
func hex4(s string) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range []byte(s[:4]) {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// skipValue consumes any JSON value (an unknown field's), checking it.
func (d *payloadDecoder) skipValue() error {
	d.skipping = true
	_, err := d.value()
	d.skipping = false
	return err
}
