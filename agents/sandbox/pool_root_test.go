package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/testtier"
)

// helpersOf lists the sandbox helpers whose parent is this process.
func helpersOf(t *testing.T) []int {
	t.Helper()
	var out []int
	for _, pid := range hostProcsWith(t, helperArg0) {
		st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: state, ppid, ...
		rest := string(st[strings.LastIndexByte(string(st), ')')+2:])
		if f := strings.Fields(rest); len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			out = append(out, pid)
		}
	}
	return out
}

func TestRootPoolServesEachSandboxOnceAndCleansUp(t *testing.T) {
	testtier.Slow(t) // a real sandbox; not parallel: it counts every helper of the process
	needRoot(t)
	r, err := New(Config{Pool: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pool to fill", 20*time.Second, func() bool { return r.PoolReady() == 2 })
	// Read from /proc until it agrees: a loaded make test once listed 1
	// helper just after the pool counted 2 (a helper's /proc files can be
	// unreadable for a moment while it sets itself up). A third helper, or
	// a missing one, still fails after the wait.
	waitFor(t, "2 pooled helpers in /proc", 10*time.Second, func() bool { return len(helpersOf(t)) == 2 })
	seen := map[string]bool{}
	for i := 0; i < 4; i++ {
		waitFor(t, "the pool to refill", 20*time.Second, func() bool { return r.PoolReady() == 2 })
		// Each run leaves a file in /tmp and a daemonised child; the next
		// (pooled) run must see neither.
		res := py(t, r, `
import json, os, sys
seen = os.path.exists('/tmp/marker')
open('/tmp/marker', 'w').write('x')
if os.fork() == 0:
    os.setsid(); import time; time.sleep(60); os._exit(0)
print(json.dumps({'seen': seen, 'procs': sorted(int(p) for p in os.listdir('/proc') if p.isdigit())}))
`, Request{})
		var got struct {
			Seen  bool
			Procs []int
		}
		decode(t, res, &got)
		if !res.Warm {
			t.Errorf("run %d: not served from the pool", i)
		}
		if got.Seen {
			t.Errorf("run %d: saw the previous run's /tmp/marker: a pooled sandbox was reused", i)
		}
		if len(got.Procs) != 3 { // the helper, the command, its fork
			t.Errorf("run %d: /proc lists %v: something of an earlier run is alive here", i, got.Procs)
		}
		if seen[res.Cgroup] {
			t.Errorf("run %d: cgroup %s served twice", i, res.Cgroup)
		}
		seen[res.Cgroup] = true
		for _, d := range cgroupDirsOf(r, res.Cgroup) {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("run %d: cgroup %s left behind", i, d)
			}
		}
	}
	// Limits other than the pool's are set at the claim.
	waitFor(t, "the pool to refill", 20*time.Second, func() bool { return r.PoolReady() == 2 })
	res := py(t, r, "x = []\nwhile True: x.append(bytearray(1 << 20))", Request{Limits: Limits{Memory: 48 << 20}})
	if !res.Warm || res.Reason != ReasonMemory || res.PeakMemory > 48<<20 {
		t.Errorf("pooled run with a 48 MiB limit: warm %v, %s, peak %d", res.Warm, res.Summary(), res.PeakMemory)
	}
	waitFor(t, "the pool to refill", 20*time.Second, func() bool { return r.PoolReady() == 2 })
	res = py(t, r, `
import os, time
n = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        print(n); break
    if pid == 0:
        time.sleep(30); os._exit(0)
    n += 1`, Request{Limits: Limits{Tasks: 12}})
	if !res.Warm || strings.TrimSpace(res.Stdout) != "11" || res.Counters.PidsMax < 1 {
		t.Errorf("pooled run with 12 tasks: warm %v, forks %q, %+v", res.Warm, res.Stdout, res.Counters)
	}
	// Shutdown destroys the waiting helpers and their cgroups.
	waitFor(t, "the pool to refill", 20*time.Second, func() bool { return r.PoolReady() == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if left := helpersOf(t); len(left) != 0 {
		t.Errorf("helpers left after Shutdown: %v", left)
	}
	prefix := runCgroupName(r.ownerPid, r.ownerStart, 0)
	prefix = prefix[:strings.LastIndexByte(prefix, '-')+1]
	for _, b := range r.layout.bases() {
		entries, _ := os.ReadDir(b)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), prefix) {
				t.Errorf("cgroup %s left after Shutdown", filepath.Join(b, e.Name()))
			}
		}
	}
}

// Two runners in one process name their cgroups after the same owner; they
// must not collide.
func TestRootTwoRunnersInOneProcessDoNotShareCgroupNames(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	a := newRunner(t, Config{})
	b := newRunner(t, Config{Pool: 1})
	waitFor(t, "the pool to fill", 20*time.Second, func() bool { return b.PoolReady() == 1 })
	for i := 0; i < 2; i++ {
		ra := py(t, a, "pass", Request{})
		rb := py(t, b, "pass", Request{})
		if ra.Cgroup == rb.Cgroup {
			t.Fatalf("both runners used cgroup %s", ra.Cgroup)
		}
	}
}

// A pooled helper that dies while it waits is not handed to a run.
func TestRootPoolSkipsAHelperThatDiedWaiting(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{Pool: 1})
	waitFor(t, "the pool to fill", 20*time.Second, func() bool { return r.PoolReady() == 1 })
	helpers := helpersOf(t)
	if len(helpers) != 1 {
		t.Fatalf("want one waiting helper, found %v", helpers)
	}
	if err := syscall.Kill(helpers[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Dead means every thread gone and its files closed (the leader shows
	// Z while other threads still exit holding the fd table); the pool has
	// not reaped it.
	waitFor(t, "the helper to be dead", 10*time.Second, func() bool {
		dir := filepath.Join("/proc", strconv.Itoa(helpers[0]))
		tasks, _ := os.ReadDir(filepath.Join(dir, "task"))
		fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
		return len(tasks) <= 1 && len(fds) == 0
	})
	// The run succeeds: on a fresh helper, or on the replacement the
	// filler may already have put in the pool — never on the dead one.
	res := py(t, r, "print('ran')", Request{})
	if res.Stdout != "ran\n" || res.Reason != ReasonExit {
		t.Errorf("want the run to succeed on a live helper, got warm=%v %s %q", res.Warm, res.Summary(), res.Stdout)
	}
}
