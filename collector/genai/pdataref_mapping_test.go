// The pdataref_*_test.go files are the reference the direct protobuf
// decoder is checked against: this package's mapping as it was when it read
// the Collector's pdata (ptraceotlp.ExportRequest.UnmarshalProto, then a walk
// of ptrace.Traces). It is kept as it was, apart from every package-level
// name taking the prefix "ref" (so it can sit beside the code it checks) and
// the removal of what no test calls. It lives in _test.go files so that it
// is compiled only into this package's tests: a separate package that only
// tests import would still be built by go build ./..., and Go does not let
// one package import another's test files. The differential tests decode
// every input both ways and require the same spans, the same rejections and
// the same accept-or-refuse verdict.

package genai

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// refOptions tune the mapping. The zero value uses the defaults.
type refOptions struct {
	// MaxAttrBytes limits the size of one attribute value (span, event, link
	// and resource attributes). 0 means DefaultMaxAttrBytes; a negative
	// value disables truncation.
	MaxAttrBytes int
}

func (o refOptions) converter() refConverter {
	switch {
	case o.MaxAttrBytes == 0:
		return refConverter{max: refDefaultMaxAttrBytes}
	case o.MaxAttrBytes < 0:
		return refConverter{}
	}
	return refConverter{max: o.MaxAttrBytes}
}

// refRejection describes one span the mapping refused.
type refRejection struct {
	TraceID  string `json:"trace_id"` // hex as sent, "" when empty
	SpanID   string `json:"span_id"`
	SpanName string `json:"span_name"`
	Reason   string `json:"reason"`
}

func (r refRejection) String() string {
	return fmt.Sprintf("span %q (trace_id %q, span_id %q): %s", r.SpanName, r.TraceID, r.SpanID, r.Reason)
}

// Rejection reasons.
const (
	refReasonEmptyTraceID = "trace_id is empty or all zero"
	refReasonEmptySpanID  = "span_id is empty or all zero"
	refReasonSelfParent   = "parent_span_id equals span_id (a span cannot be its own parent)"
)

// refMapTraces maps every span of td. Spans with invalid identifiers or a
// negative token count are not mapped but returned as rejections; len(spans)+len(rejected) always equals
// td.SpanCount(). MapTraces does not modify td.
//
// Spans of one resource share its ResourceAttributes map and spans of one
// scope its ScopeAttributes map: callers must treat the returned maps as
// read-only.
func refMapTraces(td ptrace.Traces, opts refOptions) (spans []store.Span, rejected []refRejection) {
	c := opts.converter()
	spans = make([]store.Span, 0, td.SpanCount())
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		var service string
		resAttrs := c.convertMap(rs.Resource().Attributes(), func(k string, v pcommon.Value) {
			if k == "service.name" && v.Type() == pcommon.ValueTypeStr && service == "" {
				service = refValidUTF8(v.Str())
			}
		})
		resSchema := refValidUTF8(rs.SchemaUrl())
		resDropped := rs.Resource().DroppedAttributesCount()
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			scope := ss.Scope()
			scopeName := refValidUTF8(scope.Name())
			scopeVersion := refValidUTF8(scope.Version())
			// Shared by the scope's spans, like resAttrs.
			scopeAttrs := c.convertMap(scope.Attributes(), nil)
			scopeSchema := refValidUTF8(ss.SchemaUrl())
			sp := ss.Spans()
			for k := 0; k < sp.Len(); k++ {
				s := sp.At(k)
				if r, bad := refValidate(s); bad {
					rejected = append(rejected, r)
					continue
				}
				out := store.Span{
					ServiceName:                    service,
					ScopeName:                      scopeName,
					ScopeVersion:                   scopeVersion,
					ScopeAttributes:                scopeAttrs,
					ScopeDroppedAttributesCount:    scope.DroppedAttributesCount(),
					ScopeSchemaURL:                 scopeSchema,
					ResourceAttributes:             resAttrs,
					ResourceSchemaURL:              resSchema,
					ResourceDroppedAttributesCount: resDropped,
				}
				if reason := refMapSpan(c, s, &out); reason != "" {
					rejected = append(rejected, refRejectionOf(s, reason))
					continue
				}
				spans = append(spans, out)
			}
		}
	}
	return spans, rejected
}

