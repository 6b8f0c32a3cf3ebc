// Package coding is the reference agent that writes Python and runs it in
// the sandbox (agents/sandbox). It shares nothing with the research agent but
// the runtime: a name, a system prompt and two tools.
//
//   - write_file puts a file into the run's workspace (a directory per run
//     id under Config.WorkRoot, mounted at /work inside the sandbox);
//   - run_python runs `/usr/bin/python3 -I FILE` there under conservative
//     limits (no network unless Config.Egress allows some, no host
//     filesystem, capped CPU, memory, processes, output and wall time) and
//     returns the exit status, the reason the run ended, the capped
//     stdout/stderr and the refused network attempts — never timings, so a
//     replay that re-executes the program compares equal. Each network
//     attempt and verdict is also a span event and a journaled tool event.
//
// A successful run's last stdout line is its evidence ("output:VALUE"), and
// the final answer cites it as [output:VALUE], so the scorer can tell a
// program that computed the value (retrieved) from an answer that reports it
// (cited).
//
// Policy is the scripted stand-in for a model: it carries a scripted play
// per task of the coding suite (Solutions) — it is not a coder, and says so
// — writes solution.py, runs it, fixes it after a traceback, and answers
// with what the sandbox printed. The suite grades the outcome, not the
// answer: each case's hidden tests (baselines/graders) import the
// solution.py the run wrote, and some plays fail them by design.
package coding

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/sandbox"
	"github.com/loomwork/loomwork/semconv"
)

// Name is the agent's registered name.
const Name = "coding"

// System is the agent's system prompt.
const System = "You solve tasks by writing a Python program with write_file and running it with run_python. " +
	"Read the program's output; if it fails, fix it and run it again. Answer with the result the program " +
	"printed and cite it as [output:VALUE], where VALUE is the last line it printed."

// Python is the interpreter run inside the sandbox (the python3 on PATH may
// be a shim outside /usr, which the sandbox does not mount).
const Python = "/usr/bin/python3"

// Sandbox runs one command; *sandbox.Runner implements it.
type Sandbox interface {
	Run(ctx context.Context, req sandbox.Request) (*sandbox.Result, error)
}

// Limits are the coding agent's conservative sandbox limits.
func Limits() sandbox.Limits {
	return sandbox.Limits{
		WallTime: 10 * time.Second, CPUTime: 5 * time.Second, Memory: 256 << 20, Tasks: 32,
		Output: 64 << 10, FileSize: 1 << 20, OpenFiles: 64, AddressSpace: 1 << 30, Tmp: 16 << 20,
	}
}

// DefaultContext is the context layer the coding agent's runs use unless
// told otherwise.
func DefaultContext() runtime.ContextSpec {
	return runtime.ContextSpec{Strategy: "shrink+summarise+pins", Budget: 8000, Tokenizer: runtime.TokenizerO200k, ToolResultMaxTokens: 700}
}

// Config configures the agent.
type Config struct {
	// Sandbox runs the programs. Required.
	Sandbox Sandbox
	// WorkRoot holds one workspace directory per run id. Required. Keep it
	// across restarts: a resumed run reuses recorded write_file results and
	// expects the files to be there.
	WorkRoot string
	// Limits for each run_python (zero fields: Limits()).
	Limits sandbox.Limits
	// MaxOutputChars caps stdout and stderr in the observation (default 4000).
	MaxOutputChars int
	// MaxFileBytes caps one written file (default 64 KiB).
	MaxFileBytes int
	// Egress is the network policy of every run_python; nil (the default)
	// means no network. Each attempt and verdict becomes a span event of the
	// call's execute_tool span and is journaled with its result (replay
	// compares them); refusals are also in the observation, so the model
	// can tell a refused connection from a broken program.
	Egress *sandbox.Egress
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Sandbox == nil {
		errs = append(errs, errors.New("coding: sandbox must be set"))
	}
	if c.WorkRoot == "" {
		errs = append(errs, errors.New("coding: work_root must be set"))
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("coding: %w", err))
	}
	if err := c.Egress.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("coding: %w", err))
	}
	if c.MaxOutputChars < 0 || c.MaxFileBytes < 0 {
		errs = append(errs, errors.New("coding: max_output_chars and max_file_bytes must not be negative"))
	}
	return errors.Join(errs...)
}

