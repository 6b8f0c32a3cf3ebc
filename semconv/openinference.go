package semconv

// AttrCost is a call's cost in USD. It is OpenInference's key, which the
// collector reads as an explicit cost (store.Span.CostUSD); Loomwork writes
// it too: the gateway on each attempt (as priced by the gateway) and the
// context layer on a summary call when its Pricer knows the model.
const AttrCost = "llm.cost.total"

// OpenInference names (Arize-ai/openinference, spec/semantic_conventions.md)
// the collector's mapping reads, each after the GenAI name of the same field.
// Loomwork never writes them (except AttrCost).
const (
	// OpenInferenceSpanKind is the span's kind (LLM, EMBEDDING, TOOL,
	// RETRIEVER, RERANKER, AGENT, CHAIN, ...), read as an operation.
	OpenInferenceSpanKind = "openinference.span.kind"
	// OpenInferenceSystem is the provider.
	OpenInferenceSystem = "llm.system"
	// OpenInferenceProvider is the provider (hosting service).
	OpenInferenceProvider = "llm.provider"
	// OpenInferenceModelName is the model (request and response alike).
	OpenInferenceModelName = "llm.model_name"
	// OpenInferenceRequestModelName is the model requested.
	OpenInferenceRequestModelName = "llm.request.model_name"
	// OpenInferenceResponseModelName is the model that answered.
	OpenInferenceResponseModelName = "llm.response.model_name"
	// OpenInferenceEmbeddingModelName is an embedding call's model.
	OpenInferenceEmbeddingModelName = "embedding.model_name"
	// OpenInferenceAgentName is the agent's name.
	OpenInferenceAgentName = "agent.name"
	// OpenInferenceSessionID is the conversation (session) id.
	OpenInferenceSessionID = "session.id"
	// OpenInferenceToolName is the tool's name.
	OpenInferenceToolName = "tool.name"
	// OpenInferenceToolCallID is the tool call's id.
	OpenInferenceToolCallID = "tool_call.id"
	// OpenInferenceToolID is the tool call's id (older spelling).
	OpenInferenceToolID = "tool.id"

	// OpenInferenceTokenCountPrompt counts the input tokens.
	OpenInferenceTokenCountPrompt = "llm.token_count.prompt"
	// OpenInferenceTokenCountCompletion counts the output tokens.
	OpenInferenceTokenCountCompletion = "llm.token_count.completion"
	// OpenInferenceTokenCountCacheRead counts the input tokens read from
	// the cache.
	OpenInferenceTokenCountCacheRead = "llm.token_count.prompt_details.cache_read"
	// OpenInferenceTokenCountCacheWrite counts the input tokens written to
	// the cache.
	OpenInferenceTokenCountCacheWrite = "llm.token_count.prompt_details.cache_write"
	// OpenInferenceTokenCountReasoning counts the reasoning output tokens.
	OpenInferenceTokenCountReasoning = "llm.token_count.completion_details.reasoning"

	// OpenInferenceRetrievalDocumentsPrefix + "<i>" +
	// OpenInferenceDocumentIDSuffix is the id of the i-th retrieved document
	// (OpenInference flattens the list).
	OpenInferenceRetrievalDocumentsPrefix = "retrieval.documents."
	// OpenInferenceDocumentIDSuffix: see OpenInferenceRetrievalDocumentsPrefix.
	OpenInferenceDocumentIDSuffix = ".document.id"
)

// OpenLLMetry names (traceloop/openllmetry,
// opentelemetry-semantic-conventions-ai) the collector's mapping reads, each
// after the GenAI and OpenInference names of the same field. Its earlier
// releases' gen_ai.* names are the Attr*Old constants.
const (
	// OpenLLMetrySpanKind is the span's kind (workflow, task, agent, tool),
	// read as an operation.
	OpenLLMetrySpanKind = "traceloop.span.kind"
	// OpenLLMetryEntityName names the workflow, agent or tool of the span;
	// it is read as the agent or tool name according to OpenLLMetrySpanKind.
	OpenLLMetryEntityName = "traceloop.entity.name"
	// OpenLLMetryRequestType is the call's type (chat, completion,
	// embedding, rerank), read as an operation.
	OpenLLMetryRequestType = "llm.request.type"

	// OpenLLMetryUsageInputTokens counts the input tokens.
	OpenLLMetryUsageInputTokens = "llm.usage.input_tokens"
	// OpenLLMetryUsagePromptTokens counts the input tokens (older name).
	OpenLLMetryUsagePromptTokens = "llm.usage.prompt_tokens"
	// OpenLLMetryUsageOutputTokens counts the output tokens.
	OpenLLMetryUsageOutputTokens = "llm.usage.output_tokens"
	// OpenLLMetryUsageCompletionTokens counts the output tokens (older name).
	OpenLLMetryUsageCompletionTokens = "llm.usage.completion_tokens"
	// OpenLLMetryUsageCacheReadInputTokens counts the input tokens read from
	// the cache.
	OpenLLMetryUsageCacheReadInputTokens = "llm.usage.cache_read_input_tokens"
	// OpenLLMetryUsageCacheCreationInputTokens counts the input tokens
	// written to the cache.
	OpenLLMetryUsageCacheCreationInputTokens = "llm.usage.cache_creation_input_tokens"
	// OpenLLMetryUsageReasoningTokens counts the reasoning output tokens.
	OpenLLMetryUsageReasoningTokens = "llm.usage.reasoning_tokens"
)