// refValidate checks a span's identifiers.
func refValidate(s ptrace.Span) (refRejection, bool) {
	tid, sid, pid := s.TraceID(), s.SpanID(), s.ParentSpanID()
	reason := ""
	switch {
	case tid.IsEmpty():
		reason = refReasonEmptyTraceID
	case sid.IsEmpty():
		reason = refReasonEmptySpanID
	case !pid.IsEmpty() && pid == sid:
		reason = refReasonSelfParent
	default:
		return refRejection{}, false
	}
	return refRejectionOf(s, reason), true
}

func refRejectionOf(s ptrace.Span, reason string) refRejection {
	tid, sid := s.TraceID(), s.SpanID()
	r := refRejection{SpanName: refValidUTF8(s.Name()), Reason: reason}
	if !tid.IsEmpty() {
		r.TraceID = hex.EncodeToString(tid[:])
	}
	if !sid.IsEmpty() {
		r.SpanID = hex.EncodeToString(sid[:])
	}
	return r
}

// refMapSpan maps s into out; a non-empty result is why s must be rejected.
func refMapSpan(c refConverter, s ptrace.Span, out *store.Span) string {
	tid, sid := s.TraceID(), s.SpanID()
	out.TraceID = hex.EncodeToString(tid[:])
	out.SpanID = hex.EncodeToString(sid[:])
	if pid := s.ParentSpanID(); !pid.IsEmpty() {
		out.ParentSpanID = hex.EncodeToString(pid[:])
	}
	out.TraceState = refValidUTF8(s.TraceState().AsRaw())
	out.Name = refValidUTF8(s.Name())
	out.Kind = refSpanKind(s.Kind())
	out.StartTime = refTimestamp(s.StartTimestamp())
	out.EndTime = refTimestamp(s.EndTimestamp())
	out.StatusCode = refStatusCode(s.Status().Code())
	out.StatusMessage = refValidUTF8(s.Status().Message())
	out.Flags = s.Flags()
	out.DroppedAttributesCount = s.DroppedAttributesCount()
	out.DroppedEventsCount = s.DroppedEventsCount()
	out.DroppedLinksCount = s.DroppedLinksCount()

	x := refExtractor{max: c.max}
	out.Attributes = c.convertMap(s.Attributes(), x.visit)
	if x.invalid != "" {
		return x.invalid
	}
	x.apply(out)

	if evs := s.Events(); evs.Len() > 0 {
		out.Events = make([]store.Event, evs.Len())
		for i := range out.Events {
			e := evs.At(i)
			out.Events[i] = store.Event{
				Time:       refTimestamp(e.Timestamp()),
				Name:       refValidUTF8(e.Name()),
				Attributes: c.convertMap(e.Attributes(), nil),

				DroppedAttributesCount: e.DroppedAttributesCount(),
			}
		}
	}
	if ls := s.Links(); ls.Len() > 0 {
		out.Links = make([]store.Link, ls.Len())
		for i := range out.Links {
			l := ls.At(i)
			link := store.Link{
				TraceState:             refValidUTF8(l.TraceState().AsRaw()),
				Attributes:             c.convertMap(l.Attributes(), nil),
				Flags:                  l.Flags(),
				DroppedAttributesCount: l.DroppedAttributesCount(),
			}
			if t := l.TraceID(); !t.IsEmpty() {
				link.TraceID = hex.EncodeToString(t[:])
			}
			if t := l.SpanID(); !t.IsEmpty() {
				link.SpanID = hex.EncodeToString(t[:])
			}
			out.Links[i] = link
		}
	}
	return ""
}

