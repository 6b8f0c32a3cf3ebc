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
	if strings.Contains(got, "good output") || !strings.Contains(got, "wrong answer") || !strings.Contains(got, "FAIL\tbad") {
		t.Errorf("quiet output = %q: want the failing package's output only", got)
	}
}
