package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// runSeq numbers runs across every Runner of the process: cgroup names are
// per owner process, so two runners (a pooled and a plain one) must not
// count separately.
var runSeq atomic.Uint64

// errHelperGone marks a helper that ended before it read its configuration.
var errHelperGone = errors.New("the helper is gone")

// ErrBadRequest is matched (errors.Is) by the errors Run returns for a
// request at fault rather than the sandbox: one that does not validate, a
// workspace that is missing or not a directory, an egress policy that does
// not load, a command that cannot be started (not found, not executable,
// not a program). Every other error Run returns is the sandbox's own.
var ErrBadRequest = errors.New("bad sandbox request")

// badRequest marks err as the request's fault, its message unchanged.
func badRequest(err error) error { return requestError{err} }

type requestError struct{ err error }

func (e requestError) Error() string   { return e.err.Error() }
func (e requestError) Unwrap() []error { return []error{e.err, ErrBadRequest} }

// ErrShutdown is returned by Run after Shutdown.
var ErrShutdown = errors.New("sandbox: runner is shut down")

// Runner runs commands in sandboxes. It is safe for concurrent use.
type Runner struct {
	cfg Config

	layout     cgroupLayout
	ownerPid   int
	ownerStart uint64

	mu       sync.Mutex
	started  bool
	shutdown bool
	inflight sync.WaitGroup
	stop     context.CancelFunc
	stopCtx  context.Context

	pool      chan *spawned // ready helpers (Config.Pool); nil without a pool
	poolSlots chan struct{} // free places in the pool, taken by the filler
	poolDone  sync.WaitGroup
}

// New validates cfg and returns a Runner. It does no I/O; Start probes the
// machine.
func New(cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sandbox config: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Runner{cfg: cfg.withDefaults(), stopCtx: ctx, stop: cancel}, nil
}

// Start checks that the machine has every mechanism the configuration needs
// (namespaces, cgroup controllers, seccomp) and refuses, naming the missing
// one, if not. It also removes cgroups left behind by a crashed process.
func (r *Runner) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shutdown {
		return ErrShutdown
	}
	if r.started {
		return nil
	}
	for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		if _, err := os.Stat("/proc/self/ns/" + ns); err != nil {
			return fmt.Errorf("sandbox: %s namespaces are not available: %w", ns, err)
		}
	}
	if !r.cfg.DisableSeccomp && !seccompSupported() {
		return errors.New("sandbox: seccomp filters are not supported by this kernel (set DisableSeccomp to run without)")
	}
	if fi, err := os.Stat(r.cfg.Executable); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("sandbox: helper executable %s: not a regular file (%v)", r.cfg.Executable, err)
	}
	layout, err := detectCgroups(r.cfg.CgroupParent)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	r.layout = layout
	r.ownerPid = os.Getpid()
	if r.ownerStart, err = processStart(r.ownerPid); err != nil {
		return fmt.Errorf("sandbox: read own start time: %w", err)
	}
	removed, err := sweepStale(ctx, layout)
	for _, d := range removed {
		r.cfg.Logger.Info("removed stale sandbox cgroup", "cgroup", d)
	}
	if err != nil {
		return fmt.Errorf("sandbox: remove stale cgroups: %w", err)
	}
	r.started = true
	if r.cfg.Pool > 0 {
		r.pool = make(chan *spawned, r.cfg.Pool)
		r.poolSlots = make(chan struct{}, r.cfg.Pool)
		for range r.cfg.Pool {
			r.poolSlots <- struct{}{}
		}
		r.poolDone.Add(1)
		go r.fillPool()
	}
	return nil
}

// Layout names the cgroup layout found by Start ("v2" or "hybrid").
func (r *Runner) Layout() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.layout == nil {
		return ""
	}
	return r.layout.name()
}

// Shutdown kills in-flight runs and waits for their cleanup. It is safe to
// call more than once, and without Start.
func (r *Runner) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	r.shutdown = true
	r.mu.Unlock()
	r.stop()
	done := make(chan struct{})
	go func() { r.inflight.Wait(); r.poolDone.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sandbox shutdown: %w", ctx.Err())
	}
}