// New returns the coding agent.
func New(cfg Config) (runtime.Agent, error) {
	if err := cfg.Validate(); err != nil {
		return runtime.Agent{}, err
	}
	cfg.Limits = cfg.Limits.Or(Limits())
	if cfg.MaxOutputChars == 0 {
		cfg.MaxOutputChars = 4000
	}
	if cfg.MaxFileBytes == 0 {
		cfg.MaxFileBytes = 64 << 10
	}
	return runtime.Agent{Name: Name, System: System, Tools: []runtime.Tool{writeFile(cfg), runPython(cfg)}, Citations: Citations}, nil
}

// Register adds the coding agent to reg.
func Register(reg *runtime.Registry, cfg Config) error {
	a, err := New(cfg)
	if err != nil {
		return err
	}
	return reg.Register(a)
}

var pathPart = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// cleanPath checks a workspace-relative path: at most three components of
// letters, digits, '_', '.', '-', none starting with '.'.
func cleanPath(p string) (string, error) {
	if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return "", fmt.Errorf("path %q: want a clean relative path such as main.py", p)
	}
	parts := strings.Split(p, "/")
	if len(parts) > 3 {
		return "", fmt.Errorf("path %q: at most 3 components", p)
	}
	for _, s := range parts {
		if !pathPart.MatchString(s) {
			return "", fmt.Errorf("path %q: component %q may use only letters, digits, '_', '.', '-' and must not start with '.'", p, s)
		}
	}
	return p, nil
}

// workspace is the run's directory (created on demand).
func workspace(root, runID string) (string, error) {
	sum := sha256.Sum256([]byte(runID))
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, runID)
	if len(safe) > 64 {
		safe = safe[:64]
	}
	dir := filepath.Join(root, safe+"-"+hex.EncodeToString(sum[:4]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("make workspace: %w", err)
	}
	return dir, nil
}

func writeFile(cfg Config) runtime.Tool {
	return runtime.Tool{
		Name:        "write_file",
		Description: "Write a text file into the workspace (e.g. main.py). Overwrites an existing file.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
			"path":{"type":"string","minLength":1,"maxLength":200},
			"content":{"type":"string","maxLength":65536}},
			"required":["path","content"],"additionalProperties":false}`),
		Run: func(_ context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
			var a struct{ Path, Content string }
			if err := json.Unmarshal(in.Arguments, &a); err != nil {
				return runtime.ToolOutput{}, err
			}
			p, err := cleanPath(a.Path)
			if err != nil {
				return runtime.ToolOutput{}, err
			}
			if len(a.Content) > cfg.MaxFileBytes {
				return runtime.ToolOutput{}, fmt.Errorf("content is %d bytes, over the %d-byte limit", len(a.Content), cfg.MaxFileBytes)
			}
			ws, err := workspace(cfg.WorkRoot, in.RunID)
			if err != nil {
				return runtime.ToolOutput{}, err
			}
			full := filepath.Join(ws, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				return runtime.ToolOutput{}, fmt.Errorf("write %s: %w", p, err)
			}
			// The sandboxed program owns the workspace and could have left a
			// symlink here: never follow one from the host.
			if fi, err := os.Lstat(full); err == nil && !fi.Mode().IsRegular() {
				return runtime.ToolOutput{}, fmt.Errorf("write %s: exists and is not a regular file", p)
			}
			tmp := full + ".loomwork-tmp"
			if err := os.WriteFile(tmp, []byte(a.Content), 0o644); err != nil {
				return runtime.ToolOutput{}, fmt.Errorf("write %s: %w", p, err)
			}
			if err := os.Rename(tmp, full); err != nil {
				return runtime.ToolOutput{}, fmt.Errorf("write %s: %w", p, err)
			}
			sum := sha256.Sum256([]byte(a.Content))
			b, _ := json.Marshal(map[string]any{"path": p, "bytes": len(a.Content), "sha256": hex.EncodeToString(sum[:8])})
			return runtime.ToolOutput{Content: string(b)}, nil
		},
	}
}

// RunResult is run_python's observation.
type RunResult struct {
	Path            string `json:"path"`
	Exited          bool   `json:"exited"`
	ExitCode        int    `json:"exit_code"`
	Signal          string `json:"signal,omitempty"`
	Reason          string `json:"reason"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	// Refused lists the network attempts the egress policy refused, one
	// line each ("tcp 192.0.2.1:80: reason"), sorted, without repeats.
	Refused []string `json:"network_refused,omitempty"`
}

