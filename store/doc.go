// Package store defines Loomwork's trace model and the contract every trace
// store backend fulfils.
//
// A Span is one OpenTelemetry span with the GenAI semantic-convention fields
// promoted to typed columns (operation, provider, models, token usage, tool,
// agent, retrieved and cited evidence) and everything else kept in attribute
// maps, so nothing a sender sent is lost. The collector maps OTLP into Spans;
// the scorer and the web UI read them back through Reader.
//
// Backends live in sub-packages (store/sqlite, the embedded default, and
// store/clickhouse) and all pass the same conformance suite in
// store/storetest.
package store
