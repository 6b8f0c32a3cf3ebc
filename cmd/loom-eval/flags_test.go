package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/internal/testtier"
)

func TestParseFlagsAcceptsFlagsBeforeAndAfterPositionalArguments(t *testing.T) {
	for _, c := range []struct {
		args    []string
		wantPos []string
		wantN   int
		wantS   string
		wantB   bool
	}{
		{[]string{"a", "b"}, []string{"a", "b"}, 0, "", false},
		{[]string{"-n", "3", "a", "b"}, []string{"a", "b"}, 3, "", false},
		{[]string{"a", "-n", "3", "b", "--json"}, []string{"a", "b"}, 3, "", true},
		{[]string{"a", "b", "--s=x", "-n=4"}, []string{"a", "b"}, 4, "x", false},
		{[]string{"--json", "a", "--", "-n", "5"}, []string{"a", "-n", "5"}, 0, "", true},
		{[]string{"--s", "--", "a"}, []string{"a"}, 0, "--", false}, // "--" as a flag's value
		{[]string{"a", "-"}, []string{"a", "-"}, 0, "", false},      // "-" is stdin, positional
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		n := fs.Int("n", 0, "")
		s := fs.String("s", "", "")
		b := fs.Bool("json", false, "")
		if err := parseFlags(fs, c.args); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if got := fs.Args(); !reflect.DeepEqual(got, c.wantPos) && !(len(got) == 0 && len(c.wantPos) == 0) {
			t.Errorf("%q: positional %q, want %q", c.args, got, c.wantPos)
		}
		if *n != c.wantN || *s != c.wantS || *b != c.wantB {
			t.Errorf("%q: n=%d s=%q json=%v, want %d %q %v", c.args, *n, *s, *b, c.wantN, c.wantS, c.wantB)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	err := parseFlags(fs, []string{"a", "--nope"})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitUsage {
		t.Fatalf("an unknown flag after a positional argument: %v, want a usage error", err)
	}
}

func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	err := m.Run(context.Background(), args)
	return out.String(), errb.String(), exitCode(err, io.Discard)
}

// Every command that prints a report takes --json and --format json, with
// flags before or after its positional arguments, and they print the same.
func TestReportCommandsTakeJSONBothWaysAndFlagsAnywhere(t *testing.T) {
	testtier.Slow(t)
	// The committed baseline trials name their journals relative to the
	// repository root, where the README and scripts/baselines.sh run score
	// and gate; those two run from there.
	const trials = "baselines/baseline.trials.jsonl"
	const cases = "baselines/cases.jsonl"
	const journal = "../../baselines/journals/coding.jsonl"
	for _, c := range []struct {
		name string
		a, b []string // two spellings that must print the same JSON
		root bool     // run from the repository root
	}{
		{"score", []string{"score", trials, "--cases", cases, "--json"}, []string{"score", "--format", "json", "--cases", cases, trials}, true},
		{"gate", []string{"gate", "--policy", "baselines/policy.json", "--candidate", trials, "--baseline", trials, "--json"},
			[]string{"gate", "--format", "json", "--policy", "baselines/policy.json", "--candidate", trials, "--baseline", trials}, true},
		{"replay", []string{"replay", journal, "--rescore", "--json"}, []string{"replay", "--format", "json", "--rescore", journal}, false},
		{"context", []string{"context", "--estimate", "--steps", "10", "--budgets", "2000", "--json"}, []string{"context", "--format", "json", "--estimate", "--steps", "10", "--budgets", "2000"}, false},
		{"rollup", []string{"rollup", "testdata/scorer/traces.otlp.jsonl", "--json"}, []string{"rollup", "--format", "json", "testdata/scorer/traces.otlp.jsonl"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.root {
				t.Chdir("../..")
			}
			outA, errA, codeA := cli(t, c.a...)
			outB, errB, codeB := cli(t, c.b...)
			if codeA != ExitOK || codeB != ExitOK {
				t.Fatalf("exit %d (%s) and %d (%s)", codeA, errA, codeB, errB)
			}
			var ja, jb any
			if err := json.Unmarshal([]byte(outA), &ja); err != nil {
				t.Fatalf("%v: not JSON: %v\n%s", c.a, err, outA)
			}
			if err := json.Unmarshal([]byte(outB), &jb); err != nil {
				t.Fatalf("%v: not JSON: %v\n%s", c.b, err, outB)
			}
			if !reflect.DeepEqual(ja, jb) {
				t.Errorf("%v and %v print different JSON", c.a, c.b)
			}
		})
	}
}
