#!/usr/bin/env node
// scripts/jsagent/send.js — send traces described by a spec file through the
// OpenTelemetry JS SDK (BasicTracerProvider, BatchSpanProcessor and the OTLP
// exporters), as a Node service instrumented with it would.
//
//   NODE_PATH=$(scripts/jsagent/install.sh) node scripts/jsagent/send.js \
//     --spec FILE --endpoint http://127.0.0.1:4318 --protocol json|proto [--tee URL]
//
// The spec (written by cmd/loom-eval/agreement_test.go) is
//   {"service": "...", "traces": [{"trace_id": "...", "spans": [
//     {"span_id": "...", "parent_span_id": "...", "name": "...", "kind": "client",
//      "start": [sec, nanos], "end": [sec, nanos], "attributes": {...},
//      "error": "status message", "batch": 0}, ...]}]}
// Spans are listed parents first. A parent id that is not in the trace is a
// remote parent that never arrives (a second fragment). Integer attribute
// values are sent as OTLP ints, strings as strings. Ids and timestamps are
// the spec's, so what the collector receives is known exactly.
//
// Each trace is sent in export batches: every span is started, then for each
// batch number in increasing order its spans are ended and the provider is
// flushed, which is one export request per exporter. So a trace whose
// children have batch 0 and whose root has batch 2 arrives children first.
//
// --tee URL exports every span a second time, as OTLP/HTTP JSON, to URL (the
// test records what the SDK sent there). On stdout: {"spans": N,
// "requests": M}. Any failed export is an error (exit 1) naming it.
'use strict';

const fs = require('fs');
const api = require('@opentelemetry/api');
const { BasicTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { OTLPTraceExporter: JSONExporter } = require('@opentelemetry/exporter-trace-otlp-http');
const { OTLPTraceExporter: ProtoExporter } = require('@opentelemetry/exporter-trace-otlp-proto');

function usage(msg) {
  process.stderr.write(`send.js: ${msg}\nusage: send.js --spec FILE --endpoint URL --protocol json|proto [--tee URL]\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i];
    if (!['--spec', '--endpoint', '--protocol', '--tee'].includes(k)) usage(`unknown flag ${k}`);
    if (i + 1 >= argv.length) usage(`${k} wants a value`);
    out[k.slice(2)] = argv[i + 1];
  }
  if (!out.spec || !out.endpoint) usage('--spec and --endpoint are required');
  if (!['json', 'proto'].includes(out.protocol)) usage(`--protocol: want json or proto, got ${out.protocol}`);
  return out;
}

// Counted wraps an exporter and remembers every failed export, since the
// BatchSpanProcessor only logs them.
class Counted {
  constructor(name, inner) {
    this.name = name;
    this.inner = inner;
    this.spans = 0;
    this.requests = 0;
    this.failures = [];
  }
  export(spans, done) {
    this.inner.export(spans, (result) => {
      this.requests++;
      if (result.code === 0) {
        this.spans += spans.length;
      } else {
        this.failures.push(`${this.name}: export of ${spans.length} spans failed: ${result.error ? result.error.message : 'code ' + result.code}`);
      }
      done(result);
    });
  }
  shutdown() { return this.inner.shutdown(); }
  forceFlush() { return this.inner.forceFlush ? this.inner.forceFlush() : Promise.resolve(); }
}

const kinds = {
  internal: api.SpanKind.INTERNAL,
  client: api.SpanKind.CLIENT,
  server: api.SpanKind.SERVER,
  producer: api.SpanKind.PRODUCER,
  consumer: api.SpanKind.CONSUMER,
};

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const spec = JSON.parse(fs.readFileSync(args.spec, 'utf8'));
  const next = { trace: '', span: '' };
  const idGenerator = {
    generateTraceId: () => next.trace,
    generateSpanId: () => next.span,
  };
  const base = args.endpoint.replace(/\/$/, '');
  const Exporter = args.protocol === 'json' ? JSONExporter : ProtoExporter;
  const primary = new Counted(`OTLP/HTTP ${args.protocol} to ${base}`, new Exporter({ url: `${base}/v1/traces` }));
  const exporters = [primary];
  if (args.tee) exporters.push(new Counted(`tee to ${args.tee}`, new JSONExporter({ url: args.tee })));
  // Only a flush exports: no timer, and batches larger than any trace.
  const processors = exporters.map((e) => new BatchSpanProcessor(e, { scheduledDelayMillis: 3600000, maxExportBatchSize: 4096, maxQueueSize: 4096 }));
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': spec.service }),
    idGenerator,
    spanProcessors: processors,
  });
  const tracer = provider.getTracer('loomwork-agreement-jsagent', '1.0.0');

  for (const tr of spec.traces) {
    const started = new Map();
    for (const s of tr.spans) {
      let ctx = api.ROOT_CONTEXT;
      if (s.parent_span_id) {
        const parent = started.get(s.parent_span_id);
        ctx = parent
          ? api.trace.setSpan(ctx, parent)
          : api.trace.setSpanContext(ctx, { traceId: tr.trace_id, spanId: s.parent_span_id, traceFlags: api.TraceFlags.SAMPLED, isRemote: true });
      }
      next.trace = tr.trace_id;
      next.span = s.span_id;
      const attributes = {};
      for (const [k, v] of Object.entries(s.attributes || {})) attributes[k] = v;
      const span = tracer.startSpan(s.name, { kind: kinds[s.kind || 'internal'], startTime: s.start, attributes }, ctx);
      if (span.spanContext().spanId !== s.span_id || span.spanContext().traceId !== tr.trace_id) {
        throw new Error(`span ${s.name}: the SDK gave ids ${span.spanContext().traceId}/${span.spanContext().spanId}, want ${tr.trace_id}/${s.span_id}`);
      }
      if (s.error) span.setStatus({ code: api.SpanStatusCode.ERROR, message: s.error });
      started.set(s.span_id, span);
    }
    const batches = [...new Set(tr.spans.map((s) => s.batch || 0))].sort((a, b) => a - b);
    for (const b of batches) {
      for (const s of tr.spans) {
        if ((s.batch || 0) === b) started.get(s.span_id).end(s.end);
      }
      await provider.forceFlush();
    }
  }
  await provider.shutdown();
  const failures = exporters.flatMap((e) => e.failures);
  if (failures.length > 0) {
    process.stderr.write(failures.join('\n') + '\n');
    process.exit(1);
  }
  process.stdout.write(JSON.stringify({ spans: primary.spans, requests: primary.requests }) + '\n');
}

main().catch((err) => {
  process.stderr.write(`send.js: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
