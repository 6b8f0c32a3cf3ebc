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
		`{"Action":"pass","Package":"p"}`,
		`{"Action":"fail","Package":"q"}`,
		`{"Action":"skip","Package":"r"}`,
		`{"ImportPath":"s","Action":"build-fail"}`,
	}, "\n")
	s, err := read(strings.NewReader(in), io.Discard)
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
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}