// Run runs one command and returns how it ended. An error means the sandbox
// itself failed (or refused); a command that fails, crashes or hits a limit
// is a Result, not an error.
func (r *Runner) Run(ctx context.Context, req Request) (*Result, error) {
	began := r.cfg.Now()
	if err := req.Validate(); err != nil {
		return nil, badRequest(fmt.Errorf("sandbox request: %w", err))
	}
	r.mu.Lock()
	switch {
	case r.shutdown:
		r.mu.Unlock()
		return nil, ErrShutdown
	case !r.started:
		r.mu.Unlock()
		return nil, errors.New("sandbox: Run before Start")
	}
	r.inflight.Add(1)
	r.mu.Unlock()
	defer r.inflight.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopAfter := context.AfterFunc(r.stopCtx, cancel)
	defer stopAfter()

	lim := req.Limits.Or(r.cfg.Limits)
	ws := req.Workspace
	if ws == "" {
		dir, err := os.MkdirTemp("", "loomwork-sandbox-ws-")
		if err != nil {
			return nil, fmt.Errorf("sandbox: make workspace: %w", err)
		}
		defer os.RemoveAll(dir)
		ws = dir
	}
	// The helper that mounts the workspace starts in "/", so a relative
	// path must be resolved here, against the caller's directory.
	ws, err := filepath.Abs(ws)
	if err != nil {
		return nil, fmt.Errorf("sandbox: workspace %s: %w", req.Workspace, err)
	}
	if err := r.prepareWorkspace(ws); err != nil {
		return nil, err
	}

	policy, err := req.Egress.prepared()
	if err != nil {
		return nil, badRequest(fmt.Errorf("sandbox request: %w", err))
	}
	sp, pooled, err := r.claim(lim.Memory, lim.Tasks)
	if err != nil {
		return nil, err
	}
	cg := sp.cg
	if pooled && (sp.memory != lim.Memory || sp.tasks != lim.Tasks) {
		// The pool made the cgroups with the runner's limits; the command
		// cgroup is still empty, so the request's limits can be set now.
		if err := cg.setLimits(lim.Memory, lim.Tasks); err != nil {
			return nil, errors.Join(fmt.Errorf("sandbox: %w", err), sp.destroy())
		}
	}
	x := &run{r: r, req: req, lim: lim, ws: ws, cg: cg, name: sp.name, sp: sp, egress: policy, pooled: pooled, began: began}
	res, runErr := x.execute(ctx)
	// Whatever happened, nothing of the run may outlive it.
	cleanCtx, cleanCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cleanCancel()
	cleanErr := errors.Join(cg.killAll(cleanCtx), cg.remove(cleanCtx))
	if pooled && errors.Is(runErr, errHelperGone) && cleanErr == nil {
		// The pooled helper died before it took the request (nothing of
		// the command ran): run it once more on a helper of its own.
		r.cfg.Logger.Warn("sandbox pool: a claimed helper was gone; starting a fresh one", "cgroup", sp.name, "err", runErr)
		if sp, err = r.spawn(lim.Memory, lim.Tasks); err != nil {
			return nil, err
		}
		cg = sp.cg
		x = &run{r: r, req: req, lim: lim, ws: ws, cg: cg, name: sp.name, sp: sp, egress: policy, began: began}
		res, runErr = x.execute(ctx)
		cleanErr = errors.Join(cg.killAll(cleanCtx), cg.remove(cleanCtx))
	}
	if runErr != nil {
		return nil, errors.Join(runErr, cleanErr)
	}
	if cleanErr != nil {
		return nil, fmt.Errorf("sandbox: clean up run: %w", cleanErr)
	}
	return res, nil
}

// prepareWorkspace checks the workspace and gives it to the sandbox uid.
func (r *Runner) prepareWorkspace(ws string) error {
	fi, err := os.Lstat(ws)
	if err != nil {
		err = fmt.Errorf("sandbox: workspace: %w", err)
		if errors.Is(err, os.ErrNotExist) {
			err = badRequest(err)
		}
		return err
	}
	if !fi.IsDir() {
		return badRequest(fmt.Errorf("sandbox: workspace %s: not a directory (symlinks are not followed)", ws))
	}
	if err := os.Lchown(ws, r.cfg.HostUID, r.cfg.HostGID); err != nil {
		return fmt.Errorf("sandbox: give workspace %s to uid %d: %w", ws, r.cfg.HostUID, err)
	}
	return nil
}

