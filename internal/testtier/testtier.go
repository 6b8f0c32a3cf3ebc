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
//
// It also owns what any test needs to know of the suite's environment:
// whether the binary runs under -race (Race, NoRace), the repository's
// root under the suite's -trimpath builds (ModuleRoot), a tmpfs of a given
// size (Tmpfs).
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

// EnvRaceSplit names the variable make test sets while it runs the suite
// in its two passes (scripts/racesplit): under -race, the packages whose
// own code is concurrent, less the tests marked NoRace; without it,
// everything else.
const EnvRaceSplit = "LOOMWORK_RACE_SPLIT"

// NoRace marks a test that make test runs without the race detector
// although its package's own code is concurrent: a test that adds only
// size — a whole dataset, the whole CI recipe, a browser session over a
// big trace — to concurrency that the unmarked test coveredBy (of the same
// package) already runs under -race, or none when coveredBy is "" (the
// test reaches none of the package's concurrency). The race detector finds
// nothing new in such a test and slows it five- to ten-fold (it
// instruments the pure-Go SQLite engine and every index fit). `go test
// -race` run by hand still runs it. scripts/racesplit finds the marked
// tests by this call, which must be a statement of the test function
// itself with coveredBy a string literal, and refuses a coveredBy that
// is not an unmarked test of the package.
//
// Under make test's split, a marked test that runs under -race anyway
// fails: the split missed it, and would report a race-checked suite
// that is not.
func NoRace(t testing.TB, coveredBy string) {
	t.Helper()
	if raceDetector && os.Getenv(EnvRaceSplit) == "1" {
		t.Fatal("marked testtier.NoRace but run under -race by make test's split: scripts/racesplit did not find the mark (it must be a statement of the test function itself)")
	}
}

// Race reports whether this test binary was built with -race: a test may
// size its data down under the detector (five- to ten-fold slower), never
// its assertions.
func Race() bool { return raceDetector }
