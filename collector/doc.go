// Package collector is Loomwork's OTLP ingestion, built from OpenTelemetry
// Collector components.
//
// Its pieces:
//
//   - The Loomwork exporter (NewFactory): a standard Collector exporter
//     component, built with exporterhelper, that maps spans with
//     collector/genai and writes them to a trace store synchronously. It has
//     no sending queue and no batch processor may sit in front of it: the
//     exporter returns, and so the receiver acknowledges, only once the
//     spans are durable: the store's WriteSpans returned nil, or, with a
//     spool, the spool fsynced them. Concurrent requests are coalesced into
//     one write while their callers wait. Users can add the factory to
//     their own Collector builds.
//   - An OTLP front (Receiver): gRPC and HTTP (protobuf and JSON) on the
//     Collector's configgrpc/confighttp transports, answering with OTLP
//     partial_success for spans rejected individually and with the
//     retryable status codes the OTLP specification defines (UNAVAILABLE /
//     RESOURCE_EXHAUSTED with RetryInfo; HTTP 503 / 429 with Retry-After)
//     when the store or the memory limiter refuses. The core otlpreceiver
//     cannot return partial_success from a consumer and answers INTERNAL to
//     undecodable gRPC requests, which is why the front exists; the core
//     receiver can still be selected (ServerConfig.Receiver).
//   - Server: the in-process pipeline `loom-eval serve` runs — receiver →
//     memorylimiterprocessor → Loomwork exporter — wired through the
//     component factories and consumer interfaces, with admission control
//     before requests are read (admission.go) and Health for /healthz and
//     /readyz.
//   - The spooler (Config.SpoolDir): for a store that can spool
//     (store.SpoolingWriter, ClickHouse), a request is acknowledged once
//     its prepared batch is fsynced in collector/spool, and a feeder writes
//     the spool to the store in large inserts, committing its position
//     after each.
package collector
