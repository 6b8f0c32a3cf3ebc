package genai

import "strings"

// normalizeOperation maps gen_ai.operation.name values, including common
// misspellings and older spellings, to the convention's names; unknown
// values are kept (lower-cased).
func normalizeOperation(op string) string {
	op = strings.ToLower(strings.TrimSpace(op))
	switch op {
	case "chat", "chat_completion", "chat_completions", "chat.completions", "chat.completion":
		return "chat"
	case "text_completion", "completion", "completions":
		return "text_completion"
	case "embeddings", "embedding", "embed":
		return "embeddings"
	case "execute_tool", "tool", "tool_call":
		return "execute_tool"
	case "invoke_agent", "agent":
		return "invoke_agent"
	case "invoke_workflow", "workflow":
		return "invoke_workflow"
	case "retrieval", "retrieve", "retriever":
		return "retrieval"
	}
	return op
}

// openInferenceOperation maps openinference.span.kind to an operation. Kinds
// with no GenAI counterpart (GUARDRAIL, EVALUATOR, PROMPT, UNKNOWN) map to
// none; the attribute itself is kept.
func openInferenceOperation(kind string) string {
	switch strings.ToUpper(strings.TrimSpace(kind)) {
	case "LLM":
		return "chat"
	case "EMBEDDING":
		return "embeddings"
	case "TOOL":
		return "execute_tool"
	case "RETRIEVER":
		return "retrieval"
	case "RERANKER":
		return "rerank"
	case "AGENT":
		return "invoke_agent"
	case "CHAIN":
		return "invoke_workflow"
	}
	return ""
}

// traceloopOperation maps OpenLLMetry's traceloop.span.kind (already
// lower-cased) to an operation; "task" and "unknown" have none.
func traceloopOperation(kind string) string {
	switch kind {
	case "workflow":
		return "invoke_workflow"
	case "agent":
		return "invoke_agent"
	case "tool":
		return "execute_tool"
	}
	return ""
}

// requestTypeOperation maps OpenLLMetry's llm.request.type to an operation.
func requestTypeOperation(t string) string {
	switch strings.ToLower(strings.TrimSpace(t)) {
	case "chat":
		return "chat"
	case "completion":
		return "text_completion"
	case "embedding":
		return "embeddings"
	case "rerank":
		return "rerank"
	}
	return ""
}
