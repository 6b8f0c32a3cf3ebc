package semconv

// Prefix is the namespace of Loomwork's own keys. The runtime reserves it in
// task attributes: a task may not set a key that starts with it.
const Prefix = "loomwork."

// Loomwork-defined attribute keys on any span.
const (
	// AttrCitations lists the evidence ids an agent cited in its answer
	// (a string array), set on the agent span. It is the citation
	// counterpart of the GenAI convention's gen_ai.retrieval.documents,
	// which lists what was retrieved; scoring reports the two separately.
	AttrCitations = "loomwork.citations"
	// AttrModelLabel marks spans produced by a non-live model, e.g.
	// "scripted" on spans of a scripted model (the gateway writes "live" for
	// a live one), so a scripted run is never mistaken for a live one.
	AttrModelLabel = "loomwork.model.label"
	// AttrTaskSuccess is the span attribute (a bool) an agent sets on its root
	// span to say whether it accomplished the task. Without it, success is read
	// from the root span's status (error → failed, ok or unset → succeeded).
	AttrTaskSuccess = "loomwork.task.success"
	// AttrTruncatedPrefix + key records the original size in bytes of an
	// attribute value the collector truncated.
	AttrTruncatedPrefix = "loomwork.truncated."
	// AttrTruncated marks a truncated map value: the collector adds it, with
	// the truncation marker text, to a map attribute it cut.
	AttrTruncated = "loomwork.truncated"
)

// Runtime keys (package agents/runtime).
const (
	// AttrJournalReused is true on chat and execute_tool spans whose answer
	// or result was taken from the journal rather than produced again.
	AttrJournalReused = "loomwork.journal.reused"
	// AttrStepLimitReached is true on the invoke_agent span of a run that
	// reached its step limit.
	AttrStepLimitReached = "loomwork.step_limit_reached"
	// AttrRunContextSpec is not a span attribute: it is the key of the run's
	// ContextSpec in the run_started journal event's attributes object (so
	// a resumed or replayed run compacts as the recorded one did).
	AttrRunContextSpec = "loomwork.context"
	// AttrRunInputOrigin is not a span attribute either: the key of
	// run_started's attributes holding the task's untrusted origin
	// (runtime.Task.InputOrigin, e.g. "a2a:PEER"), so a replay re-decides
	// with the same taint.
	AttrRunInputOrigin = "loomwork.input_origin"
)

// Context-layer attribute keys on chat spans: what the layer did to the
// request before it was sent.
const (
	AttrContextStrategy     = "loomwork.context.strategy"
	AttrContextTokenizer    = "loomwork.context.tokenizer"
	AttrContextBudget       = "loomwork.context.budget"
	AttrContextTokensBefore = "loomwork.context.tokens_before"
	AttrContextTokensAfter  = "loomwork.context.tokens_after"
	AttrContextShrunk       = "loomwork.context.shrunk"
	AttrContextShrunkCalls  = "loomwork.context.shrunk.tool_call_ids"
	AttrContextShrunkSaved  = "loomwork.context.shrunk.tokens_saved"
	AttrContextSummarised   = "loomwork.context.summarised"
	AttrContextSummaryCalls = "loomwork.context.summarised.tool_call_ids"
	AttrContextSummaryBy    = "loomwork.context.summary.by"
	AttrContextPinned       = "loomwork.context.pinned"
	AttrContextPinnedValues = "loomwork.context.pinned.values"
	AttrContextPinsSkipped  = "loomwork.context.pins_skipped"
	AttrContextDropped      = "loomwork.context.dropped"
	AttrContextOverBudget   = "loomwork.context.over_budget"
	AttrContextUsageDelta   = "loomwork.context.usage_minus_estimate"
)

