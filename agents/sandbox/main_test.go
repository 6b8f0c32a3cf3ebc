package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Test modes of this binary besides running tests: the sandbox helper (via
// Init), and a "parent" process the SIGKILL test starts and kills.
const testParentEnv = "LOOMWORK_SANDBOX_TEST_PARENT"

func TestMain(m *testing.M) {
	raceQuietExit()
	Init()
	if ws := os.Getenv(testParentEnv); ws != "" {
		os.Exit(runTestParent(ws))
	}
	goleak.VerifyTestMain(m)
}

// raceQuietExit re-executes the sandbox helper with the race detector's
// exit sleep turned off. A -race binary sleeps atexit_sleep_ms (1 s by
// default) before a successful exit, waiting for late race reports; the
// helper is this test binary and exits 0 after every run, so each sandbox
// run took a second longer than the run itself. The runner starts the
// helper with a fixed environment (no GORACE from the test's), so the
// helper adds it and execs itself again: same pid, namespaces, cgroup and
// pipes, and race detection as before. Outside a helper it does nothing.
func raceQuietExit() {
	const quiet = "atexit_sleep_ms=0"
	if len(os.Args) == 0 || os.Args[0] != helperArg0 || os.Getenv(helperEnv) != helperEnvValue ||
		strings.Contains(os.Getenv("GORACE"), quiet) {
		return
	}
	env := append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" "+quiet))
	err := syscall.Exec("/proc/self/exe", os.Args, env)
	fmt.Fprintln(os.Stderr, "sandbox helper: re-exec with GORACE:", err) // and go on as the helper
}

// runTestParent runs one long sandbox (a daemonising command that reports
// ready in the workspace) and blocks; the test SIGKILLs this process.
func runTestParent(ws string) int {
	r, err := New(Config{})
	if err == nil {
		err = r.Start(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "test parent:", err)
		return 2
	}
	_, err = r.Run(context.Background(), Request{
		Command:   []string{"/usr/bin/python3", "-I", "-c", os.Getenv(testParentEnv + "_CODE")},
		Workspace: ws,
		Limits:    Limits{WallTime: time.Minute},
	})
	fmt.Fprintln(os.Stderr, "test parent: run returned:", err)
	return 3
}

// needRoot fails (in CI, where these tests must run) or skips (elsewhere)
// when the process cannot create namespaces and cgroups.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s needs root (namespaces and cgroups), and CI runs as root; got euid %d", t.Name(), os.Geteuid())
	}
	t.Skipf("%s needs root (namespaces and cgroups)", t.Name())
}

// newRunner returns a started runner and shuts it down at the end.
func newRunner(t *testing.T, cfg Config) *Runner {
	t.Helper()
	needRoot(t)
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := r.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return r
}

// py runs Python code in a sandbox and fails the test on a sandbox error.
func py(t *testing.T, r *Runner, code string, req Request) *Result {
	t.Helper()
	req.Command = append([]string{"/usr/bin/python3", "-I", "-c", code}, req.Command...)
	res, err := r.Run(context.Background(), req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// hostProcsWith lists host pids whose command line contains token.
func hostProcsWith(t *testing.T, token string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("list /proc: %v", err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(cmdline), token) {
			out = append(out, pid)
		}
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes. It is a liveness
// wait for an asynchronous event, not a timing assertion.
func waitFor(t *testing.T, what string, deadline time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %s waiting for %s", deadline, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cgroupDirsOf lists the directories a run's cgroup name would have in each
// hierarchy base of the runner's layout.
func cgroupDirsOf(r *Runner, name string) []string {
	var out []string
	for _, b := range r.layout.bases() {
		out = append(out, filepath.Join(b, name))
	}
	return out
}

func token(t *testing.T) string {
	return fmt.Sprintf("lwtok%d%d", os.Getpid(), time.Now().UnixNano())
}
