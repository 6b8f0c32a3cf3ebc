// Command testsummary reads `go test -json` on stdin, prints the tests'
// output as `go test` would, and ends with the summary `make test` closes
// on: packages and tests passed, failed and skipped, with every skip's
// reason, and the slowest packages. A skip that gives no reason is
// "unexplained" and fails the run: a test that cannot run its real part
// must say why. Many skips with one reason (the fast loop's "slow" tests)
// are counted on one line.
//
//	go test -json ./... | go run ./scripts/testsummary [-summary FILE] [-times FILE]
//
// -times writes every package's wall time, slowest first, as
// "seconds<TAB>package" (docs/testing.md keeps the table).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail name the package here
	Test       string
	Output     string
	Elapsed    float64 // seconds, on a package's or test's result
}

// pkgTime is one package's wall time in the run.
type pkgTime struct {
	pkg     string
	seconds float64
}

type skip struct {
	pkg, test, reason string
}

// summary is what the run came to.
type summary struct {
	pkgPass, pkgFail, pkgNoTests int
	status                       map[string]string // package → its worst result: fail, pass, skip (no tests)
	testPass, testFail           int
	skips                        []skip
	failed                       []string
	buildFailed                  []string
	times                        []pkgTime
}

// groupSkips is how many skips with one reason are counted on one line
// rather than listed.
const groupSkips = 4

func main() {
	out := flag.String("summary", "", "also write the summary to this file")
	timesOut := flag.String("times", "", "write each package's wall time, slowest first, to this file")
	quiet := flag.Bool("quiet", false, "print only a line per package and the output of packages that fail (and build errors)")
	flag.Parse()
	s, err := read(os.Stdin, os.Stdout, *quiet)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	text := s.format()
	fmt.Print(text)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(text), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
	}
	if *timesOut != "" {
		if err := os.WriteFile(*timesOut, []byte(s.timesTable()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
	}
	if s.pkgFail > 0 || s.testFail > 0 || len(s.buildFailed) > 0 || s.unexplained() > 0 {
		os.Exit(1)
	}
}

// read consumes the event stream. Quiet keeps each package's output until
// its result and prints it only if the package failed.
func read(r io.Reader, echo io.Writer, quiet bool) (*summary, error) {
	s := &summary{}
	held := map[string][]string{}
	// Output lines of a test, kept until its result, to find a skip's reason.
	pending := map[string][]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not test2json (a build error printed by go test itself).
			fmt.Fprintln(echo, string(line))
			if strings.HasPrefix(string(line), "FAIL") || strings.Contains(string(line), "[build failed]") {
				s.buildFailed = append(s.buildFailed, string(line))
			}
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "build-output":
			fmt.Fprint(echo, e.Output)
		case "build-fail":
			s.buildFailed = append(s.buildFailed, e.ImportPath)
		case "output":
			if quiet {
				if e.Test == "" && isPassLine(e.Output) {
					fmt.Fprint(echo, e.Output) // progress: go test's line for a package that passed
				} else {
					held[e.Package] = append(held[e.Package], e.Output)
				}
			} else {
				fmt.Fprint(echo, e.Output)
			}
			if e.Test != "" {
				pending[key] = append(pending[key], e.Output)
			}
		case "pass", "fail", "skip":
			if e.Test == "" {
				if e.Action != "skip" {
					s.times = append(s.times, pkgTime{e.Package, e.Elapsed})
				}
				if e.Action == "fail" {
					fmt.Fprint(echo, strings.Join(held[e.Package], ""))
				}
				delete(held, e.Package)
				s.result(e.Package, e.Action)
				continue
			}
			switch e.Action {
			case "pass":
				s.testPass++
			case "fail":
				s.testFail++
				s.failed = append(s.failed, e.Package+" "+e.Test)
			case "skip":
				s.skips = append(s.skips, skip{e.Package, e.Test, reason(pending[key])})
			}
			delete(pending, key)
		}
	}
	return s, sc.Err()
}

// isPassLine reports whether a package's output line is go test's
// closing line for a package that passed ("ok  \tpkg\t1.2s").
func isPassLine(l string) bool { return strings.HasPrefix(l, "ok  \t") }

