package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/sandbox"
)

const sandboxUsage = "sandbox exec [flags] -- CMD [ARGS...]"

// sandboxFlags are `loom-eval sandbox exec`'s flags (the output flags
// aside).
type sandboxFlags struct {
	wall, cpu                                *time.Duration
	memory, output, fileSize, addrSpace, tmp byteSize
	tasks, openFiles                         *int
	workspace, stdinFile, egress             *string
	noSeccomp, verbose                       *bool
}

// register adds the flags, their defaults def.
func (f *sandboxFlags) register(fs *flag.FlagSet, def sandbox.Limits) {
	f.wall = fs.Duration("wall", def.WallTime, "wall-clock limit")
	f.cpu = fs.Duration("cpu", def.CPUTime, "CPU time limit (whole seconds; per process and for the whole tree)")
	f.memory = sizeFlag(fs, "memory", def.Memory, "memory limit for the whole tree (e.g. 256MiB)")
	f.tasks = fs.Int("tasks", def.Tasks, "limit on processes+threads of the tree (pids cgroup)")
	f.output = sizeFlag(fs, "output", def.Output, "bytes of stdout and of stderr kept; more kills the run")
	f.fileSize = sizeFlag(fs, "file-size", def.FileSize, "largest file the command may write (RLIMIT_FSIZE)")
	f.openFiles = fs.Int("open-files", def.OpenFiles, "open file limit (RLIMIT_NOFILE)")
	f.addrSpace = sizeFlag(fs, "address-space", def.AddressSpace, "address space of the command (RLIMIT_AS)")
	f.tmp = sizeFlag(fs, "tmp", def.Tmp, "size of the private /tmp")
	f.workspace = fs.String("workspace", "", "host directory mounted read-write at /work (default: a fresh temporary one)")
	f.stdinFile = fs.String("stdin", "", "file fed to the command's stdin ('-' for this process's stdin; default /dev/null)")
	f.noSeccomp = fs.Bool("no-seccomp", false, "run without the seccomp filter")
	f.egress = fs.String("egress", "", "JSON egress policy file (allow/deny/credentials; docs/sandbox.md); default: no network")
}

// limits are the run's limits, checked.
func (f *sandboxFlags) limits() (sandbox.Limits, error) {
	lim := sandbox.Limits{
		WallTime: *f.wall, CPUTime: *f.cpu, Memory: *f.memory.v, Tasks: *f.tasks, Output: *f.output.v,
		FileSize: *f.fileSize.v, OpenFiles: *f.openFiles, AddressSpace: *f.addrSpace.v, Tmp: *f.tmp.v,
	}
	if err := lim.Validate(); err != nil {
		return lim, usageError("sandbox exec: %v", err)
	}
	return lim, nil
}

// sandboxStdin is what --stdin feeds the command: nothing, this process's
// stdin (-) or a file.
func sandboxStdin(stdin io.Reader, path string) ([]byte, error) {
	switch path {
	case "":
		return nil, nil
	case "-":
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("sandbox exec: --stdin -: read stdin: %w", err)}
		}
		return b, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError("sandbox exec: --stdin: %v", err)
	}
	return b, nil
}

// loadEgress reads the --egress policy (nil without it: no network) and
// its credentials. Credential values come from this process's
// environment as getenv reads it (Main's), on the host; the sandbox never
// sees them.
func loadEgress(path string, getenv func(string) string) (*sandbox.Egress, error) {
	return loadEgressFor("sandbox exec", path, getenv)
}

// loadEgressFor is loadEgress for command cmd, which its errors name.
func loadEgressFor(cmd, path string, getenv func(string) string) (*sandbox.Egress, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, usageError("%s: --egress: %v", cmd, err)
	}
	egress, err := sandbox.ParseEgress(f, path)
	_ = f.Close()
	if err != nil {
		return nil, usageError("%s: --egress: %v", cmd, err)
	}
	if err := egress.LoadEgressCredentials(getenv); err != nil {
		return nil, usageError("%s: --egress: %v", cmd, err)
	}
	return egress, nil
}

// runSandbox runs one command in the sandbox and prints how it ended.
func (m *Main) runSandbox(ctx context.Context, args []string) error {
	// Until main() calls it first thing, the helper re-exec lands here.
	sandbox.Init()

	if len(args) == 0 || args[0] != "exec" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintf(m.Stderr, "Usage: loom-eval %s\n", sandboxUsage)
			return nil
		}
		return usageError("sandbox: want 'sandbox exec [flags] -- CMD ARGS'")
	}
	fs := m.newFlagSet("sandbox exec", sandboxUsage)
	var f sandboxFlags
	f.register(fs, sandbox.DefaultLimits())
	outFmt := m.addOutputFlags(fs, "text", "json")
	f.verbose = fs.Bool("v", false, "log sandbox housekeeping to stderr")
	if err := parseFlagsThenCommand(fs, args[1:]); err != nil {
		return err
	}
	format, err := outFmt.Format()
	if err != nil {
		return err
	}
	cmd := fs.Args()
	if len(cmd) == 0 {
		return usageError("sandbox exec: no command given (put it after --)")
	}
	lim, err := f.limits()
	if err != nil {
		return err
	}
	stdin, err := sandboxStdin(m.Stdin, *f.stdinFile)
	if err != nil {
		return err
	}
	egress, err := loadEgress(*f.egress, m.getenv)
	if err != nil {
		return err
	}
	logger := slog.New(slog.DiscardHandler)
	if *f.verbose {
		logger = slog.New(slog.NewTextHandler(m.Stderr, nil))
	}
	r, err := sandbox.New(sandbox.Config{Limits: lim, DisableSeccomp: *f.noSeccomp, Logger: logger, HelperArgs: []string{"sandbox"}})
	if err != nil {
		return usageError("%v", err)
	}
	if err := r.Start(ctx); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = r.Shutdown(sctx)
	}()
	res, err := r.Run(ctx, sandbox.Request{Command: cmd, Workspace: *f.workspace, Stdin: stdin, Egress: egress})
	if errors.Is(err, sandbox.ErrBadRequest) {
		// A command that does not exist or cannot be executed, a
		// --workspace that is not a folder: the input, not the sandbox.
		return usageError("sandbox exec: %v", err)
	}
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	return m.writeSandboxResult(res, format == "json")
}

