package main

// Span kinds and status codes of opentelemetry/proto/trace/v1.
const (
	kindInternal = 1
	kindServer   = 2
	kindClient   = 3

	statusOK    = 1
	statusError = 2
)

// genSpan is one span of a generated trace, before encoding. Times are
// nanoseconds from the trace's start; the trace id is written as zeros and
// patched per request.
type genSpan struct {
	id, parent [8]byte // parent all zero for a root
	name       string
	kind       int
	start, end int64
	scope      int // index into the service's scopes
	attrs      []kv
	events     []genEvent
	links      []genLink
	status     int
	statusMsg  string
	flags      uint32
}

type genEvent struct {
	at    int64
	name  string
	attrs []kv
}

// genLink links to a span of the same trace (patched with it).
type genLink struct {
	span  [8]byte
	attrs []kv
}

// tracePart is the encoded spans of one trace that belong to one scope:
// repeated Span fields (field 2 of ScopeSpans), ready to concatenate, and
// where the values to patch per request sit.
type tracePart struct {
	scope   int
	spans   int
	data    []byte
	traceAt []int32 // 16-byte trace ids (span and same-trace link)
	spanAt  []int32 // 8-byte span ids (own, parent, link) of this trace
	timeAt  []int32 // fixed64 nanosecond times
}

// encodeSpan appends sp as field 2 (a Span of ScopeSpans) to part,
// recording what to patch.
func (part *tracePart) encodeSpan(sp *genSpan, base int64) {
	var zeroTrace [16]byte
	var body []byte
	var trace, spans, times []int // relative to body
	at := 0
	body, at = appendBytesFieldAt(body, 1, zeroTrace[:])
	trace = append(trace, at)
	body, at = appendBytesFieldAt(body, 2, sp.id[:])
	spans = append(spans, at)
	if sp.parent != [8]byte{} {
		body, at = appendBytesFieldAt(body, 4, sp.parent[:])
		spans = append(spans, at)
	}
	body = appendStringField(body, 5, sp.name)
	body = appendVarintField(body, 6, uint64(sp.kind))
	body, at = appendFixed64Field(body, 7, uint64(base+sp.start))
	times = append(times, at)
	body, at = appendFixed64Field(body, 8, uint64(base+sp.end))
	times = append(times, at)
	body = appendAttributes(body, 9, sp.attrs)
	for _, ev := range sp.events {
		var e []byte
		e, at = appendFixed64Field(e, 1, uint64(base+ev.at))
		e = appendStringField(e, 2, ev.name)
		e = appendAttributes(e, 3, ev.attrs)
		body = appendTag(body, 11, wtLen)
		body = appendVarint(body, uint64(len(e)))
		times = append(times, len(body)+at)
		body = append(body, e...)
	}
	for _, ln := range sp.links {
		var l []byte
		var tAt, sAt int
		l, tAt = appendBytesFieldAt(l, 1, zeroTrace[:])
		l, sAt = appendBytesFieldAt(l, 2, ln.span[:])
		l = appendAttributes(l, 4, ln.attrs)
		body = appendTag(body, 13, wtLen)
		body = appendVarint(body, uint64(len(l)))
		trace = append(trace, len(body)+tAt)
		spans = append(spans, len(body)+sAt)
		body = append(body, l...)
	}
	if sp.status != 0 {
		var st []byte
		if sp.statusMsg != "" {
			st = appendStringField(st, 2, sp.statusMsg)
		}
		st = appendVarintField(st, 3, uint64(sp.status))
		body = appendLenField(body, 15, st)
	}
	if sp.flags != 0 {
		body = appendFixed32Field(body, 16, sp.flags)
	}
	part.data = appendTag(part.data, 2, wtLen)
	part.data = appendVarint(part.data, uint64(len(body)))
	off := len(part.data)
	part.data = append(part.data, body...)
	for _, x := range trace {
		part.traceAt = append(part.traceAt, int32(off+x))
	}
	for _, x := range spans {
		part.spanAt = append(part.spanAt, int32(off+x))
	}
	for _, x := range times {
		part.timeAt = append(part.timeAt, int32(off+x))
	}
	part.spans++
}
