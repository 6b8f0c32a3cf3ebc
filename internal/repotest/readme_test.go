package repotest

import (
	"bufio"
	"fmt"
	"github.com/loomwork/loomwork/internal/testtier"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readmeCommand is one shell command of the README, as written.
type readmeCommand struct {
	Line       int    // README line where it starts
	Text       string // the command, continuation lines joined
	Exit       int    // the exit code its comment documents ("exits N"), else 0
	KeepsGoing bool   // "keeps running": a server, started in the background
}

var exitsRE = regexp.MustCompile(`\bexits (\d+)\b`)

// readmeCommands extracts the shell commands of the README's "A tour"
// section (its sh code blocks, the CI subsection included). A comment
// starts at two spaces and a '#'; "exits N" in it is the expected exit code
// and "keeps running" marks a server.
func readmeCommands(readme string) ([]readmeCommand, error) {
	var (
		cmds    []readmeCommand
		inTour  bool
		inBlock bool
		pending *readmeCommand
	)
	sc := bufio.NewScanner(strings.NewReader(readme))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inTour = strings.TrimSpace(line) == "## A tour"
			continue
		case !inTour:
			continue
		case strings.HasPrefix(line, "```"):
			if inBlock && pending != nil {
				return nil, fmt.Errorf("README:%d: a command ends in a continuation", pending.Line)
			}
			inBlock = !inBlock && strings.TrimSpace(line) == "```sh"
			continue
		case !inBlock || strings.TrimSpace(line) == "":
			continue
		}
		code, comment := line, ""
		if i := strings.Index(line, "  #"); i >= 0 {
			code, comment = line[:i], line[i+3:]
		} else if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		code = strings.TrimRight(code, " ")
		cont := strings.HasSuffix(code, "\\")
		code = strings.TrimSuffix(code, "\\")
		if pending == nil {
			pending = &readmeCommand{Line: n}
		}
		pending.Text += strings.TrimSpace(code) + " "
		if m := exitsRE.FindStringSubmatch(comment); m != nil {
			pending.Exit, _ = strconv.Atoi(m[1])
		}
		if strings.Contains(comment, "keeps running") {
			pending.KeepsGoing = true
		}
		if !cont {
			pending.Text = strings.TrimSpace(pending.Text)
			cmds = append(cmds, *pending)
			pending = nil
		}
	}
	return cmds, sc.Err()
}

func TestReadmeCommandsAreExtractedWithTheirExitCodes(t *testing.T) {
	cmds, err := readmeCommands("# x\n## A tour\n```sh\n" +
		"loom-eval serve                # keeps running: a server\n" +
		"loom-eval sandbox exec -- false   # exits 1: it fails\n" +
		"loom-eval gate --a \\\n  --b c > out.md\n" +
		"```\n## Layout\n```sh\nnot-this\n```\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []readmeCommand{
		{Line: 4, Text: "loom-eval serve", KeepsGoing: true},
		{Line: 5, Text: "loom-eval sandbox exec -- false", Exit: 1},
		{Line: 6, Text: "loom-eval gate --a --b c > out.md"},
	}
	if fmt.Sprint(cmds) != fmt.Sprint(want) {
		t.Fatalf("got %+v\nwant %+v", cmds, want)
	}
}

