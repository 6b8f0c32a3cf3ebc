package main

import (
	"bytes"
	"context"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// subcommands are the subcommands of every command that has some: the
// help walk asks each of them for its help.
var subcommands = map[string][]string{
	"a2a":        {"serve"},
	"audit":      {"verify"},
	"cases":      {"from-traces"},
	"datasets":   {"mine", "check", "list", "show", "commit"},
	"experiment": {"run", "list", "show", "compare", "push"},
	"keys":       {"create", "list", "revoke", "project"},
	"labels":     {"add", "agreement"},
	"mcp":        {"serve"},
	"memory":     {"list", "show", "forget", "distill"},
	"policy":     {"default", "check"},
	"sandbox":    {"exec"},
	"schedule":   {"tick", "deliver", "pause", "resume", "list", "run"},
	"sessions":   {"list", "get"},
	"spool":      {"repair"},
	"suite":      {"run", "status"},
	"traces":     {"list", "get"},
	"workflow":   {"run", "status"},
}

// Every command and subcommand answers -h and --help with its help on
// stderr and exit 0 (issue 40: six commands exited 2 on -h, `suite -h`
// saying `unknown subcommand "-h"`), and does nothing else: nothing on
// stdout, nothing started.
func TestEveryCommandAndSubcommandPrintsItsHelpOnDashH(t *testing.T) {
	t.Chdir(t.TempDir()) // a command that wrote a file would write it here
	cmds := commands()
	for name := range subcommands {
		if _, ok := cmds[name]; !ok {
			t.Errorf("subcommands lists %q, which is no command", name)
		}
	}
	var lines [][]string
	for name := range cmds {
		lines = append(lines, []string{name})
		for _, sub := range subcommands[name] {
			lines = append(lines, []string{name, sub})
		}
	}
	lines = append(lines, nil) // loom-eval -h itself
	slices.SortFunc(lines, func(a, b []string) int { return strings.Compare(strings.Join(a, " "), strings.Join(b, " ")) })
	for _, line := range lines {
		for _, h := range []string{"-h", "--help"} {
			args := append(slices.Clone(line), h)
			var stdout, stderr bytes.Buffer
			m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
			err := m.Run(context.Background(), args)
			if code := exitCode(err, &stderr); code != ExitOK {
				t.Errorf("loom-eval %s: exit %d, want 0; stderr:\n%s", strings.Join(args, " "), code, stderr.String())
				continue
			}
			if !strings.Contains(stderr.String(), "Usage: loom-eval") {
				t.Errorf("loom-eval %s printed no usage; stderr:\n%s", strings.Join(args, " "), stderr.String())
			}
			if stdout.Len() > 0 {
				t.Errorf("loom-eval %s wrote to stdout:\n%s", strings.Join(args, " "), stdout.String())
			}
		}
	}
}

// `loom-eval version` and `--version` say what the binary was built from:
// the module, its version, the commit (or why there is none) and the Go
// toolchain.
func TestVersionPrintsTheModuleAndTheBuild(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var stdout, stderr bytes.Buffer
		m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
		if err := m.Run(context.Background(), args); err != nil {
			t.Fatalf("loom-eval %s: %v\n%s", args[0], err, stderr.String())
		}
		for _, want := range []string{"loom-eval ", "module  github.com/loomwork/loomwork", "commit  ", "go      go1."} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("loom-eval %s: output lacks %q:\n%s", args[0], want, stdout.String())
			}
		}
	}
	mod := true
	bi := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/loomwork/loomwork", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "3f307aa"}, {Key: "vcs.time", Value: "2026-12-07T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	v := readVersion(bi, true)
	if v.Version != "v1.2.3" || v.Go != "go1.99.1" || v.commitLine() != "3f307aa (2026-12-07T10:00:00Z), with uncommitted changes" || v.Modified == nil || *v.Modified != mod {
		t.Errorf("readVersion = %+v, commit line %q", v, v.commitLine())
	}
	if l := readVersion(&debug.BuildInfo{}, true).commitLine(); !strings.Contains(l, "-buildvcs=false") {
		t.Errorf("a build without VCS information says %q", l)
	}
}
