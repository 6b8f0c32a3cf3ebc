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

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// Options tune the mapping. The zero value uses the defaults.
type Options struct {
	// MaxAttrBytes limits the size of one attribute value (span, event, link
	// and resource attributes). 0 means DefaultMaxAttrBytes; a negative
	// value disables truncation.
	MaxAttrBytes int
}

func (o Options) converter() converter {
	switch {
	case o.MaxAttrBytes == 0:
		return converter{max: DefaultMaxAttrBytes}
	case o.MaxAttrBytes < 0:
		return converter{}
	}
	return converter{max: o.MaxAttrBytes}
}

// Rejection describes one span the mapping refused.
type Rejection struct {
	TraceID  string `json:"trace_id"` // hex as sent, "" when empty
	SpanID   string `json:"span_id"`
	SpanName string `json:"span_name"`
	Reason   string `json:"reason"`
}

func (r Rejection) String() string {
	return fmt.Sprintf("span %q (trace_id %q, span_id %q): %s", r.SpanName, r.TraceID, r.SpanID, r.Reason)
}

// Rejection reasons.
const (
	ReasonEmptyTraceID = "trace_id is empty or all zero"
	ReasonEmptySpanID  = "span_id is empty or all zero"
	ReasonSelfParent   = "parent_span_id equals span_id (a span cannot be its own parent)"
)

// RejectionSummary formats rejections as one message for an OTLP
// partial_success error_message: the count and the first few reasons.
func RejectionSummary(rs []Rejection) string {
	if len(rs) == 0 {
		return ""
	}
	const show = 3
	var b strings.Builder
	fmt.Fprintf(&b, "%d span(s) rejected: ", len(rs))
	for i, r := range rs {
		if i == show {
			fmt.Fprintf(&b, "; and %d more", len(rs)-show)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(r.String())
	}
	return b.String()
}

// MapTraces maps every span of td. Spans with invalid identifiers or a
// negative token count are not mapped but returned as rejections;
// len(spans)+len(rejected) always equals td.SpanCount(). MapTraces does not
// modify td.
//
// It encodes td as OTLP protobuf and decodes that with DecodeProto, so the
// pdata path (OTLP/JSON, the Collector's own receiver) and the wire path map
// with one implementation. Spans of one resource share its
// ResourceAttributes map and spans of one scope its ScopeAttributes map:
// callers must treat the returned maps as read-only.
func MapTraces(td ptrace.Traces, opts Options) (spans []store.Span, rejected []Rejection) {
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err == nil {
		spans, rejected, err = DecodeProto(b, opts)
	}
	if err != nil {
		// pdata marshals what it holds and DecodeProto reads what pdata
		// writes; should that ever fail, no span may vanish silently.
		rejected = make([]Rejection, 0, td.SpanCount())
		reason := "internal error re-reading the request: " + err.Error()
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				sp := sss.At(j).Spans()
				for k := 0; k < sp.Len(); k++ {
					s := sp.At(k)
					rejected = append(rejected, newRejection([16]byte(s.TraceID()), [8]byte(s.SpanID()), s.Name(), reason))
				}
			}
		}
		return nil, rejected
	}
	return spans, rejected
}

// newRejection describes a refused span by its identifiers as sent.
func newRejection(tid [16]byte, sid [8]byte, name, reason string) Rejection {
	r := Rejection{SpanName: validUTF8(name), Reason: reason}
	if tid != ([16]byte{}) {
		r.TraceID = hex.EncodeToString(tid[:])
	}
	if sid != ([8]byte{}) {
		r.SpanID = hex.EncodeToString(sid[:])
	}
	return r
}

// timestamp converts OTLP nanoseconds to UTC time; 0 (unset) stays the Unix
// epoch so the value round-trips.
func timestamp(n uint64) time.Time {
	if n > math.MaxInt64 {
		n = math.MaxInt64
	}
	return time.Unix(0, int64(n)).UTC()
}

// spanKind names OTLP's SpanKind enum.
func spanKind(k int32) string {
	switch k {
	case 1:
		return "internal"
	case 2:
		return "server"
	case 3:
		return "client"
	case 4:
		return "producer"
	case 5:
		return "consumer"
	}
	return "unspecified"
}

// statusCode names OTLP's Status.StatusCode enum.
func statusCode(c int32) string {
	switch c {
	case 1:
		return store.StatusOK
	case 2:
		return store.StatusError
	}
	return store.StatusUnset
}

// pick keeps the candidate with the lowest rank (the most authoritative
// attribute name) among those offered.
type pick[T any] struct {
	v    T
	rank int8
	ok   bool
}

