// Package contextlayer keeps a long agent run inside a token budget without
// losing what matters. The runtime applies a Layer before every model call.
//
// A Layer works cheapest first:
//
//  1. Shrink oversized tool results in place. JSON stays valid JSON: a long
//     list keeps its head and gains {"_omitted_items": N}, a long string keeps
//     its head and tail around a marker saying how much was cut, a wide
//     object keeps its first keys and gains {"_omitted_keys": N}.
//  2. Summarise the middle of the conversation, keeping the task and a recent
//     window verbatim. The summary comes from a model when a Summarizer is
//     configured, otherwise from an extractive fallback; either way it names
//     the messages and tool calls it replaced (its provenance).
//  3. Restore pinned facts — ids, paths, ticket numbers, and anything the
//     task or a tool marks as a pin — that steps 1 and 2 dropped. Pins are
//     collected from the untouched conversation, before shrinking: shrinking
//     is exactly the step that deletes a fact twelve rows deep in a payload.
//
// If the result is still over budget, the oldest turns after the task are
// dropped. Every step keeps the providers' ordering rule (llm.ValidateOrder):
// the verbatim window never opens on a tool result whose call was summarised
// or dropped; the boundary moves back to the assistant turn that made the
// calls.
//
// A ModelSummarizer's call is a model call like the agent's own: with a
// Tracer it is a `chat {model}` span marked loomwork.context.summary_call
// (with the triggering step, usage and llm.cost.total), a sibling of the
// step's chat span so the trace rollup bills it exactly once, and a CallLog
// lets the caller account for its usage, which the journal does not keep.
//
// Builder is the second tool here: it fills a window by priority tiers
// (instructions, evidence, tool output, memory, history). Floors are set
// aside in tier order, the completion reservation is never used, an item
// that does not fit whole is compacted only down to its compaction floor
// and otherwise dropped, and a higher tier is never shrunk to make room for
// a lower one. Its report has a decision per item (kept, truncated,
// dropped, with tokens and a reason), utilization against the full window,
// the weakest slot of a U-shaped position curve, and an accounting
// identity CheckReport asserts: used + dropped = offered. The runtime uses
// it when a run's context spec has tiers.
//
// Token counts come from a real BPE tokenizer (o200k_base, the encoding of
// OpenAI's GPT-4o family, embedded in the binary) or, where that is not
// wanted, a documented estimate; see Counter.
package contextlayer
