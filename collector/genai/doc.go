// Package genai maps OpenTelemetry spans (OTLP, as pdata) to Loomwork's
// store.Span rows.
//
// The mapping promotes the GenAI semantic-convention fields (operation,
// provider, models, token usage, tool, agent, conversation, retrieved and cited
// documents) to typed fields, and normalises what real senders send: the
// current gen_ai.* names, their deprecated predecessors
// (gen_ai.usage.prompt_tokens, gen_ai.system, ...), OpenInference's llm.* and
// openinference.span.kind, and OpenLLMetry's legacy names
// (gen_ai.usage.cache_read_input_tokens, llm.usage.*, traceloop.span.kind,
// llm.request.type); every name it reads is a constant of package semconv.
// Every attribute the sender sent, known or not, is kept in the span's
// attribute maps with its exact type.
//
// MapTraces is a pure function: the collector's exporter calls it on every
// OTLP request, and the scorer uses it (through DecodeJSON) to read OTLP/JSON
// files. Spans with invalid identifiers are rejected one by one with a
// reason, never the whole batch; oversized attribute values are truncated
// with a visible marker and their original size recorded under
// semconv.AttrTruncatedPrefix + key.
package genai