func (p *pick[T]) offer(v T, rank int8) {
	if !p.ok || rank < p.rank {
		p.v, p.rank, p.ok = v, rank, true
	}
}

// extractor collects the typed GenAI fields in one pass over a span's
// attributes.
type extractor struct {
	operation, provider, requestModel, responseModel pick[string]
	agent, conversation, toolName, toolCallID        pick[string]
	input, output, cacheRead, cacheCreation, reason  pick[int64]
	cost                                             pick[float64]
	retrieved                                        pick[[]string]
	cited                                            pick[[]string]

	traceloopKind, traceloopEntity string
	oiDocs                         map[int]string // OpenInference retrieval.documents.N.document.id

	max int // the converter's value limit, applied to typed strings too

	key     string // the attribute being visited
	invalid string // why the span must be rejected ("" when it is fine)
}

// Attribute names. Ranks order the alternatives for one field: the current
// GenAI convention first, then its deprecated names, then OpenInference,
// then OpenLLMetry's legacy names.
func (x *extractor) visit(k string, v *val) {
	x.key = k
	switch k {
	// Operation.
	case semconv.AttrOperationName:
		x.offerOp(normalizeOperation(str(v)), 0)
	case semconv.OpenInferenceSpanKind:
		x.offerOp(openInferenceOperation(str(v)), 1)
	case semconv.OpenLLMetrySpanKind:
		x.traceloopKind = strings.ToLower(strings.TrimSpace(str(v)))
		x.offerOp(traceloopOperation(x.traceloopKind), 2)
	case semconv.OpenLLMetryRequestType:
		x.offerOp(requestTypeOperation(str(v)), 3)
	case semconv.OpenLLMetryEntityName:
		x.traceloopEntity = str(v)

	// Provider.
	case semconv.AttrProviderName:
		x.offerStr(&x.provider, strings.ToLower(str(v)), 0)
	case semconv.AttrSystem:
		x.offerStr(&x.provider, strings.ToLower(str(v)), 1)
	case semconv.OpenInferenceSystem:
		x.offerStr(&x.provider, strings.ToLower(str(v)), 2)
	case semconv.OpenInferenceProvider:
		x.offerStr(&x.provider, strings.ToLower(str(v)), 3)

	// Models.
	case semconv.AttrRequestModel:
		x.offerStr(&x.requestModel, str(v), 0)
	case semconv.OpenInferenceRequestModelName:
		x.offerStr(&x.requestModel, str(v), 1)
	case semconv.OpenInferenceModelName:
		x.offerStr(&x.requestModel, str(v), 2)
		x.offerStr(&x.responseModel, str(v), 2)
	case semconv.OpenInferenceEmbeddingModelName:
		x.offerStr(&x.requestModel, str(v), 3)
	case semconv.AttrResponseModel:
		x.offerStr(&x.responseModel, str(v), 0)
	case semconv.OpenInferenceResponseModelName:
		x.offerStr(&x.responseModel, str(v), 1)

	// Agent, conversation, tool.
	case semconv.AttrAgentName:
		x.offerStr(&x.agent, str(v), 0)
	case semconv.OpenInferenceAgentName:
		x.offerStr(&x.agent, str(v), 1)
	case semconv.AttrConversationID:
		x.offerStr(&x.conversation, str(v), 0)
	case semconv.OpenInferenceSessionID:
		x.offerStr(&x.conversation, str(v), 1)
	case semconv.AttrToolName:
		x.offerStr(&x.toolName, str(v), 0)
	case semconv.OpenInferenceToolName:
		x.offerStr(&x.toolName, str(v), 1)
	case semconv.AttrToolCallID:
		x.offerStr(&x.toolCallID, str(v), 0)
	case semconv.OpenInferenceToolCallID:
		x.offerStr(&x.toolCallID, str(v), 1)
	case semconv.OpenInferenceToolID:
		x.offerStr(&x.toolCallID, str(v), 2)

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
		if ids := documentIDs(v); len(ids) > 0 {
			x.retrieved.offer(ids, 0)
		}
	case semconv.AttrCitations:
		if ids := documentIDs(v); len(ids) > 0 {
			x.cited.offer(ids, 0)
		}
	default:
		// OpenInference flattens retrieved documents as
		// retrieval.documents.<i>.document.id.
		if rest, ok := strings.CutPrefix(k, semconv.OpenInferenceRetrievalDocumentsPrefix); ok {
			if idx, ok := strings.CutSuffix(rest, semconv.OpenInferenceDocumentIDSuffix); ok {
				if i, err := strconv.Atoi(idx); err == nil && i >= 0 {
					if id := scalarString(v); id != "" {
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

func (x *extractor) offerOp(op string, rank int8) {
	if op != "" {
		x.operation.offer(op, rank)
	}
}

func (x *extractor) offerStr(p *pick[string], s string, rank int8) {
	if s = strings.TrimSpace(s); s != "" {
		if x.max > 0 {
			s, _ = cutString(s, x.max)
		}
		p.offer(s, rank)
	}
}

func (x *extractor) offerInt(p *pick[int64], v *val, rank int8) {
	n, ok := signedCount(v)
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

func (x *extractor) offerCost(v *val, rank int8) {
	var f float64
	switch v.kind {
	case kindDouble:
		f = v.f
	case kindInt:
		f = float64(v.n)
	case kindStr:
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(v.s), 64); err != nil {
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
func (x *extractor) apply(out *store.Span) {
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

// str returns a string attribute's value, "" for other types.
func str(v *val) string {
	if v.kind != kindStr {
		return ""
	}
	if s, ok := v.box.(string); ok {
		return s
	}
	return validUTF8(v.s)
}

// scalarString renders a string or int attribute as a string id.
func scalarString(v *val) string {
	switch v.kind {
	case kindStr:
		return strings.TrimSpace(validUTF8(v.s))
	case kindInt:
		return strconv.FormatInt(v.n, 10)
	}
	return ""
}

// signedCount reads a whole number from an int, a whole double or a numeric
// string; ok is false for anything else (which the mapping ignores).
func signedCount(v *val) (int64, bool) {
	switch v.kind {
	case kindInt:
		return v.n, true
	case kindDouble:
		f := v.f
		if f != math.Trunc(f) || math.Abs(f) > math.MaxInt64/2 {
			return 0, false
		}
		return int64(f), true
	case kindStr:
		s := strings.TrimSpace(v.s)
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

// documentIDs reads document ids from the forms senders use: an array of
// strings (or ints), an array of maps with an "id", a JSON string holding
// either of those, or a single id string.
func documentIDs(v *val) []string {
	switch v.kind {
	case kindArray:
		ids := make([]string, 0, len(v.elems))
		for i := range v.elems {
			e := &v.elems[i].v
			switch e.kind {
			case kindMap:
				if idv, ok := e.get("id"); ok {
					if id := scalarString(idv); id != "" {
						ids = append(ids, id)
					}
				}
			case kindStr:
				// An element may itself be a JSON object with an id.
				if t := strings.TrimSpace(e.s); strings.HasPrefix(t, "{") {
					if id := jsonObjectID([]byte(t)); id != "" {
						ids = append(ids, id)
						continue
					}
				}
				if id := scalarString(e); id != "" {
					ids = append(ids, id)
				}
			case kindInt:
				ids = append(ids, scalarString(e))
			}
		}
		return ids
	case kindStr:
		t := strings.TrimSpace(validUTF8(v.s))
		if t == "" {
			return nil
		}
		if strings.HasPrefix(t, "[") {
			return jsonDocumentIDs([]byte(t))
		}
		if strings.HasPrefix(t, "{") {
			if id := jsonObjectID([]byte(t)); id != "" {
				return []string{id}
			}
			return nil
		}
		return []string{t}
	}
	return nil
}

// jsonDocumentIDs reads a JSON array of ids or of objects with an "id".
func jsonDocumentIDs(b []byte) []string {
	if ids, ok := scanDocumentIDs(b); ok {
		return ids
	}
	return decodeDocumentIDs(b)
}

// decodeDocumentIDs is jsonDocumentIDs through encoding/json, for any
// shape.
func decodeDocumentIDs(b []byte) []string {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil
	}
	ids := make([]string, 0, len(raw))
	for _, r := range raw {
		if id := jsonID(r); id != "" {
			ids = append(ids, id)
		} else if id := jsonObjectID(r); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// jsonObjectID reads the "id" of a JSON object.
func jsonObjectID(b []byte) string {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return ""
	}
	if r, ok := obj["id"]; ok {
		return jsonID(r)
	}
	return ""
}

// jsonID reads a JSON string or integer as an id.
func jsonID(r json.RawMessage) string {
	var s string
	if err := json.Unmarshal(r, &s); err == nil {
		return strings.TrimSpace(validUTF8(s))
	}
	var n json.Number
	if err := json.Unmarshal(r, &n); err == nil {
		if _, err := n.Int64(); err == nil {
			return n.String()
		}
	}
	return ""
}
