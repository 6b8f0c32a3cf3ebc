package semconv

import "go.opentelemetry.io/otel/attribute"

// Chat is what a model call's span says about the call. A span is usually
// built in two calls to ChatAttributes: the request half when it starts
// (Operation, Provider if known, RequestModel, MaxTokens, Temperature,
// AgentName, ConversationID) and the response half when it ends (Provider
// if only the answer names it, ResponseModel, FinishReasons, Label, Usage,
// CostUSD, ErrorType). A field left at its zero value writes nothing.
type Chat struct {
	// Operation is the gen_ai.operation.name, e.g. OpChat.
	Operation string
	// Provider is the gen_ai.provider.name.
	Provider string
	// RequestModel is the model asked for ("" when the gateway routes).
	RequestModel string
	// MaxTokens is the request's output limit; 0 (the provider's default)
	// writes nothing.
	MaxTokens int
	// Temperature is the request's sampling temperature; nil writes nothing.
	Temperature *float64
	// AgentName and ConversationID tie the call to its agent and run.
	AgentName      string
	ConversationID string

	// ResponseModel is the model that answered.
	ResponseModel string
	// FinishReasons are why the model stopped; empty strings are dropped
	// (so a caller may pass []string{resp.StopReason} as it is), and no
	// reason writes nothing.
	FinishReasons []string
	// Label is the AttrModelLabel ("scripted", "live").
	Label string
	// Usage is the call's token counts; nil when the call reported none (it
	// failed before an answer), which writes no usage key at all.
	Usage *Usage
	// CostUSD is the call's cost (AttrCost); nil when unknown, which writes
	// nothing: an unknown cost is never written as 0.
	CostUSD *float64
	// ErrorType is the error.type of a failed call.
	ErrorType string
}

// Usage is one call's token counts as Loomwork's model clients normalise
// them (the GenAI convention's: InputTokens includes cached input,
// OutputTokens includes reasoning). Its fields match agents/llm.Usage, so
// semconv.Usage(u) converts one.
type Usage struct {
	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     int64
	CacheCreationTokens int64
	ReasoningTokens     int64
}

// ChatAttributes returns the attributes of a chat span for c: every field
// that is set, in a fixed order.
//
// The zero-count rule: when c.Usage is set, gen_ai.usage.input_tokens and
// gen_ai.usage.output_tokens are always written, 0 included — they are the
// usage report (the collector's HasUsage), and a reported 0 differs from no
// report. The cache read, cache creation and reasoning counts are written
// only when > 0: Usage (like agents/llm.Usage and the journal, which omits
// them when 0) cannot tell a provider that reported 0 from one that does
// not report the count at all, so a 0 is never written as if reported. An
// absent count reads as 0 everywhere downstream (collector, rollup,
// pricing), so no sum depends on the rule.
func ChatAttributes(c Chat) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 16)
	str := func(k, v string) {
		if v != "" {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	str(AttrOperationName, c.Operation)
	str(AttrProviderName, c.Provider)
	str(AttrRequestModel, c.RequestModel)
	if c.MaxTokens > 0 {
		attrs = append(attrs, attribute.Int(AttrRequestMaxTokens, c.MaxTokens))
	}
	if c.Temperature != nil {
		attrs = append(attrs, attribute.Float64(AttrRequestTemperature, *c.Temperature))
	}
	str(AttrAgentName, c.AgentName)
	str(AttrConversationID, c.ConversationID)

	str(AttrResponseModel, c.ResponseModel)
	var reasons []string
	for _, r := range c.FinishReasons {
		if r != "" {
			reasons = append(reasons, r)
		}
	}
	if len(reasons) > 0 {
		attrs = append(attrs, attribute.StringSlice(AttrResponseFinishReasons, reasons))
	}
	str(AttrModelLabel, c.Label)
	if u := c.Usage; u != nil {
		attrs = append(attrs,
			attribute.Int64(AttrUsageInputTokens, u.InputTokens),
			attribute.Int64(AttrUsageOutputTokens, u.OutputTokens))
		count := func(k string, n int64) {
			if n > 0 {
				attrs = append(attrs, attribute.Int64(k, n))
			}
		}
		count(AttrUsageCacheReadInputTokens, u.CacheReadTokens)
		count(AttrUsageCacheCreationInputTokens, u.CacheCreationTokens)
		count(AttrUsageReasoningOutputTokens, u.ReasoningTokens)
	}
	if c.CostUSD != nil {
		attrs = append(attrs, attribute.Float64(AttrCost, *c.CostUSD))
	}
	str(AttrErrorType, c.ErrorType)
	return attrs
}