// freePort returns a loopback address no one listens on right now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// copyTree copies the files git knows (tracked, and new files not ignored)
// from root into dst: what a clone with this change would hold.
func copyTree(t *testing.T, root, dst string) {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		src := filepath.Join(root, f)
		st, err := os.Lstat(src)
		if err != nil {
			continue // deleted in the work tree
		}
		if !st.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// shellQuote quotes s for bash.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// The README's tour is a promise: every command in it runs as written, from
// the root of a copy of the repository, with loom-eval installed by the
// tour's own `make install`, and ends with the exit code its comment gives.
// Servers ("keeps running") start in the background on free loopback ports
// (moved with the LOOMWORK_*_ADDR variables the README documents) and are
// stopped before the next server and at the end.
//
// It runs the tour as a newcomer does (issue 40): after `make demo`, whose
// server is left running on the same ports and whose closing hint must run
// as printed; and, once the tour is done, `loom-eval mcp serve` in another
// fresh copy, where nothing has created a trace store yet.
func TestEveryReadmeTourCommandRunsAsWritten(t *testing.T) {
	testtier.Slow(t)
	if os.Geteuid() != 0 {
		t.Fatal("the README's tour runs the sandbox (replay of the coding agent, sandbox exec): run as root, as make test and CI do")
	}
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := readmeCommands(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) < 15 {
		t.Fatalf("found only %d commands in the README's tour", len(cmds))
	}
	scratch := t.TempDir()
	repo := filepath.Join(scratch, "repo")
	copyTree(t, root, repo)
	bin := filepath.Join(scratch, "bin")
	logs := filepath.Join(scratch, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	ui, grpcAddr, httpAddr := freePort(t), freePort(t), freePort(t)

	var sh strings.Builder
	fmt.Fprintf(&sh, `set -u
cd %s
bg=""
stop_bg() {
  if [ -n "$bg" ]; then kill -TERM "$bg" 2>/dev/null; wait "$bg" 2>/dev/null; bg=""; fi
}
# A tour that fails before its ClickHouse section's stop leaves no server behind.
trap 'stop_bg; ./scripts/demo.sh stop >/dev/null 2>&1; [ ! -d .loomwork/ch ] || ./scripts/clickhouse.sh stop .loomwork/ch >/dev/null 2>&1' EXIT
wait_ui() { # until the server accepts on its OTLP ports and its UI port, or it exited
  # serve binds the UI's port first and the collector's after: a connect
  # to the UI alone can come before the OTLP ports exist.
  for _ in $(seq 600); do
    if (exec 3<>/dev/tcp/%s) 2>/dev/null && (exec 3<>/dev/tcp/%s) 2>/dev/null && (exec 3<>/dev/tcp/%s) 2>/dev/null; then return 0; fi
    kill -0 "$bg" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
TRACE_ID=""
`, shellQuote(repo), strings.Replace(ui, ":", "/", 1), strings.Replace(grpcAddr, ":", "/", 1), strings.Replace(httpAddr, ":", "/", 1))
	writeMakeDemo(&sh, filepath.Join(logs, "make-demo.log"))
	for i, c := range cmds {
		text := strings.ReplaceAll(c.Text, "TRACE_ID", "$TRACE_ID")
		log := filepath.Join(logs, fmt.Sprintf("%02d-line%d.log", i, c.Line))
		fmt.Fprintf(&sh, "echo %s\n", shellQuote(fmt.Sprintf("### README:%d: %s", c.Line, c.Text)))
		if c.KeepsGoing {
			fmt.Fprintf(&sh, "stop_bg\n%s >%s 2>&1 &\nbg=$!\n", text, shellQuote(log))
			fmt.Fprintf(&sh, "if ! wait_ui; then echo 'FAIL README:%d: the server did not come up; its log:'; cat %s; exit 1; fi\n", c.Line, shellQuote(log))
			continue
		}
		// eval must run in this shell (it sets variables); everything else
		// does too, with its output kept for the report.
		// Braces keep it in this shell and leave its own redirections alone.
		fmt.Fprintf(&sh, "t0=$(date +%%s%%N)\n{ %s\n} >%s 2>&1 </dev/null\nrc=$?\n", text, shellQuote(log))
		fmt.Fprintf(&sh, "echo \"(took $(( ($(date +%%s%%N) - t0) / 1000000 )) ms)\"\ntail -n 5 %s\n", shellQuote(log))
		fmt.Fprintf(&sh, "if [ \"$rc\" != %d ]; then echo \"FAIL README:%d: exit $rc, the README says %d; output:\"; cat %s; exit 1; fi\n", c.Exit, c.Line, c.Exit, shellQuote(log))
		// TRACE_ID is the id demo printed last (else the first id seen).
		fmt.Fprintf(&sh, "t=$(grep -oE 'Trace ID: [0-9a-f]{32}' %s | tail -n 1 | cut -c11-18); [ -z \"$t\" ] || TRACE_ID=$t\n", shellQuote(log))
		fmt.Fprintf(&sh, "[ -n \"$TRACE_ID\" ] || TRACE_ID=$(grep -oE '\\b[0-9a-f]{32}\\b' %s | head -n 1 | cut -c1-8)\n", shellQuote(log))
	}
	fresh := filepath.Join(scratch, "fresh")
	copyTree(t, root, fresh)
	writeFreshMCP(&sh, fresh, filepath.Join(logs, "fresh-mcp.log"))
	// What the CI block's redirection wrote is the gate's Markdown summary.
	fmt.Fprintf(&sh, "grep -q 'Gate' eval-summary.md || { echo 'FAIL: eval-summary.md holds no gate summary'; exit 1; }\n")
	fmt.Fprintf(&sh, "stop_bg\necho README-TOUR-OK\n")
	script := filepath.Join(scratch, "tour.sh")
	if err := os.WriteFile(script, []byte(sh.String()), 0o755); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(),
		"GOBIN="+bin,
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GOFLAGS="+tourGoflags(),
		"LOOMWORK_GRPC_ADDR="+grpcAddr,
		"LOOMWORK_HTTP_ADDR="+httpAddr,
		"LOOMWORK_UI_ADDR="+ui,
	)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("ran %d README commands in %s:\n%s", len(cmds), time.Since(start).Round(time.Second), out)
	if err != nil || !strings.Contains(string(out), "README-TOUR-OK") {
		t.Fatalf("the README's tour failed (%v); the script is %s", err, script)
	}
}

// writeMakeDemo adds `make demo` to the tour script, in the fresh copy,
// before the tour: the server it leaves running is the one the tour's
// `make stop` stops, and the command its last lines suggest must run as
// printed (loom-eval is not on the PATH yet: bin/loom-eval).
func writeMakeDemo(sh *strings.Builder, log string) {
	fmt.Fprintf(sh, "echo '### make demo'\nt0=$(date +%%s%%N)\nmake demo >%s 2>&1 </dev/null\nrc=$?\n", shellQuote(log))
	fmt.Fprintf(sh, "echo \"(took $(( ($(date +%%s%%N) - t0) / 1000000 )) ms)\"\n")
	fmt.Fprintf(sh, "if [ \"$rc\" != 0 ]; then echo \"FAIL make demo: exit $rc; output:\"; cat %s; exit 1; fi\n", shellQuote(log))
	fmt.Fprintf(sh, "hint=$(grep -oE 'bin/loom-eval traces get [0-9a-f]{32}' %s | tail -n 1)\n", shellQuote(log))
	fmt.Fprintf(sh, "echo \"### make demo's hint: $hint\"\n")
	fmt.Fprintf(sh, "if [ -z \"$hint\" ] || ! $hint >/dev/null 2>&1; then echo \"FAIL make demo's hint '$hint' does not run as written; make demo printed:\"; cat %s; exit 1; fi\n", shellQuote(log))
}

// mcpInitialize and mcpListTools are a Model Context Protocol client's
// first request, then its notification that it is initialized and its
// request for the tools.
const (
	mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"tour","version":"1"}}}`
	mcpListTools  = `{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
)

