// Package journal defines the journal of agent runs: append-only events
// (run_started, model_request, model_response, tool_call, effect,
// tool_result, run_finished), their canonical JSON and SHA-256 chain hashes,
// the idempotency keys of tool calls, and the JSONL form journals are
// exported, committed and replayed in — one event per line, each hash
// chained to the previous event's, and a seal line closing each run, so
// altered, reordered, removed or truncated lines are detected and reported
// with their line number (*CorruptionError).
//
// It has no database dependency: the durable store is package
// replay/journaldb. The format is specified in docs/format/journal.md.
package journal