func runPython(cfg Config) runtime.Tool {
	desc := "Run a Python file from the workspace with /usr/bin/python3 -I in the sandbox (no network, 10 s wall, 5 s CPU, 256 MiB). Returns the exit status, why it ended, stdout and stderr."
	if cfg.Egress != nil {
		desc = "Run a Python file from the workspace with /usr/bin/python3 -I in the sandbox (network only to the hosts the run's egress policy allows, 10 s wall, 5 s CPU, 256 MiB). Returns the exit status, why it ended, stdout, stderr and the network attempts the policy refused."
	}
	return runtime.Tool{
		Name:        "run_python",
		Description: desc,
		Parameters: json.RawMessage(`{"type":"object","properties":{
			"path":{"type":"string","minLength":1,"maxLength":200},
			"stdin":{"type":"string","maxLength":65536}},
			"required":["path"],"additionalProperties":false}`),
		Run: func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
			var a struct{ Path, Stdin string }
			if err := json.Unmarshal(in.Arguments, &a); err != nil {
				return runtime.ToolOutput{}, err
			}
			p, err := cleanPath(a.Path)
			if err != nil {
				return runtime.ToolOutput{}, err
			}
			ws, err := workspace(cfg.WorkRoot, in.RunID)
			if err != nil {
				return runtime.ToolOutput{}, err
			}
			if fi, err := os.Lstat(filepath.Join(ws, filepath.FromSlash(p))); err != nil || !fi.Mode().IsRegular() {
				return runtime.ToolOutput{}, fmt.Errorf("no file %s in the workspace (write it with write_file first)", p)
			}
			req := sandbox.Request{Command: []string{Python, "-I", p}, Workspace: ws, Limits: cfg.Limits, Egress: cfg.Egress}
			if a.Stdin != "" {
				req.Stdin = []byte(a.Stdin)
			}
			res, err := cfg.Sandbox.Run(ctx, req)
			if err != nil {
				return runtime.ToolOutput{}, fmt.Errorf("sandbox: %w", err)
			}
			out := RunResult{Path: p, Exited: res.Exited, ExitCode: res.ExitCode, Signal: res.Signal, Reason: string(res.Reason),
				StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated}
			out.Stdout, out.StdoutTruncated = capText(res.Stdout, cfg.MaxOutputChars, out.StdoutTruncated)
			out.Stderr, out.StderrTruncated = capText(res.Stderr, cfg.MaxOutputChars, out.StderrTruncated)
			events, refused := egressRecords(res.Egress)
			out.Refused = refused
			b, err := json.Marshal(out)
			if err != nil {
				return runtime.ToolOutput{}, err
			}
			var docs []string
			if res.Exited && res.ExitCode == 0 {
				if ev := OutputEvidence(res.Stdout); ev != "" {
					docs = []string{ev}
				}
			}
			start := semconv.SandboxStartCold
			if res.Warm {
				start = semconv.SandboxStartWarm
			}
			return runtime.ToolOutput{Content: string(b), Documents: docs, Events: events,
				Attrs: map[string]string{semconv.AttrSandboxStart: start}}, nil
		},
	}
}

func capText(s string, n int, already bool) (string, bool) {
	r := []rune(s)
	if len(r) <= n {
		return s, already
	}
	return string(r[:n]), true
}

// OutputEvidence is the evidence id of a program's output: "output:" and its
// last non-empty stdout line (at most 200 characters), or "" for none. The
// line may hold brackets — a printed list is the value of many tasks — as
// long as they balance, so [output:VALUE] reads back as one citation; a
// line whose brackets do not balance cannot be cited and is no evidence.
func OutputEvidence(stdout string) string {
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if r := []rune(last); len(r) > 200 {
		last = strings.TrimSpace(string(r[:200]))
	}
	if last == "" || !balanced(last) {
		return ""
	}
	return "output:" + last
}