// Tier-builder attribute keys on chat spans, set when the request was
// assembled by tiers (runtime ContextSpec.Tiers): the window and
// reservation, the accounting (used + dropped = offered), utilization
// against the full window, the item ids by decision, and the admitted item
// in the weakest slot of the U-shaped position curve.
const (
	AttrContextTiersWindow      = "loomwork.context.tiers.window"
	AttrContextTiersReserve     = "loomwork.context.tiers.reserve"
	AttrContextTiersOffered     = "loomwork.context.tiers.offered"
	AttrContextTiersUsed        = "loomwork.context.tiers.used"
	AttrContextTiersDropped     = "loomwork.context.tiers.dropped"
	AttrContextTiersUtilization = "loomwork.context.tiers.utilization"
	AttrContextTiersKept        = "loomwork.context.tiers.kept_ids"
	AttrContextTiersTruncated   = "loomwork.context.tiers.truncated_ids"
	AttrContextTiersDroppedIDs  = "loomwork.context.tiers.dropped_ids"
	AttrContextTiersWeakest     = "loomwork.context.tiers.weakest_id"
	AttrContextTiersMemory      = "loomwork.context.tiers.memory_ids"
)

// Attribute keys Loomwork sets on the chat span of a summary call (beside
// the GenAI ones), so a trace tells the context layer's own model calls from
// the agent's steps.
const (
	// AttrSummaryCall is true on the chat span of a context-layer summary.
	AttrSummaryCall = "loomwork.context.summary_call"
	// AttrSummaryStep is the step whose compaction asked for the summary.
	AttrSummaryStep = "loomwork.context.summary_call.step"
	// AttrSummaryMessages is the number of messages sent to be summarised.
	AttrSummaryMessages = "loomwork.context.summary_call.messages"
)

// Attribute keys the gateway (package agents/gateway) sets beyond the GenAI
// conventions.
const (
	// AttrGatewayAttempt is the 0-based attempt number on this model within
	// one call.
	AttrGatewayAttempt = "loomwork.gateway.attempt"
	// AttrGatewayFallback is true when the model was not the first choice.
	AttrGatewayFallback = "loomwork.gateway.fallback"
	// AttrGatewayModel is the chain entry name (Request.Model may differ
	// from it).
	AttrGatewayModel = "loomwork.gateway.model"

	// EventGatewayBudgetRefused notes on the caller's span a call the
	// gateway refused for its budget: no request was made, so there is no
	// chat span to carry it. Its attributes are AttrGatewayModel and the
	// three amounts below.
	EventGatewayBudgetRefused = "loomwork.gateway.budget_refused"
	// AttrGatewaySpentUSD is what the budget had spent before the call.
	AttrGatewaySpentUSD = "loomwork.gateway.spent_usd"
	// AttrGatewayEstimateUSD is the refused call's estimated cost.
	AttrGatewayEstimateUSD = "loomwork.gateway.estimate_usd"
	// AttrGatewayBudgetUSD is the budget.
	AttrGatewayBudgetUSD = "loomwork.gateway.budget_usd"
)

// Attribute keys of the retrieval service's "retrieval" spans (package
// retrieval) beside the GenAI ones.
const (
	// AttrRetrievalMode is the ranking method (bm25, dense, rrf, weighted,
	// rerank).
	AttrRetrievalMode = "loomwork.retrieval.mode"
	// AttrRetrievalK is the number of hits asked for.
	AttrRetrievalK = "loomwork.retrieval.k"
	// AttrRetrievalExcluded lists the document ids the query's exclusion
	// removed from consideration (set only when there are some).
	AttrRetrievalExcluded = "loomwork.retrieval.excluded"
	// AttrRetrievalScores is the score of each retrieved document, in the
	// order of gen_ai.retrieval.documents (set by collector/agenttrace's
	// example run).
	AttrRetrievalScores = "loomwork.retrieval.scores"
	// AttrRetrievalLatencyMS is the search's latency in milliseconds (set
	// by store/storetest's synthetic traces; the retrieval service does not
	// write it).
	AttrRetrievalLatencyMS = "loomwork.retrieval.latency_ms"
)

