// Package storetest is the conformance suite every trace-store backend must
// pass (store/sqlite, store/clickhouse, and any future one).
//
// A backend describes itself with a Harness and calls RunAll from its own
// tests. The suite writes agent-shaped fixture traces (embedded JSON in
// testdata/) and checks what a user of the store would notice: spans read
// back equal the spans written, retried batches are stored once, per-trace
// summaries are right whatever order the spans arrive in, every ListTraces
// filter and sort key behaves as store.TraceQuery documents, pagination has
// no duplicates or gaps, and bad input is an error rather than a panic or a
// silent success.
//
// Expectations for ListTraces are computed by a small reference model in this
// package (model.go) from the spans the suite wrote, so the rules a backend
// must follow are written down once, in Go:
//
//   - ServiceName is the root span's service; while no root has arrived it is
//     the service of the earliest-starting span (ties: smallest span id).
//     RootName is the name of the earliest-starting span without a parent.
//   - AgentNames and Models are sorted and distinct (Models holds request and
//     response models of every span).
//   - ModelCalls, FailedModelCalls, the token sums and Groups follow the
//     billing rule (store.Roles): a span reporting usage, or making a model
//     call, is billed unless a descendant reports usage; the model applies
//     it independently (an ancestor walk). ToolCalls counts spans whose
//     operation is "execute_tool". Duration spans every span; AfterRoot is
//     the part after the root ended for a trace of one fragment.
//   - SortTokens orders by InputTokens+OutputTokens of the summary.
//   - Ties on any sort key are broken by TraceID, in the same direction as
//     the sort, so the order (and so pagination) is total.
//
// GenerateTraces and BenchmarkWrite give benchmarks elsewhere a realistic,
// deterministic gen_ai span mix.
package storetest
