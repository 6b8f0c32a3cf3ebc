// Package runner runs reference-agent tasks as journaled runs: trials,
// per-trial models, memory recall and distillation, evidence,
// authorization. It is what `loom-eval run` does once its flags are parsed
// and its parts are open: the command builds the agent (with its MCP
// tools), the journal, the models, the memory store, the policy guard and
// the approval queue, and hands them over in a Config; Run runs every trial
// of every task, in order, and says what each run did and cost.
//
// A run is named by Config.RunID or by runtime.RunID (AGENT-CASE-tTRIAL
// for a case), so running the same tasks again against the same journal
// resumes every run instead of asking the model again: a finished run is
// read back, a suspended one continues at the call it waited on. With a
// memory store, a new run first recalls what earlier runs distilled into
// the context's memory tier and, once finished, is distilled into the
// store in turn (memory.Store.DistillRun); a resumed run keeps the memory
// it recalled the first time (recalling again would change its first
// request) and is not distilled twice. Evidence (pre-retrieved documents)
// goes into every new run's evidence tier.
//
// A run a human must approve first (the Authorizer held a call and the
// approval queue has no answer yet) stops Run: the hint on Config.Out
// names the call, the command that answers it and the run id that resumes
// it, and the error is the runtime's *runtime.SuspendedError.
//
// The runner never opens a file: the journal is the port journal.Journal
// (journaldb for `loom-eval run`, memjournal in tests), prices come from
// Config.Price (cmd wires the scorer's price table), and spans go to
// Config.TracerProvider.
package runner
