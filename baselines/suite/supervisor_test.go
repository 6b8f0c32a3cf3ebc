package suite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The supervisor's workers are this test binary, re-run as a stand-in
// worker process whose behaviour LOOMWORK_SUPERVISOR_WORKER names:
// "wait" (until SIGTERM, then exit 0), "fail" (exit 1 at once),
// "stubborn" (ignore SIGTERM).
func TestMain(m *testing.M) {
	switch os.Getenv("LOOMWORK_SUPERVISOR_WORKER") {
	case "":
		os.Exit(m.Run())
	case "wait":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		<-c
		os.Exit(0)
	case "fail":
		fmt.Fprintln(os.Stderr, "worker: cannot open the coordinator")
		os.Exit(1)
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Minute)
		os.Exit(0)
	}
}

// syncLog is a log the supervisor's goroutines write while the test reads.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func workerCmd(kind string) func(int) *exec.Cmd {
	return func(int) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "LOOMWORK_SUPERVISOR_WORKER="+kind)
		return cmd
	}
}

// running returns the pids of the workers running now.
func (s *Supervisor) running() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]int{}
	for slot, c := range s.procs {
		out[slot] = c.Process.Pid
	}
	return out
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSupervisorReplacesAKilledWorkerAndStopsAllOnShutdown(t *testing.T) {
	log := &syncLog{}
	sup, err := NewSupervisor(SupervisorConfig{Command: workerCmd("wait"), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	sup.Start(context.Background(), 2)
	first := sup.running()
	if len(first) != 2 {
		t.Fatalf("running %v, want 2 workers", first)
	}
	if err := syscall.Kill(first[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "w1 to be replaced", func() bool { p := sup.running()[1]; return p != 0 && p != first[1] })
	if sup.Restarts() != 1 || sup.Err() != nil {
		t.Fatalf("restarts %d, err %v; want 1 and nil", sup.Restarts(), sup.Err())
	}
	if !strings.Contains(log.String(), fmt.Sprintf("worker w1 (pid %d) killed", first[1])) {
		t.Errorf("log does not name the killed worker:\n%s", log)
	}
	all := sup.running()
	if err := sup.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for slot, pid := range all {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("worker w%d (pid %d) still runs after Shutdown", slot, pid)
		}
	}
	if err := sup.Shutdown(context.Background()); err != nil {
		t.Fatalf("a second Shutdown: %v", err)
	}
}

func TestSupervisorStopsTheSuiteWhenWorkersKeepFailing(t *testing.T) {
	sup, err := NewSupervisor(SupervisorConfig{Command: workerCmd("fail")})
	if err != nil {
		t.Fatal(err)
	}
	sup.Start(context.Background(), 1)
	waitFor(t, "three failures", func() bool { return sup.Err() != nil })
	if got := sup.Err().Error(); !strings.Contains(got, "workers keep failing: worker w0") || !strings.Contains(got, "exit status 1") {
		t.Fatalf("Err = %q, want it to name w0 and its exit", got)
	}
	sup.Shutdown(context.Background())
	if len(sup.running()) != 0 || sup.Restarts() != 0 {
		t.Fatalf("after three failures: running %v, restarts %d", sup.running(), sup.Restarts())
	}
}

func TestSupervisorKillsAWorkerThatIgnoresSIGTERM(t *testing.T) {
	sup, err := NewSupervisor(SupervisorConfig{Command: workerCmd("stubborn"), StopTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sup.Start(context.Background(), 1)
	pid := sup.running()[0]
	time.Sleep(100 * time.Millisecond) // the worker has ignored SIGTERM by now
	start := time.Now()
	sup.Shutdown(context.Background())
	if syscall.Kill(pid, 0) == nil {
		t.Fatalf("worker (pid %d) still runs after Shutdown", pid)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Shutdown took %s with a 300ms StopTimeout", d)
	}
}

func TestSupervisorConfigNamesWhatIsWrong(t *testing.T) {
	_, err := NewSupervisor(SupervisorConfig{MaxFailures: -1})
	if err == nil || !strings.Contains(err.Error(), "Command must be set") || !strings.Contains(err.Error(), "MaxFailures must not be negative") {
		t.Fatalf("NewSupervisor(bad) = %v", err)
	}
}