// refTimestamp converts OTLP nanoseconds to UTC time; 0 (unset) stays the Unix
// epoch so the value round-trips.
func refTimestamp(ts pcommon.Timestamp) time.Time {
	n := uint64(ts)
	if n > math.MaxInt64 {
		n = math.MaxInt64
	}
	return time.Unix(0, int64(n)).UTC()
}

func refSpanKind(k ptrace.SpanKind) string {
	switch k {
	case ptrace.SpanKindInternal:
		return "internal"
	case ptrace.SpanKindServer:
		return "server"
	case ptrace.SpanKindClient:
		return "client"
	case ptrace.SpanKindProducer:
		return "producer"
	case ptrace.SpanKindConsumer:
		return "consumer"
	}
	return "unspecified"
}

func refStatusCode(c ptrace.StatusCode) string {
	switch c {
	case ptrace.StatusCodeOk:
		return store.StatusOK
	case ptrace.StatusCodeError:
		return store.StatusError
	}
	return store.StatusUnset
}

// refPick keeps the candidate with the lowest rank (the most authoritative
// attribute name) among those offered.
type refPick[T any] struct {
	v    T
	rank int8
	ok   bool
}

func (p *refPick[T]) offer(v T, rank int8) {
	if !p.ok || rank < p.rank {
		p.v, p.rank, p.ok = v, rank, true
	}
}

// refExtractor collects the typed GenAI fields in one pass over a span's
// attributes.
type refExtractor struct {
	operation, provider, requestModel, responseModel refPick[string]
	agent, conversation, toolName, toolCallID        refPick[string]
	input, output, cacheRead, cacheCreation, reason  refPick[int64]
	cost                                             refPick[float64]
	retrieved                                        refPick[[]string]
	cited                                            refPick[[]string]

	traceloopKind, traceloopEntity string
	oiDocs                         map[int]string // OpenInference retrieval.documents.N.document.id

	max int // the converter's value limit, applied to typed strings too

	key     string // the attribute being visited
	invalid string // why the span must be rejected ("" when it is fine)
}

