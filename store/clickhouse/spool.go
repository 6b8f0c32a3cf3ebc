package clickhouse

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/loomwork/loomwork/store"
)

var _ store.SpoolingWriter = (*Store)(nil)

// spoolMagic starts every spooled batch: the format and its version. A
// change to the encoding takes a new version; the decoder reads this one,
// spoolMagicV3 (no keys, no labels), spoolMagicV2 (no digest, no masks,
// the attribute JSON whole) and
// spoolMagicV1 (written before projects: every span of the default
// project, kept for ever), and refuses others.
//
// Version 3 puts the batch's digest (batchDigest) after the magic, so an
// insert of many spooled records gets its deduplication token without
// decoding them first (WriteSpooled decodes each only when its turn comes),
// and its attribute JSON leaves out what typed columns hold, with each
// span's mask of those (so the feeder neither cuts them out nor copies).
//
// Version 4 adds each span's attribute keys (as indexes into a dictionary
// of the record's keys, after the attribute JSON) and its model label, so
// the feeder sends attr_keys itself and finds the label without searching
// the JSON for it (the search was 3.8% of serve's CPU on the agent load).
const (
	spoolMagic   = "LWC4"
	spoolMagicV3 = "LWC3"
	spoolMagicV2 = "LWC2"
	spoolMagicV1 = "LWC1"
)

// AppendBatch appends the spool encoding of a batch PrepareSpans made: the
// span fields the insert reads and the attribute JSON it already encoded,
// so a batch read back is inserted without mapping or encoding again. It
// consumes the batch (its memory is reused).
func (s *Store) AppendBatch(dst []byte, b store.PreparedBatch) ([]byte, error) {
	p, ok := b.(*PreparedSpans)
	if !ok {
		return dst, fmt.Errorf("spool batch (%T): %w", b, store.ErrForeignBatch)
	}
	defer s.recycle(p)
	version := 4
	if !p.hasKeys {
		version = 3 // a batch without its keys (one decoded from an older record)
	}
	return appendSpooled(dst, p, version), nil
}