// result counts a package's result. A package run in two passes of one
// suite (make test runs some tests of a package under -race and the rest
// without) is one package: failed if either pass failed, else passed if
// either ran tests.
func (s *summary) result(pkg, action string) {
	if s.status == nil {
		s.status = map[string]string{}
	}
	rank := map[string]int{"": 0, "skip": 1, "pass": 2, "fail": 3}
	prev, seen := s.status[pkg]
	if seen && rank[prev] >= rank[action] {
		return
	}
	s.status[pkg] = action
	if seen {
		s.count(prev, -1)
	}
	s.count(action, +1)
}

func (s *summary) count(action string, d int) {
	switch action {
	case "pass":
		s.pkgPass += d
	case "fail":
		s.pkgFail += d
	case "skip":
		s.pkgNoTests += d
	}
}

// reason finds what a skipped test said: the indented log lines between
// its "=== RUN" and "--- SKIP" (t.Skip's message is logged there).
func reason(lines []string) string {
	var rs []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		// "file_test.go:12: message": keep the message.
		if i := strings.Index(t, ".go:"); i >= 0 {
			if j := strings.Index(t[i+4:], ": "); j >= 0 {
				t = t[i+4+j+2:]
			}
		}
		rs = append(rs, t)
	}
	return strings.Join(rs, " / ")
}

func (s *summary) unexplained() int {
	n := 0
	for _, k := range s.skips {
		if k.reason == "" {
			n++
		}
	}
	return n
}

func (s *summary) format() string {
	var b strings.Builder
	b.WriteString("\n== summary\n")
	sort.Slice(s.skips, func(i, j int) bool {
		if s.skips[i].pkg != s.skips[j].pkg {
			return s.skips[i].pkg < s.skips[j].pkg
		}
		return s.skips[i].test < s.skips[j].test
	})
	byReason := map[string]int{}
	for _, k := range s.skips {
		byReason[k.reason]++
	}
	grouped := map[string]bool{}
	for _, k := range s.skips {
		r := k.reason
		switch {
		case r == "":
			r = "UNEXPLAINED (the test gave no reason)"
		case byReason[r] >= groupSkips:
			if !grouped[r] {
				grouped[r] = true
				fmt.Fprintf(&b, "skipped: %d tests: %s\n", byReason[r], r)
			}
			continue
		}
		fmt.Fprintf(&b, "skipped: %s %s: %s\n", k.pkg, k.test, r)
	}
	for _, f := range s.failed {
		fmt.Fprintf(&b, "failed: %s\n", f)
	}
	for _, f := range s.buildFailed {
		fmt.Fprintf(&b, "build failed: %s\n", f)
	}
	if slow := s.slowest(5); len(slow) > 0 {
		parts := make([]string, len(slow))
		for i, t := range slow {
			parts[i] = fmt.Sprintf("%s %.0fs", strings.TrimPrefix(t.pkg, modulePrefix), t.seconds)
		}
		fmt.Fprintf(&b, "slowest packages: %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, "tests: %d passed, %d failed, %d skipped (%d unexplained)\n",
		s.testPass, s.testFail, len(s.skips), s.unexplained())
	fmt.Fprintf(&b, "packages: %d passed, %d failed (%d without tests)\n", s.pkgPass, s.pkgFail+len(s.buildFailed), s.pkgNoTests)
	return b.String()
}

// modulePrefix is cut from package paths in the one-line slowest list.
const modulePrefix = "github.com/loomwork/loomwork/"

// slowest returns the n packages that took longest, slowest first; a
// package run in two passes counts the time of both.
func (s *summary) slowest(n int) []pkgTime {
	sum := map[string]float64{}
	var ts []pkgTime
	for _, t := range s.times {
		if _, ok := sum[t.pkg]; !ok {
			ts = append(ts, pkgTime{pkg: t.pkg})
		}
		sum[t.pkg] += t.seconds
	}
	for i := range ts {
		ts[i].seconds = sum[ts[i].pkg]
	}
	sort.SliceStable(ts, func(i, j int) bool { return ts[i].seconds > ts[j].seconds })
	if len(ts) > n {
		ts = ts[:n]
	}
	return ts
}

func (s *summary) timesTable() string {
	var b strings.Builder
	for _, t := range s.slowest(len(s.times)) {
		fmt.Fprintf(&b, "%.1f\t%s\n", t.seconds, t.pkg)
	}
	return b.String()
}