// run is the state of one execution.
type run struct {
	r    *Runner
	req  Request
	lim  Limits
	ws   string
	cg   runCgroup
	name string
	sp   *spawned // the helper, fresh or from the pool; used once

	pooled   bool       // sp came from the pool
	began    time.Time  // Run was called
	released time.Time  // the command was let go (set by the status goroutine)
	egress   *Egress    // validated policy; nil: no network
	net      *egressNet // its proxy, set during the hand-off
}

// capture keeps the first max bytes of a stream and signals once on overflow.
type capture struct {
	max       int64
	buf       bytes.Buffer
	truncated bool
	overflow  func()
}

func (c *capture) readFrom(r io.Reader) {
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		if n > 0 && !c.truncated {
			room := c.max - int64(c.buf.Len())
			if int64(n) > room {
				c.buf.Write(chunk[:room])
				c.truncated = true
				c.overflow()
			} else {
				c.buf.Write(chunk[:n])
			}
		}
		if err != nil {
			return
		}
	}
}

// spawned is a helper started in its namespaces and cgroups, waiting for
// its configuration: what a run needs before anything of the request is
// known. The pool keeps some ready; a run without one makes its own.
type spawned struct {
	proc                           *os.Process
	cg                             runCgroup
	name                           string
	memory                         int64 // limits the cgroups were made with
	tasks                          int
	cfgW, statusR, outR, errR, inW *os.File
}

// spawn makes a run's cgroups and starts the helper inside them, in new
// namespaces. The helper waits for its configuration on the pipe.
func (r *Runner) spawn(memory int64, tasks int) (*spawned, error) {
	cfg := r.cfg
	name := runCgroupName(r.ownerPid, r.ownerStart, runSeq.Add(1))
	cg, err := r.layout.create(name, memory, tasks)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	closeAll := func(fs ...*os.File) {
		for _, f := range fs {
			if f != nil {
				_ = f.Close()
			}
		}
	}
	fail := func(err error, fs ...*os.File) (*spawned, error) {
		closeAll(fs...)
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return nil, errors.Join(err, cg.remove(cctx))
	}
	// Stdin is always a pipe: the helper gives the command /dev/null
	// instead when the request has no stdin, so a pooled helper need not
	// know in advance.
	var p [5][2]*os.File
	for i := range p {
		if p[i][0], p[i][1], err = os.Pipe(); err != nil {
			var open []*os.File
			for j := 0; j < i; j++ {
				open = append(open, p[j][0], p[j][1])
			}
			return fail(fmt.Errorf("sandbox: make pipe: %w", err), open...)
		}
	}
	cfgR, cfgW := p[0][0], p[0][1]
	statusR, statusW := p[1][0], p[1][1]
	outR, outW := p[2][0], p[2][1]
	errR, errW := p[3][0], p[3][1]
	inR, inW := p[4][0], p[4][1]
	proc, err := os.StartProcess(cfg.Executable, append([]string{helperArg0}, cfg.HelperArgs...), &os.ProcAttr{
		Dir:   "/",
		Env:   []string{helperEnv + "=" + helperEnvValue, "GOMAXPROCS=1"},
		Files: []*os.File{inR, outW, errW, cfgR, statusW},
		Sys: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
				syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP,
			UidMappings: []syscall.SysProcIDMap{
				{ContainerID: 0, HostID: 0, Size: 1},
				{ContainerID: sandboxUID, HostID: cfg.HostUID, Size: 1},
			},
			GidMappings: []syscall.SysProcIDMap{
				{ContainerID: 0, HostID: 0, Size: 1},
				{ContainerID: sandboxGID, HostID: cfg.HostGID, Size: 1},
			},
			// setgroups stays allowed so the helper can drop the host's
			// supplementary groups before anything runs.
			GidMappingsEnableSetgroups: true,
			Credential:                 &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}},
			Setpgid:                    true,
			Pdeathsig:                  syscall.SIGKILL,
			UseCgroupFD:                true,
			CgroupFD:                   cg.placementFD(),
		},
	})
	closeAll(cfgR, statusW, outW, errW, inR)
	if err != nil {
		return fail(fmt.Errorf("sandbox: start helper %s: %w", cfg.Executable, err), cfgW, statusR, outR, errR, inW)
	}
	return &spawned{proc: proc, cg: cg, name: name, memory: memory, tasks: tasks,
		cfgW: cfgW, statusR: statusR, outR: outR, errR: errR, inW: inW}, nil
}