// Attribute names. Ranks order the alternatives for one field: the current
// GenAI convention first, then its deprecated names, then OpenInference,
// then OpenLLMetry's legacy names.
func (x *refExtractor) visit(k string, v pcommon.Value) {
	x.key = k
	switch k {
	// Operation.
	case semconv.AttrOperationName:
		x.offerOp(refNormalizeOperation(refStr(v)), 0)
	case semconv.OpenInferenceSpanKind:
		x.offerOp(refOpenInferenceOperation(refStr(v)), 1)
	case semconv.OpenLLMetrySpanKind:
		x.traceloopKind = strings.ToLower(strings.TrimSpace(refStr(v)))
		x.offerOp(refTraceloopOperation(x.traceloopKind), 2)
	case semconv.OpenLLMetryRequestType:
		x.offerOp(refRequestTypeOperation(refStr(v)), 3)
	case semconv.OpenLLMetryEntityName:
		x.traceloopEntity = refStr(v)

	// Provider.
	case semconv.AttrProviderName:
		x.offerStr(&x.provider, strings.ToLower(refStr(v)), 0)
	case semconv.AttrSystem:
		x.offerStr(&x.provider, strings.ToLower(refStr(v)), 1)
	case semconv.OpenInferenceSystem:
		x.offerStr(&x.provider, strings.ToLower(refStr(v)), 2)
	case semconv.OpenInferenceProvider:
		x.offerStr(&x.provider, strings.ToLower(refStr(v)), 3)

	// Models.
	case semconv.AttrRequestModel:
		x.offerStr(&x.requestModel, refStr(v), 0)
	case semconv.OpenInferenceRequestModelName:
		x.offerStr(&x.requestModel, refStr(v), 1)
	case semconv.OpenInferenceModelName:
		x.offerStr(&x.requestModel, refStr(v), 2)
		x.offerStr(&x.responseModel, refStr(v), 2)
	case semconv.OpenInferenceEmbeddingModelName:
		x.offerStr(&x.requestModel, refStr(v), 3)
	case semconv.AttrResponseModel:
		x.offerStr(&x.responseModel, refStr(v), 0)
	case semconv.OpenInferenceResponseModelName:
		x.offerStr(&x.responseModel, refStr(v), 1)

	// Agent, conversation, tool.
	case semconv.AttrAgentName:
		x.offerStr(&x.agent, refStr(v), 0)
	case semconv.OpenInferenceAgentName:
		x.offerStr(&x.agent, refStr(v), 1)
	case semconv.AttrConversationID:
		x.offerStr(&x.conversation, refStr(v), 0)
	case semconv.OpenInferenceSessionID:
		x.offerStr(&x.conversation, refStr(v), 1)
	case semconv.AttrToolName:
		x.offerStr(&x.toolName, refStr(v), 0)
	case semconv.OpenInferenceToolName:
		x.offerStr(&x.toolName, refStr(v), 1)
	case semconv.AttrToolCallID:
		x.offerStr(&x.toolCallID, refStr(v), 0)
	case semconv.OpenInferenceToolCallID:
		x.offerStr(&x.toolCallID, refStr(v), 1)
	case semconv.OpenInferenceToolID:
		x.offerStr(&x.toolCallID, refStr(v), 2)

	// Usage.
	case semconv.AttrUsageInputTokens:
		x.offerInt(&x.input, v, 0)
	case semconv.AttrUsagePromptTokens:
		x.offerInt(&x.input, v, 1)
	case semconv.OpenInferenceTokenCountPrompt:
		x.offerInt(&x.input, v, 2)
	case semconv.OpenLLMetryUsageInputTokens:
		x.offerInt(&x.input, v, 3)
	case semconv.OpenLLMetryUsagePromptTokens:
		x.offerInt(&x.input, v, 4)

	case semconv.AttrUsageOutputTokens:
		x.offerInt(&x.output, v, 0)
	case semconv.AttrUsageCompletionTokens:
		x.offerInt(&x.output, v, 1)
	case semconv.OpenInferenceTokenCountCompletion:
		x.offerInt(&x.output, v, 2)
	case semconv.OpenLLMetryUsageOutputTokens:
		x.offerInt(&x.output, v, 3)
	case semconv.OpenLLMetryUsageCompletionTokens:
		x.offerInt(&x.output, v, 4)

	case semconv.AttrUsageCacheReadInputTokens:
		x.offerInt(&x.cacheRead, v, 0)
	case semconv.AttrUsageCacheReadInputTokensOld:
		x.offerInt(&x.cacheRead, v, 1)
	case semconv.OpenInferenceTokenCountCacheRead:
		x.offerInt(&x.cacheRead, v, 2)
	case semconv.OpenLLMetryUsageCacheReadInputTokens:
		x.offerInt(&x.cacheRead, v, 3)

	case semconv.AttrUsageCacheCreationInputTokens:
		x.offerInt(&x.cacheCreation, v, 0)
	case semconv.AttrUsageCacheCreationInputTokensOld:
		x.offerInt(&x.cacheCreation, v, 1)
	case semconv.OpenInferenceTokenCountCacheWrite:
		x.offerInt(&x.cacheCreation, v, 2)
	case semconv.OpenLLMetryUsageCacheCreationInputTokens:
		x.offerInt(&x.cacheCreation, v, 3)

	case semconv.AttrUsageReasoningOutputTokens:
		x.offerInt(&x.reason, v, 0)
	case semconv.AttrUsageReasoningTokensOld:
		x.offerInt(&x.reason, v, 1)
	case semconv.OpenInferenceTokenCountReasoning:
		x.offerInt(&x.reason, v, 2)
	case semconv.OpenLLMetryUsageReasoningTokens:
		x.offerInt(&x.reason, v, 3)

	case semconv.AttrCost:
		x.offerCost(v, 0)
	case semconv.AttrUsageCost:
		x.offerCost(v, 1)

	// Evidence.
	case semconv.AttrRetrievalDocuments:
		if ids := refDocumentIDs(v); len(ids) > 0 {
			x.retrieved.offer(ids, 0)
		}
	case semconv.AttrCitations:
		if ids := refDocumentIDs(v); len(ids) > 0 {
			x.cited.offer(ids, 0)
		}
	default:
		// OpenInference flattens retrieved documents as
		// retrieval.documents.<i>.document.id.
		if rest, ok := strings.CutPrefix(k, semconv.OpenInferenceRetrievalDocumentsPrefix); ok {
			if idx, ok := strings.CutSuffix(rest, semconv.OpenInferenceDocumentIDSuffix); ok {
				if i, err := strconv.Atoi(idx); err == nil && i >= 0 {
					if id := refScalarString(v); id != "" {
						if x.oiDocs == nil {
							x.oiDocs = make(map[int]string)
						}
						x.oiDocs[i] = id
					}
				}
			}
		}
	}
}

