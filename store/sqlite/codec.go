package sqlite

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/klauspost/compress/zstd"

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
}

type eventRec struct {
	TimeNS     int64            `json:"t"`
	Name       string           `json:"n"`
	Attributes store.Attributes `json:"a"`
}

type linkRec struct {
	TraceID    string           `json:"t"`
	SpanID     string           `json:"s"`
	TraceState string           `json:"ts,omitempty"`
	Attributes store.Attributes `json:"a"`
}

// codec compresses payloads. Safe for concurrent use.
type codec struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
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
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(2),
		// Cap what a corrupt frame can make the decoder allocate.
		zstd.WithDecoderMaxMemory(256<<20),
	)
	if err != nil {
		enc.Close()
		return nil, fmt.Errorf("create zstd decoder: %w", err)
	}
	return &codec{enc: enc, dec: dec}, nil
}

func (c *codec) close() {
	c.enc.Close()
	c.dec.Close()
}

// pack compresses b, prefixed with its encoding byte.
func (c *codec) pack(b []byte) []byte {
	if len(b) < compressMin {
		out := make([]byte, 0, len(b)+1)
		return append(append(out, encRaw), b...)
	}
	out := make([]byte, 1, len(b)/2+16)
	out[0] = encZstd
	out = c.enc.EncodeAll(b, out)
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

// appendPayload appends the JSON payload of sp to dst. It writes the JSON
// directly (json.Marshal of a payload value re-validates and compacts every
// Attributes MarshalJSON output, and was a fifth of the ingest CPU).
func appendPayload(dst []byte, sp *store.Span) ([]byte, error) {
	var err error
	dst = append(dst, `{"a":`...)
	if dst, err = sp.Attributes.AppendJSON(dst); err != nil {
		return nil, fmt.Errorf("attributes: %w", err)
	}
	dst = append(dst, `,"e":`...)
	if sp.Events == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
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
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"l":`...)
	if sp.Links == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
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
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"r":`...)
	dst = appendStrings(dst, sp.RetrievedDocs)
	dst = append(dst, `,"c":`...)
	dst = appendStrings(dst, sp.CitedDocs)
	if sp.CostUSD != nil && math.IsNaN(*sp.CostUSD) {
		dst = append(dst, `,"cn":true`...)
	}
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

// decodePayload fills sp's payload fields from the JSON raw.
func decodePayload(raw []byte, sp *store.Span) error {
	var p payload
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("decode payload: %w", err)
	}
	sp.Attributes = p.Attributes
	sp.RetrievedDocs = p.Retrieved
	sp.CitedDocs = p.Cited
	if p.CostNaN {
		nan := math.NaN()
		sp.CostUSD = &nan
	}
	if p.Events != nil {
		sp.Events = make([]store.Event, len(p.Events))
		for i, e := range p.Events {
			sp.Events[i] = store.Event{Time: time.Unix(0, e.TimeNS).UTC(), Name: e.Name, Attributes: e.Attributes}
		}
	}
	if p.Links != nil {
		sp.Links = make([]store.Link, len(p.Links))
		for i, l := range p.Links {
			sp.Links[i] = store.Link{TraceID: l.TraceID, SpanID: l.SpanID, TraceState: l.TraceState, Attributes: l.Attributes}
		}
	}
	return nil
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
