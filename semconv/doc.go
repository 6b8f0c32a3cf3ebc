// Package semconv is the span vocabulary Loomwork writes and reads: every
// attribute key, event name and gen_ai.operation.name value that appears on
// a span, and the one builder of a model call's span attributes.
//
// It holds:
//
//   - the OpenTelemetry GenAI semantic-convention keys Loomwork uses
//     (gen_ai.*, plus the few general keys a GenAI span carries: error.type,
//     server.address, server.port, http.response.status_code), and the
//     deprecated and older gen_ai.* names the collector still accepts
//     (gen_ai.system, gen_ai.usage.prompt_tokens, ...);
//   - the gen_ai.operation.name values (OpChat, OpExecuteTool, OpInvokeAgent,
//     OpEmbeddings, OpTextCompletion, OpGenerateContent, OpRetrieval, ...)
//     and IsModelCallOperation, which says which of them are billed calls;
//   - Loomwork's own loomwork.* keys (citations, model label, journal
//     reuse, context layer, gateway, retrieval, truncation markers, and
//     the case, trial and sandbox keys of store/storetest's synthetic
//     traces);
//   - the OpenInference (openinference.*, llm.*, and its unprefixed
//     agent.name, session.id, tool.*) and OpenLLMetry (traceloop.*,
//     llm.usage.*, llm.request.type) names the collector's mapping reads,
//     because they are part of what a stored span can say; Loomwork itself
//     writes only one of them, AttrCost (llm.cost.total);
//   - ChatAttributes, the attributes of a chat span (the runtime's step, the
//     gateway's attempt and the context layer's summary call all use it, so
//     the three cannot disagree).
//
// The package imports nothing from this module, so every package (store,
// collector, agents, retrieval, scorer, web) can depend on it. A key
// written as a string literal anywhere else is a bug: add it here.
package semconv
