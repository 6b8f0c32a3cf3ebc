package genai

import (
	"strings"

	"github.com/loomwork/loomwork/semconv"
)

// refNormalizeOperation maps gen_ai.operation.name values, including common
// misspellings and older spellings, to the convention's names; unknown
// values are kept (lower-cased).
func refNormalizeOperation(op string) string {
	op = strings.ToLower(strings.TrimSpace(op))
	switch op {
	case semconv.OpChat, "chat_completion", "chat_completions", "chat.completions", "chat.completion":
		return semconv.OpChat
	case semconv.OpTextCompletion, "completion", "completions":
		return semconv.OpTextCompletion
	case semconv.OpEmbeddings, "embedding", "embed":
		return semconv.OpEmbeddings
	case semconv.OpExecuteTool, "tool", "tool_call":
		return semconv.OpExecuteTool
	case semconv.OpInvokeAgent, "agent":
		return semconv.OpInvokeAgent
	case semconv.OpInvokeWorkflow, "workflow":
		return semconv.OpInvokeWorkflow
	case semconv.OpRetrieval, "retrieve", "retriever":
		return semconv.OpRetrieval
	}
	return op
}

// refOpenInferenceOperation maps openinference.span.kind to an operation. Kinds
// with no GenAI counterpart (GUARDRAIL, EVALUATOR, PROMPT, UNKNOWN) map to
// none; the attribute itself is kept.
func refOpenInferenceOperation(kind string) string {
	switch strings.ToUpper(strings.TrimSpace(kind)) {
	case "LLM":
		return semconv.OpChat
	case "EMBEDDING":
		return semconv.OpEmbeddings
	case "TOOL":
		return semconv.OpExecuteTool
	case "RETRIEVER":
		return semconv.OpRetrieval
	case "RERANKER":
		return semconv.OpRerank
	case "AGENT":
		return semconv.OpInvokeAgent
	case "CHAIN":
		return semconv.OpInvokeWorkflow
	}
	return ""
}

// refTraceloopOperation maps OpenLLMetry's traceloop.span.kind (already
// lower-cased) to an operation; "task" and "unknown" have none.
func refTraceloopOperation(kind string) string {
	switch kind {
	case "workflow":
		return semconv.OpInvokeWorkflow
	case "agent":
		return semconv.OpInvokeAgent
	case "tool":
		return semconv.OpExecuteTool
	}
	return ""
}

// refRequestTypeOperation maps OpenLLMetry's llm.request.type to an operation.
func refRequestTypeOperation(t string) string {
	switch strings.ToLower(strings.TrimSpace(t)) {
	case "chat":
		return semconv.OpChat
	case "completion":
		return semconv.OpTextCompletion
	case "embedding":
		return semconv.OpEmbeddings
	case "rerank":
		return semconv.OpRerank
	}
	return ""
}