// writeFreshMCP adds `loom-eval mcp serve` on a fresh copy to the tour
// script: it must start (issue 40: it exited 3, "open trace store
// .loomwork/traces.db: no such file"), answer a client over stdio — each
// request sent once the answer before it came, as a client does — offer
// the trace queries, and exit 0 when its stdin closes.
func writeFreshMCP(sh *strings.Builder, fresh, log string) {
	fmt.Fprintf(sh, `echo '### loom-eval mcp serve, on a fresh clone'
coproc MCP { cd %s && exec loom-eval mcp serve --no-python 2>%s; }
mcp_pid=$MCP_PID
exec 7>&"${MCP[1]}" 8<&"${MCP[0]}"
eval "exec ${MCP[1]}>&- ${MCP[0]}<&-"
( printf '%%s\n' %s >&7 ) 2>/dev/null
init=""; read -r -t 120 init <&8
( printf '%%s\n' %s >&7 ) 2>/dev/null
tools=""; read -r -t 120 tools <&8
exec 7>&- 8<&-
wait "$mcp_pid"; rc=$?
case "$rc $tools" in
"0 "*'"name":"trace_list"'*) echo "mcp serve answered: ${tools:0:80}…" ;;
*) echo "FAIL mcp serve on a fresh clone: exit $rc, want 0 and the trace tools; it answered: $init $tools; stderr:"; cat %s; exit 1 ;;
esac
`, shellQuote(fresh), shellQuote(log), shellQuote(mcpInitialize), shellQuote(mcpListTools), shellQuote(log))
}

// tourGoflags is the GOFLAGS the tour's commands run with: the suite's own
// (scripts/test.sh sets -trimpath, so the tour's `make install` in its copy
// of the tree links from Go's build cache), with -buildvcs=false added when
// missing — the copy is not a git checkout.
func tourGoflags() string {
	if f := os.Getenv("GOFLAGS"); strings.Contains(f, "-buildvcs=false") {
		return f
	}
	return strings.TrimSpace(os.Getenv("GOFLAGS") + " -buildvcs=false")
}