func (x *refExtractor) offerOp(op string, rank int8) {
	if op != "" {
		x.operation.offer(op, rank)
	}
}

func (x *refExtractor) offerStr(p *refPick[string], s string, rank int8) {
	if s = strings.TrimSpace(s); s != "" {
		if x.max > 0 {
			s, _ = refCutString(s, x.max)
		}
		p.offer(s, rank)
	}
}

func (x *refExtractor) offerInt(p *refPick[int64], v pcommon.Value, rank int8) {
	n, ok := refSignedCount(v)
	if !ok {
		return
	}
	if n < 0 {
		// A negative count is a sender bug that would corrupt every sum it
		// enters: the span is rejected, naming the attribute.
		if x.invalid == "" {
			x.invalid = fmt.Sprintf("%s is negative (%d); token counts must be >= 0", x.key, n)
		}
		return
	}
	p.offer(n, rank)
}

func (x *refExtractor) offerCost(v pcommon.Value, rank int8) {
	var f float64
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		f = v.Double()
	case pcommon.ValueTypeInt:
		f = float64(v.Int())
	case pcommon.ValueTypeStr:
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(v.Str()), 64); err != nil {
			return
		}
	default:
		return
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return
	}
	x.cost.offer(f, rank)
}

// apply writes the collected fields into out.
func (x *refExtractor) apply(out *store.Span) {
	out.Operation = x.operation.v
	out.Provider = x.provider.v
	out.RequestModel = x.requestModel.v
	out.ResponseModel = x.responseModel.v
	out.ConversationID = x.conversation.v
	out.ToolCallID = x.toolCallID.v

	// OpenLLMetry names agents and tools by traceloop.entity.name.
	if x.traceloopEntity != "" {
		switch x.traceloopKind {
		case "agent":
			x.offerStr(&x.agent, x.traceloopEntity, 2)
		case "tool":
			x.offerStr(&x.toolName, x.traceloopEntity, 2)
		}
	}
	out.AgentName = x.agent.v
	out.ToolName = x.toolName.v

	out.HasUsage = x.input.ok || x.output.ok || x.cacheRead.ok || x.cacheCreation.ok || x.reason.ok
	out.InputTokens = x.input.v
	out.OutputTokens = x.output.v
	out.CacheReadTokens = x.cacheRead.v
	out.CacheCreationTokens = x.cacheCreation.v
	out.ReasoningTokens = x.reason.v
	if x.cost.ok {
		c := x.cost.v
		out.CostUSD = &c
	}

	if len(x.oiDocs) > 0 {
		idx := make([]int, 0, len(x.oiDocs))
		for i := range x.oiDocs {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		ids := make([]string, len(idx))
		for n, i := range idx {
			ids[n] = x.oiDocs[i]
		}
		x.retrieved.offer(ids, 1)
	}
	out.RetrievedDocs = x.retrieved.v
	out.CitedDocs = x.cited.v
}

// refStr returns a string attribute's value, "" for other types.
func refStr(v pcommon.Value) string {
	if v.Type() != pcommon.ValueTypeStr {
		return ""
	}
	return refValidUTF8(v.Str())
}

// refScalarString renders a string or int attribute as a string id.
func refScalarString(v pcommon.Value) string {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return strings.TrimSpace(refValidUTF8(v.Str()))
	case pcommon.ValueTypeInt:
		return strconv.FormatInt(v.Int(), 10)
	}
	return ""
}

