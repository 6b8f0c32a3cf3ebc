// Package mcp connects Loomwork to the Model Context Protocol with the
// official Go SDK (github.com/modelcontextprotocol/go-sdk), both ways.
//
// Client: a run's tools can come from MCP servers over stdio (a command)
// or Streamable HTTP (a URL, optionally with a bearer token). Start
// connects, honours capability negotiation (a server that does not declare
// tools is never sent tools/list: ErrNoTools) and pins the tool list by
// hash (HashTools over names, descriptions and input schemas); Tools turns
// the list into runtime tools whose declarations are the server's JSON
// Schemas. Every call re-lists the tools first: a list that no longer
// hashes to the pin is a rug pull, refused (RugPullError) until Approve
// re-pins it. A tools/call result with isError set — a failing tool, or
// arguments that did not validate (SEP-1303) — is an error observation the
// model reads; a JSON-RPC protocol error (-32601, -32602 for an unknown
// tool) is the caller's bug and fails the step with its code
// (runtime.StepFailure). Attributes journals the pins in run_started;
// RecordedTools rebuilds a run's tools from its journal, so a run resumes
// and replays with no server. Each request is a CLIENT span named per the
// OpenTelemetry MCP conventions ("tools/call search_docs": mcp.method.name,
// mcp.session.id, jsonrpc.request.id, gen_ai.tool.name, error.type, keys
// in package semconv), a child of the runtime's execute_tool span.
//
// Server: NewServer serves runtime tools (the research agent's search and
// read with their exclusion rules, sandboxed Python, read-only trace
// queries — see Python and TraceTools) over stdio or Streamable HTTP with
// bearer authentication. Arguments are validated against the tool's
// schema and a failure is an isError result (SEP-1303); an unknown tool is
// the SDK's -32602.
//
// docs/protocols.md lists the commands, the conventions and what is not
// implemented.
package mcp