// appendSpooled encodes p in spool format version (4; 3 for a batch
// without keys; tests write 2, which needs p's attribute JSON whole, and
// 3, to check that older records still read).
func appendSpooled(dst []byte, p *PreparedSpans, version int) []byte {
	switch version {
	case 4:
		dst = append(dst, spoolMagic...)
		dst = append(dst, p.digest[:]...)
	case 3:
		dst = append(dst, spoolMagicV3...)
		dst = append(dst, p.digest[:]...)
	default:
		dst = append(dst, spoolMagicV2...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(p.spans)))
	dst = appendBytes(dst, p.arena)
	if version >= 4 {
		// The record's distinct keys, each once: a span lists its keys
		// by index. A request's spans share most of their keys.
		if p.dictIdx == nil {
			p.dictIdx = map[string]uint64{}
		}
		clear(p.dictIdx)
		p.dict, p.keyIdx = p.dict[:0], resize(p.keyIdx, len(p.keys))
		for j, k := range p.keys {
			x, ok := p.dictIdx[k]
			if !ok {
				x = uint64(len(p.dict))
				p.dictIdx[k] = x
				p.dict = append(p.dict, k)
			}
			p.keyIdx[j] = x // one look-up per key, kept for the spans below
		}
		dst = binary.AppendUvarint(dst, uint64(len(p.dict)))
		for _, k := range p.dict {
			dst = appendBytes(dst, unsafe.Slice(unsafe.StringData(k), len(k)))
		}
	}
	for i := range p.spans {
		sp := &p.spans[i]
		for _, v := range [...]string{
			sp.TraceID, sp.SpanID, sp.ParentSpanID, sp.TraceState, sp.Name, sp.Kind,
			sp.StatusCode, sp.StatusMessage, sp.ServiceName, sp.ScopeName, sp.ScopeVersion,
			sp.ScopeSchemaURL, sp.ResourceSchemaURL, sp.Operation, sp.Provider,
			sp.RequestModel, sp.ResponseModel, sp.AgentName, sp.ConversationID,
			sp.ToolName, sp.ToolCallID, p.events[i], p.links[i],
		} {
			dst = appendBytes(dst, unsafe.Slice(unsafe.StringData(v), len(v)))
		}
		dst = binary.AppendVarint(dst, sp.StartTime.UnixNano())
		dst = binary.AppendVarint(dst, sp.EndTime.UnixNano())
		for _, v := range [...]uint32{
			sp.Flags, sp.DroppedAttributesCount, sp.DroppedEventsCount, sp.DroppedLinksCount,
			sp.ScopeDroppedAttributesCount, sp.ResourceDroppedAttributesCount,
		} {
			dst = binary.AppendUvarint(dst, uint64(v))
		}
		var bits byte
		if sp.HasUsage {
			bits |= 1
		}
		if sp.CostUSD != nil {
			bits |= 2
		}
		dst = append(dst, bits)
		for _, v := range [...]int64{sp.InputTokens, sp.OutputTokens, sp.CacheReadTokens, sp.CacheCreationTokens, sp.ReasoningTokens} {
			dst = binary.AppendVarint(dst, v)
		}
		if sp.CostUSD != nil {
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(*sp.CostUSD))
		}
		for _, docs := range [...][]string{sp.RetrievedDocs, sp.CitedDocs} {
			dst = binary.AppendUvarint(dst, uint64(len(docs)))
			for _, d := range docs {
				dst = appendBytes(dst, unsafe.Slice(unsafe.StringData(d), len(d)))
			}
		}
		for _, at := range [...]jsonSpan{p.attrAt[i], p.resAt[i], p.scopeAt[i]} {
			dst = binary.AppendUvarint(dst, uint64(at.from))
			dst = binary.AppendUvarint(dst, uint64(at.to))
		}
		// Version 3: the attribute JSON leaves out what typed columns
		// hold; the mask says what (attributes_in_columns).
		if version >= 3 {
			dst = binary.AppendUvarint(dst, uint64(p.attrMask[i]))
		}
		// Version 2: the project and its retention, from which the
		// insert computes the rows' expiry.
		dst = appendBytes(dst, unsafe.Slice(unsafe.StringData(sp.Project), len(sp.Project)))
		dst = binary.AppendVarint(dst, int64(sp.Retention))
		// Version 4: the model label and the attribute keys.
		if version >= 4 {
			dst = appendBytes(dst, unsafe.Slice(unsafe.StringData(p.labels[i]), len(p.labels[i])))
			idx := p.keyIdx[p.keyAt[i].from:p.keyAt[i].to]
			dst = binary.AppendUvarint(dst, uint64(len(idx)))
			for _, x := range idx {
				dst = binary.AppendUvarint(dst, x)
			}
		}
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// spoolDecoder reads from one owned copy of the record; strings point into
// it (the copy is never written again).
type spoolDecoder struct {
	buf []byte
	off int
	err error
}

func (d *spoolDecoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("spooled batch: %s at offset %d of %d: %w", what, d.off, len(d.buf), store.ErrBadSpoolRecord)
	}
}

func (d *spoolDecoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf[d.off:])
	if n <= 0 {
		d.fail("bad " + what)
		return 0
	}
	d.off += n
	return v
}

func (d *spoolDecoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.buf[d.off:])
	if n <= 0 {
		d.fail("bad " + what)
		return 0
	}
	d.off += n
	return v
}