// writeSandboxResult writes how the command ended, as JSON or text, to
// stdout; a command that did not exit 0 is a failure (exit 1).
func (m *Main) writeSandboxResult(res *sandbox.Result, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("write result: %w", err)}
		}
	} else {
		printSandboxResult(m.Stdout, res)
	}
	if !res.Exited || res.ExitCode != 0 {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("sandbox: command ended: %s", res.Summary())}
	}
	return nil
}

func printSandboxResult(w io.Writer, res *sandbox.Result) {
	fmt.Fprintf(w, "command:  %s\n", strings.Join(res.Command, " "))
	fmt.Fprintf(w, "result:   %s\n", res.Summary())
	for _, ev := range res.Evidence {
		fmt.Fprintf(w, "evidence: %s\n", ev)
	}
	fmt.Fprintf(w, "kernel:   pids.events max=%d, oom_kill=%d, memory limit hits=%d (cgroups: %s)\n",
		res.Counters.PidsMax, res.Counters.OOMKills, res.Counters.MemoryMax, res.Cgroups)
	stream := func(name, s string, truncated bool) {
		mark := ""
		if truncated {
			mark = fmt.Sprintf(" [truncated at %d bytes]", res.Limits.Output)
		}
		fmt.Fprintf(w, "--- %s (%d bytes)%s ---\n", name, len(s), mark)
		if s != "" {
			fmt.Fprint(w, s)
			if !strings.HasSuffix(s, "\n") {
				fmt.Fprintln(w)
			}
		}
	}
	if e := res.Egress; e != nil {
		fmt.Fprintf(w, "egress:   %d attempts recorded", len(e.Events))
		if e.Dropped > 0 {
			fmt.Fprintf(w, " (%d more not kept)", e.Dropped)
		}
		fmt.Fprintf(w, "; kernel: refusal device packets=%d, tcp resets=%d, ipv6 without route=%d\n",
			e.Kernel["refusal_device_packets"], e.Kernel["tcp_out_rsts"], e.Kernel["ipv6_out_no_routes"])
		for _, ev := range e.Events {
			dest := ev.Addr
			if ev.Host != "" {
				dest = ev.Host + " (" + ev.Addr + ")"
			}
			line := fmt.Sprintf("  %-5s %-4s %s: %s [%s]", ev.Verdict, ev.Proto, dest, ev.Reason, ev.Source)
			if ev.Credential != "" {
				line += " credential " + ev.Credential
			}
			if ev.Error != "" {
				line += " error: " + ev.Error
			}
			// Host names come from the sandbox (SNI, Host, DNS): escape controls.
			fmt.Fprintln(termSafe(w), line)
		}
	}
	stream("stdout", res.Stdout, res.StdoutTruncated)
	stream("stderr", res.Stderr, res.StderrTruncated)
}

// byteSize is a flag value accepting 123, 64KiB, 256MiB, 1GiB (also K/M/G, KB/MB/GB as powers of 1024).
type byteSize struct{ v *int64 }

func sizeFlag(fs *flag.FlagSet, name string, def int64, usage string) byteSize {
	v := new(int64)
	*v = def
	b := byteSize{v: v}
	fs.Var(b, name, usage)
	return b
}

func (b byteSize) String() string {
	if b.v == nil {
		return "0"
	}
	return strconv.FormatInt(*b.v, 10)
}

func (b byteSize) Set(s string) error {
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*b.v = n
	return nil
}

func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.m
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("want a size such as 1048576, 64KiB, 256MiB or 1GiB")
	}
	if n > (1<<62)/mult {
		return 0, errors.New("size too large")
	}
	return n * mult, nil
}

// lazySandbox is the sandbox the commands share: started on its first run
// (the helper re-executes this binary as "loom-eval sandbox"); stop shuts it
// down, with 15 s for the runs in flight, even after ctx is cancelled.
func lazySandbox(ctx context.Context) (*coding.LazySandbox, func() error) {
	return pooledSandbox(ctx, 0)
}

// pooledSandbox is lazySandbox keeping pool sandboxes started ahead of
// time once it starts (sandbox.Config.Pool: warm starts).
func pooledSandbox(ctx context.Context, pool int) (*coding.LazySandbox, func() error) {
	sb := &coding.LazySandbox{Config: sandbox.Config{HelperArgs: []string{"sandbox"}, Pool: pool}}
	return sb, func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		return sb.Shutdown(sctx)
	}
}
