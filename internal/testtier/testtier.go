// Package testtier owns the test suite's three tiers, so every package
// names them the same way (docs/testing.md):
//
//   - the fast loop, `make check` (`go test -short`): pure and in-process
//     tests; a test that takes seconds says so with Slow and is left to
//     the suite;
//   - the suite, `make test` (CI's): everything, race-checked where there
//     is concurrency, each long scenario at its short length (Pick's first
//     value);
//   - the long tier, `make soak` (LOOMWORK_LONG=1): the same scenarios at
//     full length — more outages, more kills, every case.
//
// A short length is the same scenario with fewer repetitions, never a
// different or weaker assertion: what the suite checks, the long tier
// checks more often.
package testtier

import (
	"os"
	"testing"
)

// EnvLong names the variable that selects the long tier.
const EnvLong = "LOOMWORK_LONG"

// Long reports whether the long tier runs (LOOMWORK_LONG=1).
func Long() bool { return os.Getenv(EnvLong) == "1" }

// Pick returns short in the suite and long in the long tier.
func Pick[T any](short, long T) T {
	if Long() {
		return long
	}
	return short
}

// Slow marks a test the fast loop leaves to `make test`: under -short it
// is skipped, with a reason the suite's summary prints.
func Slow(t testing.TB) {
	t.Helper()
	if testing.Short() && !Long() {
		t.Skip("slow (seconds or more, or a real server, sandbox or browser): the fast loop (-short) leaves it to make test")
	}
}
