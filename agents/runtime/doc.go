// Package runtime is the durable agent loop every Loomwork agent runs on:
// model → tool calls → results, until a final answer, with every step
// journaled through the journal port (journal.Journal: journaldb on disk,
// memjournal in memory) so a run killed at any point resumes by replaying
// its journal — recorded model answers and tool results are reused, never
// re-requested — and a side-effecting tool runs once per idempotency key,
// exactly once across crashes when its effects live in the journal's
// database (journaldb's tables).
//
// The runtime never learns which agent is running: an agent is a name, a
// system prompt, tools declared with JSON Schema (validated before a tool
// runs; see package schema) and optionally a citation extractor. A failing
// tool (error, panic, invalid arguments, unknown name) becomes an error
// observation for the model, never a crashed run. After the step limit one
// last model call is made with the tools withheld, so a run that ran out of
// steps still answers. Every step is an OpenTelemetry span with the GenAI
// semantic conventions (invoke_agent → chat / execute_tool → retrieval).
//
// With a ContextSpec (Config.Context or Task.Context) the context layer
// (package contextlayer) compacts the conversation before every model call;
// the compacted request is the one sent, hashed and journaled, the chat span
// says what was shrunk, summarised and pinned, and the spec is journaled so
// a resume or replay (ReplayTask) compacts the same way. Task.Attributes
// carries per-run facts to the tools (ToolInput.TaskAttributes).
//
// A resumed run whose agent, task or conversation no longer matches its
// journal fails with a *DivergenceError carrying a stable code (LWR1100...)
// and both sides. docs/runtime.md describes the guarantees in full.
package runtime