// balanced reports whether every ']' in s closes an earlier '['.
func balanced(s string) bool {
	depth := 0
	for _, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			if depth--; depth < 0 {
				return false
			}
		}
	}
	return depth == 0
}

// Citations extracts the [output:VALUE] citations of an answer: from each
// "[output:" to the ']' that balances its '[' on the same line.
func Citations(answer string) []string {
	var out []string
	const open = "[output:"
	for rest := answer; ; {
		i := strings.Index(rest, open)
		if i < 0 {
			return out
		}
		rest = rest[i+1:]
		depth, end := 1, -1
	scan:
		for j, r := range rest {
			switch r {
			case '\n':
				break scan
			case '[':
				depth++
			case ']':
				if depth--; depth == 0 {
					end = j
					break scan
				}
			}
		}
		if end < 0 {
			continue
		}
		if id := strings.TrimSpace(rest[:end]); id != "output:" && !slices.Contains(out, id) {
			out = append(out, id)
		}
		rest = rest[end+1:]
	}
}

// LazySandbox starts a sandbox runner on the first run, so registering the
// agent (e.g. for `loom-eval replay` of other agents' journals) probes
// nothing. A failed start is retried on the next run.
type LazySandbox struct {
	Config sandbox.Config

	mu sync.Mutex
	r  *sandbox.Runner
}

// Run implements Sandbox.
func (l *LazySandbox) Run(ctx context.Context, req sandbox.Request) (*sandbox.Result, error) {
	r, err := l.runner(ctx)
	if err != nil {
		return nil, err
	}
	return r.Run(ctx, req)
}

// Start starts the runner now rather than on the first run, so a warm
// pool (Config.Pool) fills while the agent's first steps happen and its
// first run can claim a warm sandbox. Starting again is a no-op.
func (l *LazySandbox) Start(ctx context.Context) error {
	_, err := l.runner(ctx)
	return err
}

// runner is the started runner, starting it if need be.
func (l *LazySandbox) runner(ctx context.Context) (*sandbox.Runner, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.r == nil {
		r, err := sandbox.New(l.Config)
		if err == nil {
			err = r.Start(ctx)
		}
		if err != nil {
			return nil, err
		}
		l.r = r
	}
	return l.r, nil
}

// Shutdown stops the runner if it was started.
func (l *LazySandbox) Shutdown(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.r == nil {
		return nil
	}
	err := l.r.Shutdown(ctx)
	l.r = nil
	return err
}

// egressRecords turns a run's egress report into tool events (one per
// attempt, without times, sorted: the proxy records concurrent connections
// in the order they happen, which a replay need not repeat) and the refusal
// lines of the observation.
func egressRecords(rep *sandbox.EgressReport) ([]journal.ToolEvent, []string) {
	if rep == nil {
		return nil, nil
	}
	events := make([]journal.ToolEvent, 0, len(rep.Events))
	var refused []string
	for _, e := range rep.Events {
		attrs := map[string]string{
			semconv.AttrEgressProto: e.Proto, semconv.AttrEgressVia: e.Via, semconv.AttrEgressVerdict: e.Verdict,
			semconv.AttrEgressReason: e.Reason, semconv.AttrEgressSource: e.Source,
		}
		for k, v := range map[string]string{semconv.AttrEgressHost: e.Host, semconv.AttrEgressAddr: e.Addr,
			semconv.AttrEgressRule: e.Rule, semconv.AttrEgressCredential: e.Credential, semconv.AttrEgressError: e.Error} {
			if v != "" {
				attrs[k] = v
			}
		}
		events = append(events, journal.ToolEvent{Name: semconv.EventSandboxEgress, Attrs: attrs})
		if e.Verdict == "deny" {
			dest := e.Addr
			if e.Host != "" {
				dest = e.Host + " (" + e.Addr + ")"
			}
			if line := e.Proto + " " + dest + ": " + e.Reason; !slices.Contains(refused, line) {
				refused = append(refused, line)
			}
		}
	}
	slices.SortFunc(events, func(a, b journal.ToolEvent) int { return strings.Compare(a.String(), b.String()) })
	slices.Sort(refused)
	return events, refused
}
