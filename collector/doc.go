// Package collector is Loomwork's OTLP ingestion, built from OpenTelemetry
// Collector components.
//
// Its pieces:
//
//   - The ingester (ingest.go): the write side every way into the store
//     shares — project, content capture and redaction, the store's own
//     refusals, and the committer (or the spool) that acknowledges only
//     once the spans are durable: the store's WriteSpans returned nil, or
//     the spool fsynced them. Concurrent requests are coalesced into one
//     write while their callers wait; nothing is queued in memory.
//   - Loomwork's OTLP front (front.go), serve's default receiver: gRPC and
//     HTTP (protobuf and JSON) on the Collector's configgrpc/confighttp
//     transports. It decodes protobuf straight into store spans
//     (genai.DecodeProto, 1.7× faster than pdata and MapTraces on an agent
//     request: docs/bench-ingest.md), asks the Collector's memory limiter
//     extension before decoding, and calls the ingester. It answers with
//     partial_success for spans rejected one by one and with the retryable
//     statuses the OTLP specification defines (UNAVAILABLE /
//     RESOURCE_EXHAUSTED with RetryInfo; HTTP 503 / 429 with Retry-After);
//     the core otlpreceiver can do neither, and answers INTERNAL to an
//     undecodable gRPC request.
//   - The Loomwork exporter (NewFactory): a standard Collector exporter
//     component, built with exporterhelper, that maps pdata with
//     genai.MapTraces and hands the spans to an ingester. It has no sending
//     queue and no batch processor may sit in front of it. Users add the
//     factory to their own Collector builds; serve runs it behind the core
//     otlpreceiver with `--receiver otlp`.
//   - Server: what `loom-eval serve` runs — the front (or the core
//     receiver with the memory limiter as its middleware, and the
//     exporter), the memory limiter extension and one ingester, wired
//     explicitly in Server.Start, with admission control before requests
//     are read (admission.go) and Health for /healthz and /readyz.
//   - The spooler (Config.SpoolDir): for a store that can spool
//     (store.SpoolingWriter, ClickHouse), a request is acknowledged once
//     its prepared batch is fsynced in collector/spool, and a feeder writes
//     the spool to the store in large inserts, committing its position
//     after each.
package collector
