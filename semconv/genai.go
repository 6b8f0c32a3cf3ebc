package semconv

// GenAI semantic-convention attribute keys (current names).
const (
	// AttrOperationName is the operation a span performs; its values are the
	// Op* constants.
	AttrOperationName = "gen_ai.operation.name"
	// AttrProviderName is the model provider ("openai", "anthropic", ...).
	AttrProviderName = "gen_ai.provider.name"

	// AttrRequestModel is the model a request asked for.
	AttrRequestModel = "gen_ai.request.model"
	// AttrRequestMaxTokens is the request's output token limit.
	AttrRequestMaxTokens = "gen_ai.request.max_tokens"
	// AttrRequestTemperature is the request's sampling temperature.
	AttrRequestTemperature = "gen_ai.request.temperature"
	// AttrRequestTopK is the number of results a request asked for (a
	// retrieval's k, a sampler's top-k).
	AttrRequestTopK = "gen_ai.request.top_k"
	// AttrRequestStream says whether the request streamed its answer.
	AttrRequestStream = "gen_ai.request.stream"

	// AttrResponseModel is the model that answered.
	AttrResponseModel = "gen_ai.response.model"
	// AttrResponseID is the provider's id of the answer.
	AttrResponseID = "gen_ai.response.id"
	// AttrResponseFinishReasons lists why the model stopped (a string array).
	AttrResponseFinishReasons = "gen_ai.response.finish_reasons"

	// AttrUsageInputTokens counts the input tokens, cached input included.
	AttrUsageInputTokens = "gen_ai.usage.input_tokens"
	// AttrUsageOutputTokens counts the output tokens, reasoning included.
	AttrUsageOutputTokens = "gen_ai.usage.output_tokens"
	// AttrUsageCacheReadInputTokens counts the input tokens read from the
	// provider's prompt cache.
	AttrUsageCacheReadInputTokens = "gen_ai.usage.cache_read.input_tokens"
	// AttrUsageCacheCreationInputTokens counts the input tokens written to
	// the provider's prompt cache.
	AttrUsageCacheCreationInputTokens = "gen_ai.usage.cache_creation.input_tokens"
	// AttrUsageReasoningOutputTokens counts the output tokens spent on
	// reasoning.
	AttrUsageReasoningOutputTokens = "gen_ai.usage.reasoning.output_tokens"

	// AttrAgentName is the agent's name.
	AttrAgentName = "gen_ai.agent.name"
	// AttrAgentID is the agent's id.
	AttrAgentID = "gen_ai.agent.id"
	// AttrAgentDescription describes the agent.
	AttrAgentDescription = "gen_ai.agent.description"
	// AttrConversationID ties the spans of one conversation (for Loomwork's
	// runtime: one run) together.
	AttrConversationID = "gen_ai.conversation.id"

	// AttrToolName is the name of the tool an execute_tool span runs.
	AttrToolName = "gen_ai.tool.name"
	// AttrToolType is the tool's type; Loomwork's tools are ToolTypeFunction.
	AttrToolType = "gen_ai.tool.type"
	// AttrToolCallID is the model's id of the tool call.
	AttrToolCallID = "gen_ai.tool.call.id"
	// AttrToolDescription describes the tool.
	AttrToolDescription = "gen_ai.tool.description"
	// AttrToolCallArguments is the call's arguments (JSON text).
	AttrToolCallArguments = "gen_ai.tool.call.arguments"
	// AttrToolCallResult is the call's result (JSON text).
	AttrToolCallResult = "gen_ai.tool.call.result"

	// AttrDataSourceID names the data source a retrieval searched.
	AttrDataSourceID = "gen_ai.data_source.id"
	// AttrRetrievalQueryText is a retrieval's query.
	AttrRetrievalQueryText = "gen_ai.retrieval.query.text"
	// AttrRetrievalDocuments lists the ids of the documents a retrieval
	// returned (what was retrieved; AttrCitations is what was cited).
	AttrRetrievalDocuments = "gen_ai.retrieval.documents"

	// AttrInputMessages is the captured input messages (JSON text).
	AttrInputMessages = "gen_ai.input.messages"
	// AttrOutputMessages is the captured output messages (JSON text).
	AttrOutputMessages = "gen_ai.output.messages"
	// AttrSystemInstructions is the captured system instructions (JSON text).
	AttrSystemInstructions = "gen_ai.system_instructions"

	// AttrEvaluationName names the evaluation an EventEvaluationResult
	// reports.
	AttrEvaluationName = "gen_ai.evaluation.name"
	// AttrEvaluationScoreValue is the evaluation's score.
	AttrEvaluationScoreValue = "gen_ai.evaluation.score.value"
	// AttrEvaluationScoreLabel is the evaluation's verdict as a label.
	AttrEvaluationScoreLabel = "gen_ai.evaluation.score.label"
)

