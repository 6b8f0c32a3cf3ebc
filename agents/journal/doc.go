// Package journal defines the journal of agent runs: append-only events
// (run_started, model_request, model_response, tool_call, effect,
// tool_result, run_finished), their canonical JSON and SHA-256 chain hashes,
// the idempotency keys of tool calls, and the JSONL form journals are
// exported, committed and replayed in — one event per line, each hash
// chained to the previous event's, and a seal line closing each run, so
// altered, reordered, removed or truncated lines are detected and reported
// with their line number (*CorruptionError).
//
// It also owns the port every journal store implements (Journal: Events,
// Append, and AppendEffect, which runs a side effect once per idempotency
// key) and its optional capabilities (SchemaEnsurer, SQLTx). It has no
// database dependency: the stores are sub-packages — journaldb (SQLite,
// durable; effects in its tables commit with their events) and memjournal
// (in memory) — and journaltest is the conformance suite they pass. The
// format is specified in docs/format/journal.md.
package journal
