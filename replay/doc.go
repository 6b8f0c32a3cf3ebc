// Package replay re-runs recorded journals through the runtime without a
// model: the model's answers come from the journal, the tools are executed
// again, and every event the run produces is checked, in lockstep, against
// the recorded event with the same sequence number (kind, step, tool, call
// id, argument hash). The first departure stops the replay and is reported
// with a stable code and both sides (journal.DivergenceError, in the manner
// of Temporal's replayer); a re-executed tool whose result differs from the
// recorded one is reported without stopping (CodeResultDiffers). Rescore
// derives the same report from the recorded events alone.
//
// A replayed run writes a scratch journal of its own: an in-memory one
// (memjournal), or, for an agent whose tools keep tables in the journal
// (runtime.Tool.EffectSchema), a scratch SQLite database (journaldb), so
// their re-executed statements are applied and compared as they were
// recorded. The journal's format and stores are in package agents/journal
// and its sub-packages.
package replay
