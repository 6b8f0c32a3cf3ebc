// Package experiment owns `loom-eval experiment`: running a user's agent —
// not one of Loomwork's — over a case file, cases × trials, and ending in
// the same score report and gate as `loom-eval score` and `gate`.
//
// It owns the agent targets (Target: a command per trial, an
// OpenAI-compatible chat-completions endpoint, a JSON endpoint with a body
// template, an A2A agent by its card URL, an MCP server's tool); the trace
// path of a run (Traces: a root span per trial carrying the experiment,
// case and trial, the W3C trace context and OTLP settings handed to the
// agent, and the reads that find a trial's spans — the collector and the
// store behind it are a Backend that cmd/loom-eval wires); the runner
// (Runner: concurrency, a per-trial timeout, bounded retries of
// infrastructure failures only, a progress line, resume from the
// append-only trials file); and the experiment folder (experiment.json, a
// datasets.Experiment; trials.jsonl, graded datasets.Trial records;
// report.json). Scoring and gating are scorer/report's; grading backends
// (the sandbox, a judge) come in through scorer/grade's interfaces.
//
// docs/experiments.md is the user's guide.
package experiment