// destroy ends a helper that never ran a command and removes its cgroups.
func (sp *spawned) destroy() error {
	_ = syscall.Kill(-sp.proc.Pid, syscall.SIGKILL)
	_, _ = sp.proc.Wait()
	for _, f := range []*os.File{sp.cfgW, sp.statusR, sp.outR, sp.errR, sp.inW} {
		_ = f.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return errors.Join(sp.cg.killAll(ctx), sp.cg.remove(ctx))
}

func (x *run) execute(ctx context.Context) (*Result, error) {
	cfg := x.r.cfg
	sp := x.sp
	proc, cfgW, statusR, outR, errR := sp.proc, sp.cfgW, sp.statusR, sp.outR, sp.errR
	inW := sp.inW
	if x.req.Stdin == nil {
		_ = inW.Close()
		inW = nil
	}
	defer func() {
		for _, f := range []*os.File{cfgW, statusR, outR, errR, inW} {
			if f != nil {
				_ = f.Close()
			}
		}
	}()
	start := cfg.Now()
	pid := proc.Pid
	killTree := func() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		kctx, kcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer kcancel()
		_ = x.cg.killAll(kctx)
	}

	hc := helperConfig{
		Command:      x.req.Command,
		Env:          x.req.Env,
		Workspace:    x.ws,
		CPUSeconds:   uint64((x.lim.CPUTime + time.Second - 1) / time.Second),
		FileSize:     uint64(x.lim.FileSize),
		OpenFiles:    uint64(x.lim.OpenFiles),
		AddressSpace: uint64(x.lim.AddressSpace),
		Tmp:          x.lim.Tmp,
		Seccomp:      !cfg.DisableSeccomp,
		Stdin:        x.req.Stdin != nil,
	}
	cfgJSON, _ := json.Marshal(hc)
	if _, err := cfgW.Write(append(cfgJSON, '\n')); err != nil {
		killTree()
		_, _ = proc.Wait()
		return nil, fmt.Errorf("sandbox: send config to helper: %w: %w", errHelperGone, err)
	}

	// The helper's messages: {"stopped":true} once the command waits at its
	// exec (we move it into the command cgroup and answer "go"), then its
	// final status.
	type statusOutcome struct {
		st       helperStatus
		have     bool
		protoErr error
	}
	statusCh := make(chan statusOutcome, 1)
	go func() {
		var out statusOutcome
		defer func() { _ = cfgW.Close(); statusCh <- out }()
		rd := bufio.NewReader(io.LimitReader(statusR, 1<<20))
		for {
			line, err := rd.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				var msg struct {
					helperStopped
					helperStatus
				}
				if jerr := json.Unmarshal(line, &msg); jerr != nil {
					out.protoErr = fmt.Errorf("read helper status: %w", jerr)
					return
				}
				if msg.Stopped {
					if herr := x.handoff(pid); herr != nil {
						out.protoErr = herr
						return // closing cfgW without "go" makes the helper kill the command
					}
					if _, werr := cfgW.Write([]byte("go\n")); werr != nil {
						out.protoErr = fmt.Errorf("release command: %w", werr)
						return
					}
					x.released = cfg.Now()
					continue
				}
				out.st, out.have = msg.helperStatus, true
			}
			if err != nil {
				return
			}
		}
	}()

	var wg sync.WaitGroup
	overflow := make(chan struct{})
	var overflowOnce sync.Once
	signalOverflow := func() { overflowOnce.Do(func() { close(overflow) }) }
	stdout := &capture{max: x.lim.Output, overflow: signalOverflow}
	stderr := &capture{max: x.lim.Output, overflow: signalOverflow}
	wg.Add(2)
	go func() { defer wg.Done(); stdout.readFrom(outR) }()
	go func() { defer wg.Done(); stderr.readFrom(errR) }()
	if inW != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = inW.Write(x.req.Stdin)
			_ = inW.Close()
		}()
	}

	type waited struct {
		state *os.ProcessState
		err   error
	}
	done := make(chan waited, 1)
	go func() {
		st, err := proc.Wait()
		done <- waited{st, err}
	}()

	wall := time.NewTimer(x.lim.WallTime)
	defer wall.Stop()
	// The tree's CPU budget: RLIMIT_CPU stops any one process, this stops a
	// tree that spreads its work over many.
	cpuPoll := time.NewTicker(clampDuration(x.lim.CPUTime/10, 20*time.Millisecond, 250*time.Millisecond))
	defer cpuPoll.Stop()

	var killReason Reason
	var killEvidence string
	var w waited