func (d *spoolDecoder) bytes(what string) []byte {
	if d.err != nil {
		return nil
	}
	// The length is read here rather than by uvarint(what + " length"):
	// building that label for every string was 3.6% of serve's CPU at
	// ingest (BenchmarkIngest's profile); it is built only on failure.
	n, k := binary.Uvarint(d.buf[d.off:])
	if k <= 0 {
		d.fail("bad " + what + " length")
		return nil
	}
	d.off += k
	if n > uint64(len(d.buf)-d.off) {
		d.fail(what + " longer than the record")
		return nil
	}
	b := d.buf[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return b
}

func (d *spoolDecoder) str(what string) string {
	b := d.bytes(what)
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func (d *spoolDecoder) u32(what string) uint32 {
	v := d.uvarint(what)
	if v > math.MaxUint32 {
		d.fail(what + " out of range")
	}
	return uint32(v)
}

// decodeSpooled reads a batch AppendBatch encoded into a new batch.
func decodeSpooled(src []byte) (*PreparedSpans, error) {
	p := new(PreparedSpans)
	if err := p.decodeSpooled(src, true); err != nil {
		return nil, err
	}
	return p, nil
}

// spoolHeader is what a spooled record says before its spans.
type spoolHeader struct {
	version int // 1 to 4
	digest  [32]byte
	spans   int
}

// readSpoolHeader reads the header of a spooled record; d is left at the
// attribute JSON.
func readSpoolHeader(d *spoolDecoder) spoolHeader {
	var h spoolHeader
	src := d.buf
	if len(src) < len(spoolMagic) {
		d.fail(fmt.Sprintf("no %q header (another format or version)", spoolMagic))
		return h
	}
	switch string(src[:len(spoolMagic)]) {
	case spoolMagic:
		h.version = 4
	case spoolMagicV3:
		h.version = 3
	case spoolMagicV2:
		h.version = 2
	case spoolMagicV1:
		h.version = 1
	default:
		d.fail(fmt.Sprintf("no %q header (another format or version)", spoolMagic))
		return h
	}
	d.off = len(spoolMagic)
	if h.version >= 3 {
		if len(src)-d.off < len(h.digest) {
			d.fail("truncated digest")
			return h
		}
		copy(h.digest[:], src[d.off:])
		d.off += len(h.digest)
	}
	n := d.uvarint("span count")
	// Every span takes well over one byte, so a count beyond the record's
	// length is corrupt; checked before allocating.
	if d.err == nil && n > uint64(len(d.buf)) {
		d.fail("span count larger than the record")
	}
	h.spans = int(n)
	return h
}

// decodeSpooled reads a batch AppendBatch encoded into p, reusing p's
// memory from an earlier batch (which must be unused by now: a batch is
// consumed by its write). With own, p keeps a copy of src; without, p's
// strings point into src, which must then stay unchanged while p is used.
func (p *PreparedSpans) decodeSpooled(src []byte, own bool) error {
	if own {
		// The copy goes into p.buf, which no string of p's previous use
		// is read from any more.
		p.buf = append(p.buf[:0], src...)
		src = p.buf
	}
	d := &spoolDecoder{buf: src}
	h := readSpoolHeader(d)
	if d.err != nil {
		return d.err
	}
	n := uint64(h.spans)
	arena := d.bytes("attribute JSON")
	if d.err != nil {
		return d.err
	}
	p.ownSpans = resize(p.ownSpans, int(n))
	p.spans, p.arena = p.ownSpans, arena
	p.elided, p.attrMask = h.version >= 3, resize(p.attrMask, int(n))
	p.attrAt, p.resAt, p.scopeAt = resize(p.attrAt, int(n)), resize(p.resAt, int(n)), resize(p.scopeAt, int(n))
	p.events, p.links = resize(p.events, int(n)), resize(p.links, int(n))
	p.docs = p.docs[:0]
	p.hasKeys = h.version >= 4
	p.keys, p.dict = p.keys[:0], p.dict[:0]
	p.keyAt, p.labels = resize(p.keyAt, int(n)), resize(p.labels, int(n))
	if p.hasKeys {
		k := d.uvarint("key count")
		if d.err == nil && k > uint64(len(d.buf)-d.off) {
			d.fail("key count larger than the record")
		}
		for range k {
			if d.err != nil {
				break
			}
			p.dict = append(p.dict, d.str("attribute key"))
		}
		if d.err != nil {
			return d.err
		}
	}
	for i := range p.spans {
		sp := &p.spans[i]
		for _, f := range [...]*string{
			&sp.TraceID, &sp.SpanID, &sp.ParentSpanID, &sp.TraceState, &sp.Name, &sp.Kind,
			&sp.StatusCode, &sp.StatusMessage, &sp.ServiceName, &sp.ScopeName, &sp.ScopeVersion,
			&sp.ScopeSchemaURL, &sp.ResourceSchemaURL, &sp.Operation, &sp.Provider,
			&sp.RequestModel, &sp.ResponseModel, &sp.AgentName, &sp.ConversationID,
			&sp.ToolName, &sp.ToolCallID, &p.events[i], &p.links[i],
		} {
			*f = d.str("string field")
		}
		sp.StartTime = time.Unix(0, d.varint("start time")).UTC()
		sp.EndTime = time.Unix(0, d.varint("end time")).UTC()
		for _, f := range [...]*uint32{
			&sp.Flags, &sp.DroppedAttributesCount, &sp.DroppedEventsCount, &sp.DroppedLinksCount,
			&sp.ScopeDroppedAttributesCount, &sp.ResourceDroppedAttributesCount,
		} {
			*f = d.u32("count")
		}
		var bits byte
		if d.err == nil {
			if d.off >= len(d.buf) {
				d.fail("missing flags")
			} else {
				bits = d.buf[d.off]
				d.off++
				if bits&^3 != 0 {
					d.fail("unknown flag bits")
				}
			}
		}
		sp.HasUsage = bits&1 != 0
		for _, f := range [...]*int64{&sp.InputTokens, &sp.OutputTokens, &sp.CacheReadTokens, &sp.CacheCreationTokens, &sp.ReasoningTokens} {
			*f = d.varint("token count")
		}
		if bits&2 != 0 && d.err == nil {
			if len(d.buf)-d.off < 8 {
				d.fail("truncated cost")
			} else {
				c := math.Float64frombits(binary.LittleEndian.Uint64(d.buf[d.off:]))
				d.off += 8
				sp.CostUSD = &c
			}
		}
		for _, f := range [...]*[]string{&sp.RetrievedDocs, &sp.CitedDocs} {
			k := d.uvarint("document count")
			if d.err == nil && k > uint64(len(d.buf)-d.off) {
				d.fail("document count larger than the record")
			}
			if d.err != nil || k == 0 {
				continue
			}
			// One array for the batch's ids; each span's are a
			// full slice of it (a later append cannot write into them).
			from := len(p.docs)
			for range k {
				p.docs = append(p.docs, d.str("document id"))
			}
			*f = p.docs[from:len(p.docs):len(p.docs)]
		}
		for _, at := range [...]*jsonSpan{&p.attrAt[i], &p.resAt[i], &p.scopeAt[i]} {
			from, to := d.uvarint("JSON offset"), d.uvarint("JSON offset")
			if d.err == nil && (from > to || to > uint64(len(arena))) {
				d.fail(fmt.Sprintf("JSON range %d..%d outside the %d-byte arena", from, to, len(arena)))
			}
			at.from, at.to = int(from), int(to)
		}
		p.attrMask[i] = 0
		if h.version >= 3 {
			p.attrMask[i] = d.u32("typed attribute mask")
			if d.err == nil && p.attrMask[i]>>len(typedAttrs) != 0 {
				d.fail("typed attribute mask names unknown columns")
			}
		}
		sp.Project, sp.Retention = "", 0
		if h.version >= 2 {
			sp.Project = d.str("project")
			sp.Retention = time.Duration(d.varint("retention"))
		}
		if h.version >= 4 {
			p.labels[i] = d.str("model label")
			k := d.uvarint("span key count")
			if d.err == nil && k > uint64(len(d.buf)-d.off) {
				d.fail("span key count larger than the record")
			}
			from := len(p.keys)
			for range k {
				x := d.uvarint("key index")
				if d.err != nil {
					break
				}
				if x >= uint64(len(p.dict)) {
					d.fail(fmt.Sprintf("key index %d outside the %d-key dictionary", x, len(p.dict)))
					break
				}
				p.keys = append(p.keys, p.dict[x])
			}
			p.keyAt[i] = jsonSpan{from, len(p.keys)}
		}
		if d.err != nil {
			return fmt.Errorf("span %d of %d: %w", i, n, d.err)
		}
		// The insert assumes what Prepare checked.
		if err := validateSpan(sp); err != nil {
			return fmt.Errorf("spooled batch: span %d of %d: %w: %w", i, n, err, store.ErrBadSpoolRecord)
		}
	}
	if d.off != len(d.buf) {
		d.fail("trailing bytes")
		return d.err
	}
	p.traces.build(p.spans)
	if h.version >= 3 {
		p.digest = h.digest
	} else {
		p.digest = batchDigest(p.spans)
	}
	return nil
}