// GenAI semantic-convention event names.
const (
	// EventInferenceOperationDetails carries a model call's captured content
	// (AttrInputMessages, AttrOutputMessages).
	EventInferenceOperationDetails = "gen_ai.client.inference.operation.details"
	// EventEvaluationResult reports one evaluation of a span's output.
	EventEvaluationResult = "gen_ai.evaluation.result"
)

// ToolTypeFunction is the AttrToolType of a function tool.
const ToolTypeFunction = "function"

// Deprecated and older gen_ai.* names the collector still reads, each after
// the current name of the same field. They are kept here because senders
// still use them; Loomwork never writes them.
const (
	// AttrSystem is the deprecated predecessor of AttrProviderName.
	AttrSystem = "gen_ai.system"
	// AttrUsagePromptTokens is the deprecated predecessor of
	// AttrUsageInputTokens.
	AttrUsagePromptTokens = "gen_ai.usage.prompt_tokens"
	// AttrUsageCompletionTokens is the deprecated predecessor of
	// AttrUsageOutputTokens.
	AttrUsageCompletionTokens = "gen_ai.usage.completion_tokens"
	// AttrUsageCacheReadInputTokensOld is OpenLLMetry's earlier name for
	// AttrUsageCacheReadInputTokens.
	AttrUsageCacheReadInputTokensOld = "gen_ai.usage.cache_read_input_tokens"
	// AttrUsageCacheCreationInputTokensOld is OpenLLMetry's earlier name for
	// AttrUsageCacheCreationInputTokens.
	AttrUsageCacheCreationInputTokensOld = "gen_ai.usage.cache_creation_input_tokens"
	// AttrUsageReasoningTokensOld is OpenLLMetry's earlier name for
	// AttrUsageReasoningOutputTokens.
	AttrUsageReasoningTokensOld = "gen_ai.usage.reasoning_tokens"
	// AttrUsageCost is an explicit cost in USD some senders set; the
	// collector reads it after AttrCost.
	AttrUsageCost = "gen_ai.usage.cost"
	// AttrPromptPrefix + "<i>.<field>" is the deprecated indexed form of the
	// input messages (gen_ai.prompt.0.content, ...).
	AttrPromptPrefix = "gen_ai.prompt."
	// AttrCompletionPrefix + "<i>.<field>" is the deprecated indexed form of
	// the output messages (gen_ai.completion.0.content, ...).
	AttrCompletionPrefix = "gen_ai.completion."
)

// General OpenTelemetry keys a GenAI span carries.
const (
	// AttrErrorType is the low-cardinality class of a failed operation.
	AttrErrorType = "error.type"
	// AttrServerAddress is the host a client span called.
	AttrServerAddress = "server.address"
	// AttrServerPort is the port a client span called.
	AttrServerPort = "server.port"
	// AttrHTTPResponseStatusCode is the HTTP status of a failed call.
	AttrHTTPResponseStatusCode = "http.response.status_code"
)

// ErrorTypeOther is the AttrErrorType of an error with no better class.
const ErrorTypeOther = "_OTHER"

// gen_ai.operation.name values (AttrOperationName).
const (
	// OpChat is a chat model call.
	OpChat = "chat"
	// OpTextCompletion is a (legacy) text completion model call.
	OpTextCompletion = "text_completion"
	// OpGenerateContent is a multimodal generation model call.
	OpGenerateContent = "generate_content"
	// OpEmbeddings is an embeddings model call.
	OpEmbeddings = "embeddings"
	// OpExecuteTool is the gen_ai.operation.name of a tool call; summaries
	// count these spans as ToolCalls.
	OpExecuteTool = "execute_tool"
	// OpInvokeAgent is an agent's run.
	OpInvokeAgent = "invoke_agent"
	// OpInvokeWorkflow is a workflow's run (OpenInference CHAIN, OpenLLMetry
	// workflow).
	OpInvokeWorkflow = "invoke_workflow"
	// OpRetrieval is a search of a data source.
	OpRetrieval = "retrieval"
	// OpRerank is a reranking call. It is not a GenAI convention value: the
	// collector maps OpenInference's RERANKER kind and OpenLLMetry's rerank
	// request type to it.
	OpRerank = "rerank"
)

// IsModelCallOperation reports whether a gen_ai.operation.name denotes a call
// to a model provider (the spans whose usage is billed).
func IsModelCallOperation(op string) bool {
	switch op {
	case OpChat, OpTextCompletion, OpGenerateContent, OpEmbeddings:
		return true
	}
	return false
}
