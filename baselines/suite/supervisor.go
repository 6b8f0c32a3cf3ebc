package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// SupervisorConfig configures a Supervisor.
type SupervisorConfig struct {
	// Command returns a new, unstarted command for the worker in slot i
	// (`loom-eval worker --coordinator DB --id wI`). Required.
	Command func(slot int) *exec.Cmd
	// Log receives one line per start, kill and restart. Default: discard.
	Log io.Writer
	// MaxFailures is how many exits with an error in a row, across slots,
	// stop the suite. Default 3.
	MaxFailures int
	// StopTimeout is how long Shutdown waits after SIGTERM before it kills
	// the workers left. Default 10 s.
	StopTimeout time.Duration
}

// Validate reports what is missing or out of range.
func (c SupervisorConfig) Validate() error {
	var errs []error
	if c.Command == nil {
		errs = append(errs, errors.New("suite supervisor: Command must be set"))
	}
	if c.MaxFailures < 0 {
		errs = append(errs, fmt.Errorf("suite supervisor: MaxFailures must not be negative (got %d)", c.MaxFailures))
	}
	if c.StopTimeout < 0 {
		errs = append(errs, fmt.Errorf("suite supervisor: StopTimeout must not be negative (got %s)", c.StopTimeout))
	}
	return errors.Join(errs...)
}

// Supervisor keeps `suite run --workers K` at K worker processes. A worker
// killed by a signal is replaced (its trial comes back when its lease
// expires); MaxFailures exits with an error in a row stop the suite with
// the last one (Err).
type Supervisor struct {
	cfg SupervisorConfig

	mu       sync.Mutex
	procs    map[int]*exec.Cmd // the workers running, by slot
	failures int
	restarts int
	lastErr  error
	stopping bool
	wg       sync.WaitGroup
}

// NewSupervisor checks cfg and returns a supervisor that runs nothing yet.
func NewSupervisor(cfg SupervisorConfig) (*Supervisor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.MaxFailures == 0 {
		cfg.MaxFailures = 3
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 10 * time.Second
	}
	return &Supervisor{cfg: cfg, procs: map[int]*exec.Cmd{}}, nil
}

// Start starts a worker in each of slots 0..workers-1. Workers are
// replaced until ctx ends or Shutdown is called.
func (s *Supervisor) Start(ctx context.Context, workers int) {
	for i := range workers {
		s.start(ctx, i)
	}
}

func (s *Supervisor) start(ctx context.Context, slot int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || ctx.Err() != nil {
		return
	}
	cmd := s.cfg.Command(slot)
	if err := cmd.Start(); err != nil {
		s.lastErr = fmt.Errorf("start worker w%d: %w", slot, err)
		s.failures = s.cfg.MaxFailures
		return
	}
	fmt.Fprintf(s.cfg.Log, "suite: worker w%d started (pid %d)\n", slot, cmd.Process.Pid)
	s.procs[slot] = cmd
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if s.exited(slot, cmd, cmd.Wait()) {
			s.start(ctx, slot)
		}
	}()
}

// exited records how the worker in slot ended and reports whether to
// start another in its place.
func (s *Supervisor) exited(slot int, cmd *exec.Cmd, err error) (again bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.procs[slot] == cmd {
		delete(s.procs, slot) // signal reads the running ones only: cmd.Wait wrote ProcessState unguarded
	}
	var ee *exec.ExitError
	signalled := errors.As(err, &ee) && !ee.Exited()
	switch {
	case s.stopping:
		return false
	case err == nil:
		s.failures = 0
	case signalled:
		fmt.Fprintf(s.cfg.Log, "suite: worker w%d (pid %d) killed (%v); starting another\n", slot, cmd.Process.Pid, err)
		s.restarts++
	default:
		s.failures++
		s.lastErr = fmt.Errorf("worker w%d (pid %d): %w", slot, cmd.Process.Pid, err)
	}
	return err != nil && s.failures < s.cfg.MaxFailures
}

// Err is the driver's stop check: an error once workers keep failing.
func (s *Supervisor) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failures >= s.cfg.MaxFailures {
		return fmt.Errorf("workers keep failing: %w", s.lastErr)
	}
	return nil
}

// Restarts is how many killed workers were replaced.
func (s *Supervisor) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// Shutdown ends the workers — SIGTERM, on which a worker gives its trial
// back — and waits for them; those still running after StopTimeout, or
// when ctx ends, are killed. It is safe to call more than once.
func (s *Supervisor) Shutdown(ctx context.Context) error {
	s.signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	t := time.NewTimer(s.cfg.StopTimeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	s.signal(syscall.SIGKILL)
	<-done
	return nil
}

// signal marks the supervisor stopping and sends sig to every worker
// still running.
func (s *Supervisor) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	for _, p := range s.procs {
		_ = p.Process.Signal(sig)
	}
}

// RunLocal runs w in the background: the single-process suite, where this
// process is the one worker. stop reports its error once it has ended
// (nil while it runs or when it finished cleanly); release cancels it,
// waits for it and then calls closeW (safe to call more than once).
func RunLocal(ctx context.Context, w *Worker, closeW func()) (stop func() error, release func()) {
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var werr error
	go func() {
		defer close(done)
		werr = w.Run(wctx)
	}()
	stop = func() error {
		select {
		case <-done:
			return werr
		default:
			return nil
		}
	}
	release = sync.OnceFunc(func() {
		cancel()
		<-done
		closeW()
	})
	return stop, release
}