// OpenInference content names: a span's input and output as one value, and
// the messages of an LLM span flattened into indexed keys
// (llm.input_messages.<i>.message.role, ...; the tool calls of message i
// under llm.input_messages.<i>.message.tool_calls.<j>.tool_call.*).
const (
	// OpenInferenceInputValue is the span's input as one value (text or
	// JSON, see OpenInferenceInputMimeType).
	OpenInferenceInputValue = "input.value"
	// OpenInferenceOutputValue is the span's output as one value.
	OpenInferenceOutputValue = "output.value"
	// OpenInferenceInputMessagesPrefix + "<i>." + a message field is one
	// input message's field.
	OpenInferenceInputMessagesPrefix = "llm.input_messages."
	// OpenInferenceOutputMessagesPrefix + "<i>." + a message field is one
	// output message's field.
	OpenInferenceOutputMessagesPrefix = "llm.output_messages."
	// OpenInferenceMessageRole is a message's role.
	OpenInferenceMessageRole = "message.role"
	// OpenInferenceMessageContent is a message's text.
	OpenInferenceMessageContent = "message.content"
	// OpenInferenceMessageName names a message's author (a tool's name).
	OpenInferenceMessageName = "message.name"
	// OpenInferenceMessageToolCallID is the id of the call a tool message
	// answers.
	OpenInferenceMessageToolCallID = "message.tool_call_id"
	// OpenInferenceMessageContentsPrefix + "<j>." + a content field is one
	// part of a multi-part message.
	OpenInferenceMessageContentsPrefix = "message.contents."
	// OpenInferenceMessageContentType is a part's type ("text", "image").
	OpenInferenceMessageContentType = "message_content.type"
	// OpenInferenceMessageContentText is a text part's text.
	OpenInferenceMessageContentText = "message_content.text"
	// OpenInferenceMessageContentImageURL is an image part's URL.
	OpenInferenceMessageContentImageURL = "message_content.image.image.url"
	// OpenInferenceMessageToolCallsPrefix + "<j>." + a tool-call field is
	// one tool call an assistant message makes.
	OpenInferenceMessageToolCallsPrefix = "message.tool_calls."
	// OpenInferenceToolCallFunctionName is a tool call's function.
	OpenInferenceToolCallFunctionName = "tool_call.function.name"
	// OpenInferenceToolCallFunctionArguments is a tool call's arguments
	// (JSON text).
	OpenInferenceToolCallFunctionArguments = "tool_call.function.arguments"
	// OpenInferenceMessageFunctionCallName is a legacy function call's name.
	OpenInferenceMessageFunctionCallName = "message.function_call_name"
	// OpenInferenceMessageFunctionCallArguments is a legacy function call's
	// arguments (JSON text).
	OpenInferenceMessageFunctionCallArguments = "message.function_call_arguments_json"
)

// OpenLLMetry content fields: the messages of a call flattened under
// AttrPromptPrefix + "<i>." and AttrCompletionPrefix + "<i>." (e.g.
// gen_ai.prompt.0.role, gen_ai.completion.0.tool_calls.0.name).
const (
	// OpenLLMetryRole is a message's role.
	OpenLLMetryRole = "role"
	// OpenLLMetryContent is a message's content: text, or for a multi-part
	// message a JSON list of parts.
	OpenLLMetryContent = "content"
	// OpenLLMetryToolCallID is the id of the call a tool message answers.
	OpenLLMetryToolCallID = "tool_call_id"
	// OpenLLMetryFinishReason is why a completion stopped.
	OpenLLMetryFinishReason = "finish_reason"
	// OpenLLMetryToolCallsPrefix + "<j>." + OpenLLMetryToolCallName (or
	// ...ID, ...Arguments) is one tool call a message makes.
	OpenLLMetryToolCallsPrefix = "tool_calls."
	// OpenLLMetryFunctionCallPrefix + OpenLLMetryToolCallName (or
	// ...Arguments) is a legacy function call.
	OpenLLMetryFunctionCallPrefix = "function_call."
	// OpenLLMetryToolCallIDField is a tool call's id.
	OpenLLMetryToolCallIDField = "id"
	// OpenLLMetryToolCallName is a tool call's function name.
	OpenLLMetryToolCallName = "name"
	// OpenLLMetryToolCallArguments is a tool call's arguments (JSON text).
	OpenLLMetryToolCallArguments = "arguments"
)
