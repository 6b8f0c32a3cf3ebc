// Package archtest holds the architecture test: the one table of allowed
// import directions between the module's rooms (top-level folders and the
// few packages inside them that carry their own rule), and the test that
// reads the module's import graph with `go list -deps -json ./...` and fails
// on any module-internal edge the table does not allow, naming the
// importing package, the imported one and the rule it breaks.
//
// It also checks that the scorer does no I/O (no os, os/exec, net,
// net/http), that the web UI does not link the agent runtime, tiktoken,
// bleve or the journal database, that the runtime and the workflow link
// neither database/sql nor the journal database (their journal port is
// any store's), that no top-level folder imports a folder
// that imports it back (nor a subfolder, such as agents/memory, one of its
// own level), and that the gen_ai.* and loomwork.* attribute
// names are spelled only in semconv; and (funclen_test.go) that no
// function of cmd's non-test code is over 80 lines: cmd parses flags and
// wires, logic lives in packages.
//
// Violations that existed when the test was written are listed in
// knownViolations; the test fails on any violation not in that list and on
// any entry that no longer occurs, so the list only shrinks. The table in
// archtest_test.go is the source of truth; docs/architecture.md describes
// it. The package has no non-test code and nothing imports it.
package archtest