// refSignedCount reads a whole number from an int, a whole double or a numeric
// string; ok is false for anything else (which the mapping ignores).
func refSignedCount(v pcommon.Value) (int64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int(), true
	case pcommon.ValueTypeDouble:
		f := v.Double()
		if f != math.Trunc(f) || math.Abs(f) > math.MaxInt64/2 {
			return 0, false
		}
		return int64(f), true
	case pcommon.ValueTypeStr:
		s := strings.TrimSpace(v.Str())
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, true
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt64/2 {
			return 0, false
		}
		return int64(f), true
	}
	return 0, false
}

// refDocumentIDs reads document ids from the forms senders use: an array of
// strings (or ints), an array of maps with an "id", a JSON string holding
// either of those, or a single id string.
func refDocumentIDs(v pcommon.Value) []string {
	switch v.Type() {
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		ids := make([]string, 0, s.Len())
		for i := 0; i < s.Len(); i++ {
			e := s.At(i)
			switch e.Type() {
			case pcommon.ValueTypeMap:
				if idv, ok := e.Map().Get("id"); ok {
					if id := refScalarString(idv); id != "" {
						ids = append(ids, id)
					}
				}
			case pcommon.ValueTypeStr:
				// An element may itself be a JSON object with an id.
				if t := strings.TrimSpace(e.Str()); strings.HasPrefix(t, "{") {
					if id := refJsonObjectID([]byte(t)); id != "" {
						ids = append(ids, id)
						continue
					}
				}
				if id := refScalarString(e); id != "" {
					ids = append(ids, id)
				}
			case pcommon.ValueTypeInt:
				ids = append(ids, refScalarString(e))
			}
		}
		return ids
	case pcommon.ValueTypeStr:
		t := strings.TrimSpace(refValidUTF8(v.Str()))
		if t == "" {
			return nil
		}
		if strings.HasPrefix(t, "[") {
			return refJsonDocumentIDs([]byte(t))
		}
		if strings.HasPrefix(t, "{") {
			if id := refJsonObjectID([]byte(t)); id != "" {
				return []string{id}
			}
			return nil
		}
		return []string{t}
	}
	return nil
}

// refJsonDocumentIDs reads a JSON array of ids or of objects with an "id".
func refJsonDocumentIDs(b []byte) []string {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil
	}
	ids := make([]string, 0, len(raw))
	for _, r := range raw {
		if id := refJsonID(r); id != "" {
			ids = append(ids, id)
		} else if id := refJsonObjectID(r); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// refJsonObjectID reads the "id" of a JSON object.
func refJsonObjectID(b []byte) string {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return ""
	}
	if r, ok := obj["id"]; ok {
		return refJsonID(r)
	}
	return ""
}

// refJsonID reads a JSON string or integer as an id.
func refJsonID(r json.RawMessage) string {
	var s string
	if err := json.Unmarshal(r, &s); err == nil {
		return strings.TrimSpace(refValidUTF8(s))
	}
	var n json.Number
	if err := json.Unmarshal(r, &n); err == nil {
		if _, err := n.Int64(); err == nil {
			return n.String()
		}
	}
	return ""
}

// refDecodeProto decodes one OTLP/protobuf ExportTraceServiceRequest with
// pdata and maps it: the reference path.
func refDecodeProto(b []byte, opts refOptions) ([]store.Span, []refRejection, error) {
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(b); err != nil {
		return nil, nil, err
	}
	spans, rej := refMapTraces(req.Traces(), opts)
	return spans, rej, nil
}
