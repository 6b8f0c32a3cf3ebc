#!/usr/bin/env node
// scripts/examples/nodeagent/agent.js — an example agent evaluated by
// `loom-eval experiment run --cmd 'node agent.js'` (docs/experiments.md,
// "Evaluate your agent"). It knows nothing of Loomwork: the OpenTelemetry
// JS SDK (@opentelemetry/sdk-node, the OTLP/HTTP exporter) configured only
// by the standard OTEL_* environment, and the one line that joins the
// caller's trace (TRACEPARENT).
//
// It reads the task on stdin, asks the model at $AGENT_MODEL_URL (an
// OpenAI-compatible base URL, …/v1) and prints the answer.
// AGENT_VERSION=2 is a regression: even sums come out one too high.
//
// Install its packages once: NODE_PATH=$(scripts/examples/nodeagent/install.sh)
'use strict';

// docs:begin node-setup
const { NodeSDK } = require('@opentelemetry/sdk-node');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http');
const { context, propagation, trace } = require('@opentelemetry/api');

// The exporter reads OTEL_EXPORTER_OTLP_ENDPOINT; the resource reads
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
const sdk = new NodeSDK({ traceExporter: new OTLPTraceExporter() });
sdk.start();
const tracer = trace.getTracer('nodeagent');
// Join the trial's trace: the SDK does not read TRACEPARENT by itself.
const ctx = propagation.extract(context.active(), { traceparent: process.env.TRACEPARENT });
// docs:end node-setup

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8').trim();
}

// chat is one chat-completions call, traced with the GenAI conventions.
async function chat(task) {
  return tracer.startActiveSpan('chat fake-calc', {
    kind: 2, // CLIENT
    attributes: { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'fake-calc', 'gen_ai.provider.name': 'openai' },
  }, async (span) => {
    try {
      const resp = await fetch(process.env.AGENT_MODEL_URL + '/chat/completions', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: 'fake-calc', messages: [{ role: 'user', content: task }] }),
      });
      if (!resp.ok) throw new Error(`model: HTTP ${resp.status}`);
      const out = await resp.json();
      span.setAttributes({
        'gen_ai.response.model': out.model,
        'gen_ai.usage.input_tokens': out.usage.prompt_tokens,
        'gen_ai.usage.output_tokens': out.usage.completion_tokens,
      });
      return out.choices[0].message.content;
    } finally {
      span.end();
    }
  });
}

async function main() {
  const task = await readStdin();
  const answer = await tracer.startActiveSpan('invoke_agent nodeagent', {
    attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'nodeagent' },
  }, ctx, async (span) => {
    try {
      let a = await chat(task);
      if (process.env.AGENT_VERSION === '2' && Number(a) % 2 === 0) a = String(Number(a) + 1); // the regression
      return a;
    } finally {
      span.end();
    }
  });
  console.log(answer);
}

main()
  .catch((err) => { console.error('nodeagent:', err.message); process.exitCode = 1; })
  .finally(() => sdk.shutdown()); // flushes the spans before the process exits
