package semconv

// Model Context Protocol semantic conventions (OpenTelemetry GenAI
// conventions, docs/gen-ai/mcp.md, status Development): one span per
// JSON-RPC request, named "{mcp.method.name} {target}" (the target is the
// tool name for tools/call), kind CLIENT on the caller and SERVER on the
// callee. A tools/call span also carries gen_ai.operation.name=execute_tool
// and gen_ai.tool.name (AttrToolName).
const (
	// AttrMCPMethodName is the JSON-RPC method ("tools/call", "tools/list",
	// "initialize").
	AttrMCPMethodName = "mcp.method.name"
	// AttrMCPSessionID is the session id (the Mcp-Session-Id header of
	// Streamable HTTP; stdio sessions have none).
	AttrMCPSessionID = "mcp.session.id"
	// AttrMCPProtocolVersion is the protocol revision the session
	// negotiated ("2025-11-25").
	AttrMCPProtocolVersion = "mcp.protocol.version"
	// AttrJSONRPCRequestID is the JSON-RPC id of the request (string form).
	AttrJSONRPCRequestID = "jsonrpc.request.id"
	// AttrRPCResponseStatusCode is the JSON-RPC error code of a failed
	// request (string form, e.g. "-32602").
	AttrRPCResponseStatusCode = "rpc.response.status_code"
	// AttrNetworkTransport is "pipe" for stdio and "tcp" for Streamable
	// HTTP.
	AttrNetworkTransport = "network.transport"

	// MCPErrorTypeTool is the error.type of a tools/call whose result has
	// isError set (a tool execution error, which the model reads); a
	// JSON-RPC error's error.type is its code.
	MCPErrorTypeTool = "tool_error"
	// NetworkTransportPipe and NetworkTransportTCP are the
	// AttrNetworkTransport values of stdio and Streamable HTTP.
	NetworkTransportPipe = "pipe"
	NetworkTransportTCP  = "tcp"
)

// Loomwork's MCP attributes: what the conventions do not cover.
const (
	// AttrMCPServerName names the configured MCP server a span talks to.
	AttrMCPServerName = "loomwork.mcp.server"
	// AttrMCPToolsHash is the sha256 of the server's pinned tool list
	// (names, descriptions, input schemas).
	AttrMCPToolsHash = "loomwork.mcp.tools_hash"
	// MCPMetaDocuments is the key in a tools/call result's _meta under
	// which Loomwork's MCP server lists the evidence ids a tool returned
	// (the runtime's retrieval span reads them on the client side).
	MCPMetaDocuments = "io.loomwork/documents"
	// MCPTaintOrigin prefixes the taint origin of an MCP tool's output
	// ("mcp:SERVER/TOOL").
	MCPTaintOrigin = "mcp:"
)

// A2A (Agent2Agent) attributes of a span that calls a remote agent or
// serves a task.
const (
	// AttrA2ATaskID is the remote (or served) A2A task id.
	AttrA2ATaskID = "loomwork.a2a.task.id"
	// AttrA2ATaskState is the task's last state (submitted, working,
	// completed, failed, canceled).
	AttrA2ATaskState = "loomwork.a2a.task.state"
	// AttrA2AAgentURL is the remote agent's JSON-RPC endpoint.
	AttrA2AAgentURL = "loomwork.a2a.agent.url"
)
