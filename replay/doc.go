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
// The journal format and store are in sub-package journal.
package replay