// The sandbox's egress records: one span event per connection attempt (or
// DNS question, or refused packet) on the execute_tool span of the tool
// that ran the sandbox (the coding agent's run_python), with the verdict
// of the run's egress policy. Values are strings; no credential value is
// ever one of them.
const (
	// EventSandboxEgress is the span event's name.
	EventSandboxEgress = "loomwork.sandbox.egress"
	// AttrEgressProto is tcp, udp, icmp, dns or http.
	AttrEgressProto = "loomwork.sandbox.egress.proto"
	// AttrEgressHost is the name asked for (SNI, Host header, DNS question).
	AttrEgressHost = "loomwork.sandbox.egress.host"
	// AttrEgressAddr is the destination as the sandbox addressed it.
	AttrEgressAddr = "loomwork.sandbox.egress.addr"
	// AttrEgressVia says how the destination was read (tls-sni, http-host,
	// address, dns, packet).
	AttrEgressVia = "loomwork.sandbox.egress.via"
	// AttrEgressVerdict is allow or deny.
	AttrEgressVerdict = "loomwork.sandbox.egress.verdict"
	// AttrEgressReason says why.
	AttrEgressReason = "loomwork.sandbox.egress.reason"
	// AttrEgressRule names the policy rule that decided.
	AttrEgressRule = "loomwork.sandbox.egress.rule"
	// AttrEgressCredential names the credential the proxy injected.
	AttrEgressCredential = "loomwork.sandbox.egress.credential"
	// AttrEgressSource is proxy (its own log) or kernel (a packet the
	// kernel routed to the refusal device).
	AttrEgressSource = "loomwork.sandbox.egress.source"
	// AttrEgressError is set when an allowed connection failed upstream.
	AttrEgressError = "loomwork.sandbox.egress.error"
)

// How a sandbox execution started: on the execute_tool span of the tool
// that ran the sandbox (the coding agent's run_python), and journaled with
// its result (journal.ToolResult.Attrs), so a run records whether each
// execution was claimed warm.
const (
	// AttrSandboxStart is SandboxStartWarm when the execution claimed a
	// sandbox the warm pool had started ahead of time (run --sandbox-pool
	// N), SandboxStartCold when it started one for itself (no pool, or the
	// pool was empty).
	AttrSandboxStart = "loomwork.sandbox.start"
	SandboxStartWarm = "warm"
	SandboxStartCold = "cold"
)

// Keys of store/storetest's synthetic traces (the conformance, load and
// benchmark data), shaped like an evaluation run in a sandbox. Nothing in
// Loomwork writes them on a real span or reads them. (The synthetic traces
// also set AttrCaseID and AttrTrial, below.)
const (
	// AttrSandboxID names the sandbox an execute_tool span ran in.
	AttrSandboxID = "loomwork.sandbox.id"
	// AttrSandboxExitCode is the exit code of the tool's process in the
	// sandbox (an int; non-zero on a failed call).
	AttrSandboxExitCode = "loomwork.sandbox.exit_code"
)

// Keys of collector/agenttrace's example run, on the link from a retried
// chat call to the failed attempt. Nothing in Loomwork reads them.
const (
	// AttrLinkKind says what a link means ("retry_of").
	AttrLinkKind = "loomwork.link.kind"
	// AttrRetryAttempt is the 1-based attempt number of a retry.
	AttrRetryAttempt = "loomwork.retry.attempt"
)

// Keys any agent, on Loomwork's runtime or not, sets on the root span of
// a run of an evaluation case, so its trace becomes a trial of that case
// (`loom-eval cases from-traces`, package scorer/tracecases;
// docs/scoring.md, "Any agent's traces become cases"). They are the one
// documented contract between an outside agent's OTel SDK and Loomwork.
const (
	// AttrCaseID is the id of the evaluation case the run attempts (a
	// string), on the root span. Traces without it become cases of their
	// own, named after the trace id.
	AttrCaseID = "loomwork.case.id"
	// AttrTrial is the run's 0-based trial number of its case (an int), on
	// the root span. Optional: without it, a case's trials are numbered in
	// the order their roots started.
	AttrTrial = "loomwork.trial"
	// AttrExperimentID is the id of the experiment a run belongs to (a
	// string): `loom-eval experiment run` sets it, with AttrCaseID and
	// AttrTrial, on the root span it opens around each trial and in the
	// agent's OTEL_RESOURCE_ATTRIBUTES (package experiment).
	AttrExperimentID = "loomwork.experiment.id"
)