wait:
	for {
		select {
		case w = <-done:
			break wait
		case <-wall.C:
			killReason, killEvidence = ReasonTimeout, fmt.Sprintf("wall clock limit %s reached", x.lim.WallTime)
		case <-ctx.Done():
			killReason, killEvidence = ReasonCancelled, fmt.Sprintf("context ended: %v", context.Cause(ctx))
		case <-overflow:
			killReason, killEvidence = ReasonOutput, fmt.Sprintf("output passed the %d-byte limit", x.lim.Output)
		case <-cpuPoll.C:
			used := x.cg.counters().CPUUsage
			if used < x.lim.CPUTime+x.lim.CPUTime/10 {
				continue
			}
			killReason, killEvidence = ReasonCPU, fmt.Sprintf("cgroup cpu.stat usage_usec=%d passed the tree's %s CPU budget", used.Microseconds(), x.lim.CPUTime)
		}
		killTree()
		w = <-done
		break
	}
	wallTime := cfg.Now().Sub(start)
	// The helper is gone, so its pid namespace is gone; sweep the cgroup for
	// anything that escaped the namespace teardown before reading the pipes
	// to their end (every writer must be dead for EOF).
	killTree()
	readersDone := make(chan struct{})
	go func() { wg.Wait(); close(readersDone) }()
	select {
	case <-readersDone:
	case <-time.After(5 * time.Second):
		// A writer we cannot see is keeping a pipe open; stop reading.
		_ = outR.SetReadDeadline(time.Now())
		_ = errR.SetReadDeadline(time.Now())
		if inW != nil {
			_ = inW.SetWriteDeadline(time.Now())
		}
		<-readersDone
	}
	// The helper is gone, so the status pipe ends: the status goroutine
	// (which starts the egress proxy during the hand-off) is done with
	// x.net after this receive, and the proxy is closed on every path.
	so := <-statusCh
	var egressReport *EgressReport
	if x.net != nil {
		egressReport = x.net.close()
	}
	if w.err != nil {
		return nil, fmt.Errorf("sandbox: wait for helper: %w", w.err)
	}
	st, haveStatus := so.st, so.have
	if x.pooled && killReason == "" && !haveStatus && x.released.IsZero() && so.protoErr == nil {
		// A pooled helper that died while it waited can still take its
		// configuration (a process of its namespace being torn down holds
		// the pipe for a moment, so the write succeeds): it never stopped at
		// the command's exec, so nothing of the request ran, and the run is
		// started again on a fresh helper, as when the write fails.
		return nil, fmt.Errorf("sandbox: %w: it ended (%v) before the command was handed off", errHelperGone, w.state)
	}
	if so.protoErr != nil {
		return nil, fmt.Errorf("sandbox: %w", so.protoErr)
	}
	if st.SetupError != "" {
		return nil, fmt.Errorf("sandbox: set up: %s", st.SetupError)
	}
	if st.StartError != "" {
		err := fmt.Errorf("sandbox: %s", st.StartError)
		if st.BadCommand {
			err = badRequest(err)
		}
		return nil, err
	}

	res := &Result{
		Command:         x.req.Command,
		Stdout:          stdout.buf.String(),
		Stderr:          stderr.buf.String(),
		StdoutTruncated: stdout.truncated,
		StderrTruncated: stderr.truncated,
		WallTime:        wallTime,
		Limits:          x.lim,
		Counters:        x.cg.counters(),
		Cgroups:         x.r.layout.name(),
		Cgroup:          x.name,
		Egress:          egressReport,
		Warm:            x.pooled,
	}
	if !x.released.IsZero() {
		res.Startup = x.released.Sub(x.began)
	}
	switch {
	case haveStatus && st.Started && st.Exited:
		res.Exited, res.ExitCode = true, st.ExitCode
	case haveStatus && st.Started && st.Signal != 0:
		res.Signal = unix.SignalName(syscall.Signal(st.Signal))
		res.ExitCode = -1
	default:
		// The helper itself was killed (timeout, OOM, ...) before reporting.
		ws, _ := w.state.Sys().(syscall.WaitStatus)
		res.ExitCode = -1
		if ws.Signaled() {
			res.Signal = unix.SignalName(ws.Signal())
		} else {
			res.Signal = "SIGKILL"
		}
	}
	res.CPUTime = res.Counters.CPUUsage
	if res.CPUTime == 0 {
		res.CPUTime = time.Duration(st.UserUsec+st.SysUsec) * time.Microsecond
	}
	res.PeakMemory = res.Counters.PeakMemory
	if res.PeakMemory == 0 {
		res.PeakMemory = st.MaxRSSKiB << 10
	}
	res.Reason, res.Evidence = classify(x.r.layout.name(), x.lim, killReason, killEvidence, res, &st)
	return res, nil
}

