package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Warm starts. With Config.Pool > 0 the runner keeps that many helpers
// started ahead of time — cgroups made, clone into them done, user, mount,
// pid, net, ipc, uts and cgroup namespaces created, the helper binary
// started and waiting for its configuration — so a run skips that part of
// its start. Nothing of a request is in a pooled helper: the root
// filesystem, the workspace, the network policy, the rlimits, the seccomp
// filter and the command all come with the claim. A pooled sandbox serves
// one run and is destroyed like any other; it is never reused.

// claim takes a pooled helper if one is ready, else starts one.
func (r *Runner) claim(memory int64, tasks int) (*spawned, bool, error) {
	for r.pool != nil {
		select {
		case sp := <-r.pool:
			if sp.alive() {
				r.poolSlots <- struct{}{} // the filler may start a replacement
				return sp, true, nil
			}
			// Killed while it waited (by an operator, the OOM killer):
			// clean it up, then let the filler replace it.
			r.cfg.Logger.Warn("sandbox pool: a waiting helper died", "cgroup", sp.name)
			_ = sp.destroy()
			r.poolSlots <- struct{}{}
			continue
		default:
		}
		break
	}
	sp, err := r.spawn(memory, tasks)
	return sp, false, err
}

// fillPool keeps the pool full until the runner stops, then destroys what
// is left in it.
func (r *Runner) fillPool() {
	defer r.poolDone.Done()
	backoff := 10 * time.Millisecond
	for {
		// A slot is a place in the pool: at most Config.Pool helpers exist
		// that no run has claimed.
		select {
		case <-r.poolSlots:
		case <-r.stopCtx.Done():
		}
		if r.stopCtx.Err() != nil {
			break
		}
		sp, err := r.spawn(r.cfg.Limits.Memory, r.cfg.Limits.Tasks)
		if err != nil {
			r.cfg.Logger.Warn("sandbox pool: start a helper", "err", err)
			select {
			case <-time.After(backoff):
			case <-r.stopCtx.Done():
			}
			backoff = min(2*backoff, 5*time.Second)
			r.poolSlots <- struct{}{}
			continue
		}
		backoff = 10 * time.Millisecond
		r.pool <- sp // never blocks: the slot reserved its place
	}
	for {
		select {
		case sp := <-r.pool:
			if err := sp.destroy(); err != nil {
				r.cfg.Logger.Warn("sandbox pool: destroy a helper", "err", err)
			}
		default:
			return
		}
	}
}

// alive reports whether a waiting helper is still running and holds its
// status pipe open: it writes nothing before its configuration arrives, so
// anything readable (end of file) means it is gone. The process is checked
// first: once the helper is dead (a zombie: this process has not waited
// for it), a process of its namespace that is still being torn down can
// hold the pipe open for a moment, and the pipe alone would call it alive.
func (sp *spawned) alive() bool {
	if st, err := os.ReadFile("/proc/" + strconv.Itoa(sp.proc.Pid) + "/stat"); err != nil || !runningState(st) {
		return false
	}
	rc, err := sp.statusR.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	_ = rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		ok = err == nil && n == 0
	})
	return ok
}

// runningState reports whether a /proc/PID/stat line shows a process that
// has not exited (its state is neither Z, zombie, nor X, dead).
func runningState(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	return stat[i+2] != 'Z' && stat[i+2] != 'X'
}

// PoolReady reports how many pooled sandboxes are ready to be claimed.
func (r *Runner) PoolReady() int {
	if r.pool == nil {
		return 0
	}
	return len(r.pool)
}

// setLimits for a v2 run: the command cgroup is empty when it is called.
func (c *v2Cgroup) setLimits(memory int64, tasks int) error {
	if err := writeCgroupFile(c.cmd, "memory.max", strconv.FormatInt(memory, 10)); err != nil {
		return err
	}
	return writeCgroupFile(c.cmd, "pids.max", strconv.Itoa(tasks))
}

// setLimits for a hybrid run. v1 wants memory+swap >= memory at every
// step, so the order of the two writes depends on the direction.
func (c *hybridCgroup) setLimits(memory int64, tasks int) error {
	lim := strconv.FormatInt(memory, 10)
	cur, _ := readInt(filepath.Join(c.mem, "memory.limit_in_bytes"))
	_, swErr := os.Stat(filepath.Join(c.mem, "memory.memsw.limit_in_bytes"))
	files := []string{"memory.limit_in_bytes"}
	if swErr == nil {
		if memory > cur {
			files = []string{"memory.memsw.limit_in_bytes", "memory.limit_in_bytes"}
		} else {
			files = []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"}
		}
	}
	for _, f := range files {
		if err := writeCgroupFile(c.mem, f, lim); err != nil {
			return fmt.Errorf("set %s: %w", f, err)
		}
	}
	if err := writeCgroupFile(c.pids, "pids.max", strconv.Itoa(tasks)); err != nil {
		return err
	}
	return nil
}

var errPoolSize = errors.New("pool: must not be negative")
