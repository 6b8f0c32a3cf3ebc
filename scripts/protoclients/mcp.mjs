// scripts/protoclients/mcp.mjs — an independent MCP client (the official
// TypeScript SDK) against `loom-eval mcp serve`, for the wire test in
// cmd/loom-eval/protocols_test.go. It prints one JSON object with what the
// server answered; the Go test asserts on it.
//
//   node mcp.mjs --stdio '["/path/loom-eval","mcp","serve",...]'
//   node mcp.mjs --url http://127.0.0.1:PORT/mcp --token TOKEN
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, v, i, a) => (i % 2 === 0 ? [...acc, [v.replace(/^--/, ""), a[i + 1]]] : acc), []),
);

function transport() {
  if (args.stdio) {
    const argv = JSON.parse(args.stdio);
    return new StdioClientTransport({ command: argv[0], args: argv.slice(1), env: process.env, stderr: "inherit" });
  }
  const headers = args.token ? { Authorization: `Bearer ${args.token}` } : {};
  return new StreamableHTTPClientTransport(new URL(args.url), { requestInit: { headers } });
}

const out = {};
const client = new Client({ name: "protoclients-mcp", version: "1.0.0" });
await client.connect(transport());
out.server = client.getServerVersion();
out.capabilities = client.getServerCapabilities();
const { tools } = await client.listTools();
out.tools = tools.map((t) => t.name).sort();
out.searchSchemaRequired = tools.find((t) => t.name === "search_docs")?.inputSchema?.required ?? null;

const search = await client.callTool({ name: "search_docs", arguments: { query: "change the primary color" } });
out.search = { isError: !!search.isError, text: search.content?.[0]?.text ?? "", meta: search._meta ?? null };

// SEP-1303: bad arguments come back as a tool execution error.
const bad = await client.callTool({ name: "search_docs", arguments: { query: 42 } });
out.badArgs = { isError: !!bad.isError, text: bad.content?.[0]?.text ?? "" };

// An unknown tool is a JSON-RPC error (-32602).
try {
  const r = await client.callTool({ name: "no_such_tool", arguments: {} });
  out.unknownTool = { isError: !!r.isError, text: r.content?.[0]?.text ?? "" };
} catch (e) {
  out.unknownTool = { code: e.code ?? null, message: String(e.message ?? e) };
}

if (args.python === "1") {
  const py = await client.callTool({ name: "run_python_code", arguments: { code: "print(6*7)" } });
  out.python = { isError: !!py.isError, text: py.content?.[0]?.text ?? "" };
}
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