// Workflow keys (package agents/workflow): the step graph around the model.
const (
	// AttrWorkflowName is the workflow's name on its invoke_workflow span
	// (the GenAI convention's workflow name attribute).
	AttrWorkflowName = "gen_ai.workflow.name"
	// AttrWorkflowRunID is the journal run id of a workflow run.
	AttrWorkflowRunID = "loomwork.workflow.run_id"
	// AttrWorkflowStep names a step on its workflow_step span.
	AttrWorkflowStep = "loomwork.workflow.step"
	// AttrWorkflowStepKind is the step's kind (model, tool, approval, agent).
	AttrWorkflowStepKind = "loomwork.workflow.step.kind"
	// AttrWorkflowAttempt is the 1-based attempt of a step (an int).
	AttrWorkflowAttempt = "loomwork.workflow.attempt"
	// AttrWorkflowStepState is how a workflow_step span ended (a string:
	// WorkflowStepSucceeded, WorkflowFailed, ...).
	AttrWorkflowStepState = "loomwork.workflow.step.state"
	// AttrWorkflowStepRetries is the number of retries the step declares
	// (an int; attempts = retries + 1).
	AttrWorkflowStepRetries = "loomwork.workflow.step.retries"
	// AttrWorkflowState is how an invoke_workflow span ended: completed,
	// suspended, denied, failed or crashed (a string).
	AttrWorkflowState = "loomwork.workflow.state"
	// AttrWorkflowFile is the file a workflow was declared in (a string;
	// absent for a workflow written in Go).
	AttrWorkflowFile = "loomwork.workflow.file"
	// OpWorkflowStep is the span name prefix of one step's attempt.
	OpWorkflowStep = "workflow_step"
)

// Values of AttrWorkflowStepState (a step's span) and AttrWorkflowState
// (the run's span); failed, suspended and denied are both.
const (
	WorkflowStepSucceeded = "succeeded" // the attempt's result is journaled
	WorkflowStepReplayed  = "replayed"  // the result was recorded by an earlier process: not executed
	WorkflowStepApproved  = "approved"  // an approval gate was answered yes; the step's attempt follows
	WorkflowCompleted     = "completed" // the run: every step has a result
	WorkflowCrashed       = "crashed"   // the run: a simulated crash (RunOptions.CrashAfter)
	WorkflowFailed        = "failed"    // an attempt failed (a retry may follow); the run: a step used its retries
	WorkflowSuspended     = "suspended" // waiting for a human: an approval gate, or a call an agent step's policy held
	WorkflowDenied        = "denied"    // an approval gate was answered no: the run stops
)

// Policy keys (package agents/policy): every authorization decision is a
// span named OpPolicyDecision carrying these.
const (
	// OpPolicyDecision is the span name of an authorization decision.
	OpPolicyDecision = "policy_decision"
	// AttrPolicyDecision is allow, deny or require_approval.
	AttrPolicyDecision = "loomwork.policy.decision"
	// AttrPolicyRule is the pattern of the rule that decided ("" for the
	// default deny).
	AttrPolicyRule = "loomwork.policy.rule"
	// AttrPolicyReason is the decision in words.
	AttrPolicyReason = "loomwork.policy.reason"
	// AttrPolicyTainted is true when the call's arguments derive from
	// untrusted content (a bool).
	AttrPolicyTainted = "loomwork.policy.tainted"
	// AttrPolicyTaintedArg names the tainted argument.
	AttrPolicyTaintedArg = "loomwork.policy.tainted_argument"
	// AttrPolicyOrigin is the tainted argument's origin chain.
	AttrPolicyOrigin = "loomwork.policy.origin"
	// AttrPolicyWrites is true when the tool writes (a bool).
	AttrPolicyWrites = "loomwork.policy.writes"
	// AttrInjectionPatterns lists the injection patterns the deterministic
	// detector matched in content the span handled (a string array). A
	// signal, never the boundary.
	AttrInjectionPatterns = "loomwork.injection.patterns"
)