// classify decides why the run ended. Our own kills come first (we know
// why we killed), then kernel counters, then signals and exit codes.
func classify(layout string, lim Limits, killReason Reason, killEvidence string, res *Result, st *helperStatus) (Reason, []string) {
	var evidence []string
	reason := Reason("")
	set := func(r Reason, ev string) {
		if reason == "" {
			reason = r
		}
		evidence = append(evidence, ev)
	}
	if killReason != "" {
		set(killReason, killEvidence)
	}
	c := res.Counters
	if c.OOMKills > 0 {
		src := "memory.events oom_kill"
		if layout == "hybrid" {
			src = "memory.oom_control oom_kill"
		}
		set(ReasonMemory, fmt.Sprintf("%s=%d (limit %d bytes)", src, c.OOMKills, lim.Memory))
	}
	if res.Signal == "SIGXCPU" {
		set(ReasonCPU, fmt.Sprintf("killed by SIGXCPU: RLIMIT_CPU of %s reached", lim.CPUTime))
	} else if res.Signal == "SIGKILL" && st.UserUsec+st.SysUsec >= lim.CPUTime.Microseconds() && st.Started {
		set(ReasonCPU, fmt.Sprintf("killed by SIGKILL after %dus of CPU: RLIMIT_CPU hard limit", st.UserUsec+st.SysUsec))
	}
	if res.Signal == "SIGXFSZ" {
		set(ReasonFileSize, fmt.Sprintf("killed by SIGXFSZ: RLIMIT_FSIZE of %d bytes reached", lim.FileSize))
	} else if len(st.BigFiles) > 0 {
		set(ReasonFileSize, fmt.Sprintf("file at the RLIMIT_FSIZE limit of %d bytes: %s", lim.FileSize, strings.Join(st.BigFiles, ", ")))
	}
	if c.PidsMax > 0 {
		set(ReasonPids, fmt.Sprintf("pids.events max=%d (forks refused at the limit of %d tasks)", c.PidsMax, lim.Tasks))
	}
	if strings.Contains(res.Stderr, "Too many open files") {
		set(ReasonOpenFiles, fmt.Sprintf("stderr reports EMFILE (\"Too many open files\"); RLIMIT_NOFILE is %d", lim.OpenFiles))
	}
	if reason == "" {
		if res.Exited {
			reason = ReasonExit
		} else {
			reason = ReasonSignal
			evidence = append(evidence, "killed by "+res.Signal)
		}
	}
	return reason, evidence
}

func clampDuration(d, lo, hi time.Duration) time.Duration {
	return max(lo, min(d, hi))
}

// handoff moves the command, stopped at its exec, from the helper's cgroup
// into the command cgroup whose pids.max is the caller's limit.
func (x *run) handoff(helperPid int) error {
	pids, err := x.cg.members()
	if err != nil {
		return fmt.Errorf("list run cgroup: %w", err)
	}
	var cmd []int
	for _, p := range pids {
		if p != helperPid {
			cmd = append(cmd, p)
		}
	}
	if len(cmd) != 1 {
		return fmt.Errorf("find command process: want 1 besides the helper, found %v", cmd)
	}
	if err := x.cg.adopt(cmd[0]); err != nil {
		return err
	}
	if x.egress != nil {
		n, err := startEgress(helperPid, x.egress, x.r.cfg)
		if err != nil {
			return err
		}
		x.net = n
	}
	return nil
}
