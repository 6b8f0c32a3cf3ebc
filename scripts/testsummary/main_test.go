package main

import (
	"io"
	"strings"
	"testing"
)

func TestSkipsAreListedWithTheirReasonAndASilentSkipIsUnexplained(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:12: needs root: run as root\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"--- SKIP: TestA (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"--- SKIP: TestB (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestB"}`,
		`{"Action":"pass","Package":"p","Test":"TestC"}`,
		`{"Action":"fail","Package":"q","Test":"TestD"}`,
		`{"Action":"pass","Package":"p","Elapsed":1.5}`,
		`{"Action":"fail","Package":"q","Elapsed":12.25}`,
		`{"Action":"skip","Package":"r"}`,
		`{"ImportPath":"s","Action":"build-fail"}`,
	}, "\n")
	s, err := read(strings.NewReader(in), io.Discard, false)
	if err != nil {
		t.Fatal(err)
	}
	got := s.format()
	for _, want := range []string{
		"skipped: p TestA: needs root: run as root\n",
		"skipped: p TestB: UNEXPLAINED",
		"failed: q TestD\n",
		"tests: 1 passed, 1 failed, 2 skipped (1 unexplained)\n",
		"packages: 1 passed, 2 failed (1 without tests)\n",
		"slowest packages: q 12s, p 2s\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if got, want := s.timesTable(), "12.2\tq\n1.5\tp\n"; got != want {
		t.Errorf("times table = %q, want %q", got, want)
	}
}

func TestManySkipsWithOneReasonAreCountedOnOneLine(t *testing.T) {
	var lines []string
	for _, name := range []string{"TestA", "TestB", "TestC", "TestD", "TestE"} {
		lines = append(lines,
			`{"Action":"output","Package":"p","Test":"`+name+`","Output":"    a_test.go:1: slow: left to make test\n"}`,
			`{"Action":"skip","Package":"p","Test":"`+name+`"}`)
	}
	lines = append(lines,
		`{"Action":"output","Package":"p","Test":"TestF","Output":"    a_test.go:1: needs root\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestF"}`)
	s, err := read(strings.NewReader(strings.Join(lines, "\n")), io.Discard, false)
	if err != nil {
		t.Fatal(err)
	}
	got := s.format()
	for _, want := range []string{"skipped: 5 tests: slow: left to make test\n", "skipped: p TestF: needs root\n", "tests: 0 passed, 0 failed, 6 skipped (0 unexplained)"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "TestA") {
		t.Errorf("a grouped skip is still listed by name:\n%s", got)
	}
}

func TestQuietPrintsOnlyFailingPackages(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"output","Package":"good","Test":"TestA","Output":"good output\n"}`,
		`{"Action":"pass","Package":"good","Test":"TestA"}`,
		`{"Action":"output","Package":"good","Output":"ok  \tgood\t0.1s\n"}`,
		`{"Action":"pass","Package":"good"}`,
		`{"Action":"output","Package":"bad","Test":"TestB","Output":"    b_test.go:3: wrong answer\n"}`,
		`{"Action":"fail","Package":"bad","Test":"TestB"}`,
		`{"Action":"output","Package":"bad","Output":"FAIL\tbad\n"}`,
		`{"Action":"fail","Package":"bad"}`,
	}, "\n")
	var echo strings.Builder
	if _, err := read(strings.NewReader(in), &echo, true); err != nil {
		t.Fatal(err)
	}
	got := echo.String()
	if strings.Contains(got, "good output") || !strings.Contains(got, "wrong answer") || strings.Count(got, "FAIL\tbad") != 1 || !strings.Contains(got, "ok  \tgood") {
		t.Errorf("quiet output = %q: want a line for the passing package and the failing package's output", got)
	}
}

// make test's passes: a package whose tests ran partly under -race and
// partly without is one package, failed if either pass failed, and its
// time is both passes'.
func TestAPackageInTwoPassesIsCountedOnce(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"pass","Package":"p","Test":"TestRaced"}`,
		`{"Action":"pass","Package":"p","Elapsed":3}`,
		`{"Action":"pass","Package":"q","Test":"TestA"}`,
		`{"Action":"pass","Package":"q","Elapsed":1}`,
		`{"Action":"pass","Package":"p","Test":"TestBig"}`,
		`{"Action":"pass","Package":"p","Elapsed":4}`,
		`{"Action":"fail","Package":"q","Test":"TestB"}`,
		`{"Action":"fail","Package":"q","Elapsed":2}`,
		`{"Action":"skip","Package":"q"}`,
	}, "\n")
	s, err := read(strings.NewReader(in), io.Discard, false)
	if err != nil {
		t.Fatal(err)
	}
	got := s.format()
	for _, want := range []string{
		"tests: 3 passed, 1 failed",
		"packages: 1 passed, 1 failed (0 without tests)\n",
		"slowest packages: p 7s, q 3s\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}
