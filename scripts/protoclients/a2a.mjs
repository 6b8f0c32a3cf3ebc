// scripts/protoclients/a2a.mjs — an independent A2A client (the A2A JS SDK,
// @a2a-js/sdk, through its v0.3 compatibility layer, which speaks the
// protocol 0.3 JSON-RPC wire) against `loom-eval a2a serve`, for the wire
// test in cmd/loom-eval/protocols_test.go. It reads the Agent Card, sends
// one message (message/send), reads the task back (tasks/get), tries to
// cancel the finished task (tasks/cancel) and prints one JSON object.
//
//   node a2a.mjs --url http://127.0.0.1:PORT --text "question"
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import { randomUUID } from "node:crypto";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, v, i, a) => (i % 2 === 0 ? [...acc, [v.replace(/^--/, ""), a[i + 1]]] : acc), []),
);
const STATES = ["unspecified", "submitted", "working", "completed", "failed", "canceled", "input-required", "rejected", "auth-required"];
const state = (s) => STATES[s] ?? String(s);
const text = (parts) => (parts ?? []).filter((p) => p.content?.$case === "text").map((p) => p.content.value).join("\n");

const out = {};
const card = await (await fetch(new URL("/.well-known/agent-card.json", args.url))).json();
out.card = { name: card.name, url: card.url, protocolVersion: card.protocolVersion, preferredTransport: card.preferredTransport, skills: (card.skills ?? []).map((s) => s.id) };

const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ legacyCompat: { enabled: true } })],
    cardResolver: new DefaultAgentCardResolver({ legacyCompat: { enabled: true } }),
  }),
);
const client = await factory.createFromUrl(args.url);
const res = await client.sendMessage({
  message: { messageId: randomUUID(), role: 1, parts: [{ content: { $case: "text", value: args.text } }], contextId: "", taskId: "", metadata: undefined, extensions: [], referenceTaskIds: [] },
  configuration: { blocking: true, acceptedOutputModes: ["text/plain"], historyLength: undefined, taskPushNotificationConfig: undefined },
  metadata: undefined,
  tenant: "",
});
const task = res.payload?.$case === "task" ? res.payload.value : res.id ? res : null;
if (!task) {
  out.sent = { kind: "message", raw: res };
} else {
  out.sent = { kind: "task", id: task.id, state: state(task.status?.state), artifacts: (task.artifacts ?? []).map((a) => ({ name: a.name, text: text(a.parts), runId: a.metadata?.run_id ?? null })) };
  const got = await client.getTask({ id: task.id, tenant: "", historyLength: undefined });
  out.got = { id: got.id, state: state(got.status?.state), artifacts: (got.artifacts ?? []).length };
  try {
    const c = await client.cancelTask({ id: task.id, tenant: "", metadata: undefined });
    out.cancel = { state: state(c.status?.state) };
  } catch (e) {
    out.cancel = { error: String(e.message ?? e), code: e.code ?? null };
  }
}
try {
  await client.getTask({ id: "no-such-task", tenant: "", historyLength: undefined });
  out.missing = { error: null };
} catch (e) {
  out.missing = { error: String(e.message ?? e) };
}
process.stdout.write(JSON.stringify(out) + "\n");
