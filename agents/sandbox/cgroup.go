package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupLayout makes per-run cgroups on one machine layout. Both layouts
// (pure v2, hybrid v1+v2) implement it, so the runner never asks which one it
// has after detection.
//
// Every run gets a cgroup for the whole run (placement, CPU accounting,
// kill) and one for the command's tree alone, carrying the memory and pids
// limits exactly as the caller set them. The command is moved into it while
// stopped at its exec, before it runs any instruction of its own; the
// helper's own threads and memory are never charged to the command, and the
// helper can never be the process refused a thread or killed for memory, so
// it survives to report.
type cgroupLayout interface {
	// name is "v2" or "hybrid".
	name() string
	// create makes a run's cgroups with its limits set.
	create(name string, memory int64, tasks int) (runCgroup, error)
	// bases lists the parent directories holding run cgroups, for the stale sweep.
	bases() []string
}

// runCgroup is one run's cgroups (directories in one or more hierarchies).
type runCgroup interface {
	// placementFD is a cgroup2 directory fd for clone3(CLONE_INTO_CGROUP),
	// so the helper is inside from its first instruction.
	placementFD() int
	// members lists the host pids in the run.
	members() ([]int, error)
	// adopt moves the command (stopped at its exec) into the command cgroup
	// (every hierarchy holding a limit).
	adopt(pid int) error
	// killAll kills everything in the run: cgroup.kill, then SIGKILL to
	// every pid listed until the cgroups are empty or ctx ends.
	killAll(ctx context.Context) error
	// counters reads the kernel's evidence.
	counters() Counters
	// remove deletes the run's cgroup directories; they must be empty.
	remove(ctx context.Context) error
	// setLimits changes the command cgroup's memory and pids limits while
	// it is still empty (a pooled run claimed with other limits).
	setLimits(memory int64, tasks int) error
}

// helperTaskAllowance bounds the helper's own threads (Go runtime threads,
// typically 3-6 with GOMAXPROCS=1).
const helperTaskAllowance = 32

// mountInfo is the part of /proc/self/mountinfo the detection needs.
type cgroupMount struct {
	point       string
	fstype      string   // "cgroup" or "cgroup2"
	controllers []string // v1 controllers from the super options
}

func readCgroupMounts(mountinfo []byte) []cgroupMount {
	var out []cgroupMount
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 6 || sep+1 >= len(fields) {
			continue
		}
		fstype := fields[sep+1]
		if fstype != "cgroup" && fstype != "cgroup2" {
			continue
		}
		m := cgroupMount{point: unescapeMount(fields[4]), fstype: fstype}
		if fstype == "cgroup" && sep+3 < len(fields) {
			for _, o := range strings.Split(fields[sep+3], ",") {
				switch o {
				case "rw", "ro":
				default:
					m.controllers = append(m.controllers, o)
				}
			}
		}
		out = append(out, m)
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// detectCgroups picks the layout from the mount table. parent is the
// relative cgroup under which runs live in every hierarchy.
func detectCgroups(parent string) (cgroupLayout, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	return detectCgroupsFrom(mi, parent)
}

// detectCgroupsFrom is detectCgroups on a given mount table.
func detectCgroupsFrom(mi []byte, parent string) (cgroupLayout, error) {
	mounts := readCgroupMounts(mi)
	var v2 string
	v1 := map[string]string{}
	for _, m := range mounts {
		switch m.fstype {
		case "cgroup2":
			if v2 == "" {
				v2 = m.point
			}
		case "cgroup":
			for _, c := range m.controllers {
				if _, ok := v1[c]; !ok {
					v1[c] = m.point
				}
			}
		}
	}
	if v2 != "" {
		ctrl, err := os.ReadFile(filepath.Join(v2, "cgroup.controllers"))
		if err != nil {
			return nil, fmt.Errorf("read cgroup2 controllers: %w", err)
		}
		have := strings.Fields(string(ctrl))
		if slices.Contains(have, "pids") && slices.Contains(have, "memory") {
			return newV2Layout(v2, parent)
		}
	}
	var missing []string
	if v2 == "" {
		missing = append(missing, "a cgroup2 hierarchy (for clone-time placement and cgroup.kill)")
	}
	if v1["pids"] == "" {
		missing = append(missing, "the pids controller (neither cgroup2 nor a v1 hierarchy has it)")
	}
	if v1["memory"] == "" {
		missing = append(missing, "the memory controller (neither cgroup2 nor a v1 hierarchy has it)")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("detect cgroups: missing %s", strings.Join(missing, "; "))
	}
	return newHybridLayout(v2, v1["pids"], v1["memory"], parent)
}

// ---- shared file helpers ----

func writeCgroupFile(dir, file, value string) error {
	path := filepath.Join(dir, file)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	_, werr := f.WriteString(value)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("write %q to %s: %w", value, path, werr)
	}
	if cerr != nil {
		return fmt.Errorf("close %s: %w", path, cerr)
	}
	return nil
}

// readKeyed reads a "key value" file (pids.events, memory.events, cpu.stat,
// memory.oom_control) into a map; missing files give an empty map.
func readKeyed(path string) map[string]int64 {
	out := map[string]int64{}
	data, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}

func readInt(path string) (int64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n, err == nil
}

// readProcs lists the pids in a cgroup.procs file.
func readProcs(dir string) ([]int, error) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// sweep SIGKILLs every pid listed in dirs until all are empty. A process that
// forks between the read and the kill lands in the same cgroup and is caught
// on the next pass; cgroup.kill (when there is one) has usually done the work.
func sweep(ctx context.Context, dirs ...string) error {
	delay := 200 * time.Microsecond
	for {
		var left []int
		for _, d := range dirs {
			pids, err := readProcs(d)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					continue
				}
				return fmt.Errorf("list cgroup %s: %w", d, err)
			}
			left = append(left, pids...)
		}
		if len(left) == 0 {
			return nil
		}
		for _, p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sweep cgroup: %d processes left (%v): %w", len(left), left, ctx.Err())
		case <-time.After(delay):
		}
		if delay < 20*time.Millisecond {
			delay *= 2
		}
	}
}

// rmdirRetry removes a cgroup directory, retrying while the kernel still
// counts exiting tasks in it (EBUSY).
func rmdirRetry(ctx context.Context, dir string) error {
	delay := 200 * time.Microsecond
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("remove cgroup %s: still busy: %w", dir, ctx.Err())
		case <-time.After(delay):
		}
		if delay < 20*time.Millisecond {
			delay *= 2
		}
	}
}

// ensureDir makes a cgroup directory if it does not exist.
func ensureDir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	return nil
}

// ---- pure cgroup v2 ----

type v2Layout struct {
	base string // <mount>/<parent>
}

func newV2Layout(mount, parent string) (*v2Layout, error) {
	// The controllers must be enabled from the root down to our parent, and
	// the parent must not hold processes itself (cgroup v2's "no internal
	// processes" rule), so runs live in a dedicated subtree.
	dir := mount
	for _, part := range strings.Split(parent, "/") {
		if err := enableV2(dir, "memory", "pids"); err != nil {
			return nil, err
		}
		dir = filepath.Join(dir, part)
		if err := ensureDir(dir); err != nil {
			return nil, err
		}
	}
	if err := enableV2(dir, "memory", "pids"); err != nil {
		return nil, err
	}
	return &v2Layout{base: dir}, nil
}

func enableV2(dir string, controllers ...string) error {
	cur, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return fmt.Errorf("read %s/cgroup.subtree_control: %w", dir, err)
	}
	have := strings.Fields(string(cur))
	var want []string
	for _, c := range controllers {
		if !slices.Contains(have, c) {
			want = append(want, "+"+c)
		}
	}
	if len(want) == 0 {
		return nil
	}
	if err := writeCgroupFile(dir, "cgroup.subtree_control", strings.Join(want, " ")); err != nil {
		return fmt.Errorf("enable cgroup v2 controllers %s: %w", strings.Join(controllers, ", "), err)
	}
	return nil
}

func (l *v2Layout) name() string    { return "v2" }
func (l *v2Layout) bases() []string { return []string{l.base} }

// create makes <run>/ (kill, CPU), <run>/helper (clone placement, a small
// pids allowance) and <run>/cmd (memory.max, OOM group, pids.max). <run>
// itself holds no process, as v2 requires of a cgroup whose children have
// controllers.
func (l *v2Layout) create(name string, memory int64, tasks int) (runCgroup, error) {
	dir := filepath.Join(l.base, name)
	cg := &v2Cgroup{dir: dir, helper: filepath.Join(dir, "helper"), cmd: filepath.Join(dir, "cmd"), fd: -1}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	fail := func(err error) (runCgroup, error) {
		_ = syscall.Rmdir(cg.cmd)
		_ = syscall.Rmdir(cg.helper)
		_ = syscall.Rmdir(dir)
		return nil, err
	}
	if err := enableV2(dir, "memory", "pids"); err != nil {
		return fail(err)
	}
	for _, d := range []string{cg.helper, cg.cmd} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fail(fmt.Errorf("create cgroup %s: %w", d, err))
		}
	}
	if err := writeCgroupFile(cg.helper, "pids.max", strconv.Itoa(helperTaskAllowance)); err != nil {
		return fail(err)
	}
	if err := writeCgroupFile(cg.cmd, "memory.max", strconv.FormatInt(memory, 10)); err != nil {
		return fail(err)
	}
	if _, err := os.Stat(filepath.Join(cg.cmd, "memory.swap.max")); err == nil {
		if err := writeCgroupFile(cg.cmd, "memory.swap.max", "0"); err != nil {
			return fail(err)
		}
	}
	// One OOM kill takes the command's whole tree down, not a random member.
	if _, err := os.Stat(filepath.Join(cg.cmd, "memory.oom.group")); err == nil {
		_ = writeCgroupFile(cg.cmd, "memory.oom.group", "1")
	}
	if err := writeCgroupFile(cg.cmd, "pids.max", strconv.Itoa(tasks)); err != nil {
		return fail(err)
	}
	fd, err := syscall.Open(cg.helper, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("open cgroup %s: %w", cg.helper, err))
	}
	cg.fd = fd
	return cg, nil
}

type v2Cgroup struct {
	dir, helper, cmd string
	fd               int
}

func (c *v2Cgroup) placementFD() int        { return c.fd }
func (c *v2Cgroup) members() ([]int, error) { return readProcs(c.helper) }
func (c *v2Cgroup) adopt(pid int) error {
	if err := writeCgroupFile(c.cmd, "cgroup.procs", strconv.Itoa(pid)); err != nil {
		return fmt.Errorf("move command into its cgroup: %w", err)
	}
	return nil
}

func (c *v2Cgroup) killAll(ctx context.Context) error {
	var kerr error
	if err := writeCgroupFile(c.dir, "cgroup.kill", "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
		kerr = err
	}
	if err := sweep(ctx, c.helper, c.cmd, c.dir); err != nil {
		return errors.Join(kerr, err)
	}
	return nil
}

func (c *v2Cgroup) counters() Counters {
	var out Counters
	out.PidsMax = readKeyed(filepath.Join(c.cmd, "pids.events"))["max"]
	ev := readKeyed(filepath.Join(c.cmd, "memory.events"))
	out.OOMKills = ev["oom_kill"]
	out.MemoryMax = ev["max"]
	out.CPUUsage = time.Duration(readKeyed(filepath.Join(c.dir, "cpu.stat"))["usage_usec"]) * time.Microsecond
	if p, ok := readInt(filepath.Join(c.cmd, "memory.peak")); ok {
		out.PeakMemory = p
	}
	return out
}

func (c *v2Cgroup) remove(ctx context.Context) error {
	if c.fd >= 0 {
		_ = syscall.Close(c.fd)
		c.fd = -1
	}
	return removeTree(ctx, c.dir)
}

// ---- hybrid: cgroup2 without controllers + v1 pids and memory ----

type hybridLayout struct {
	v2Base, pidsBase, memBase string
}

func newHybridLayout(v2Mount, pidsMount, memMount, parent string) (*hybridLayout, error) {
	l := &hybridLayout{
		v2Base:   filepath.Join(v2Mount, parent),
		pidsBase: filepath.Join(pidsMount, parent),
		memBase:  filepath.Join(memMount, parent),
	}
	for _, root := range []struct{ mount, base string }{{v2Mount, l.v2Base}, {pidsMount, l.pidsBase}, {memMount, l.memBase}} {
		dir := root.mount
		for _, part := range strings.Split(parent, "/") {
			dir = filepath.Join(dir, part)
			if err := ensureDir(dir); err != nil {
				return nil, err
			}
		}
	}
	// cgroup.kill exists in non-root cgroups on kernels >= 5.14.
	// A probe of its own: runners started at once in one process shared
	// "probe-PID", and one's Rmdir made the other's Stat find no
	// cgroup.kill ("lacks cgroup.kill" on a kernel that has it).
	probe, err := os.MkdirTemp(l.v2Base, fmt.Sprintf("probe-%d-", os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("probe cgroup2 at %s: %w", l.v2Base, err)
	}
	_, serr := os.Stat(filepath.Join(probe, "cgroup.kill"))
	_ = syscall.Rmdir(probe)
	if serr != nil {
		return nil, fmt.Errorf("detect cgroups: cgroup2 at %s lacks cgroup.kill (kernel < 5.14)", v2Mount)
	}
	return l, nil
}

func (l *hybridLayout) name() string    { return "hybrid" }
func (l *hybridLayout) bases() []string { return []string{l.v2Base, l.pidsBase, l.memBase} }

// create makes the run's cgroup in cgroup2 (the helper's placement, kill,
// CPU) and in v1 memory and pids (the command's limits; only the command's
// tree is moved there).
func (l *hybridLayout) create(name string, memory int64, tasks int) (runCgroup, error) {
	c := &hybridCgroup{
		v2:   filepath.Join(l.v2Base, name),
		pids: filepath.Join(l.pidsBase, name),
		mem:  filepath.Join(l.memBase, name),
		fd:   -1,
	}
	var made []string
	fail := func(err error) (runCgroup, error) {
		for i := len(made) - 1; i >= 0; i-- {
			_ = syscall.Rmdir(made[i])
		}
		return nil, err
	}
	for _, d := range []string{c.v2, c.pids, c.mem} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fail(fmt.Errorf("create cgroup %s: %w", d, err))
		}
		made = append(made, d)
	}
	lim := strconv.FormatInt(memory, 10)
	if err := writeCgroupFile(c.mem, "memory.limit_in_bytes", lim); err != nil {
		return fail(err)
	}
	if _, err := os.Stat(filepath.Join(c.mem, "memory.memsw.limit_in_bytes")); err == nil {
		// memory+swap equal to memory: no swapping past the limit.
		if err := writeCgroupFile(c.mem, "memory.memsw.limit_in_bytes", lim); err != nil {
			return fail(err)
		}
	}
	if err := writeCgroupFile(c.pids, "pids.max", strconv.Itoa(tasks)); err != nil {
		return fail(err)
	}
	fd, err := syscall.Open(c.v2, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("open cgroup %s: %w", c.v2, err))
	}
	c.fd = fd
	return c, nil
}

type hybridCgroup struct {
	v2, pids, mem string
	fd            int
}

func (c *hybridCgroup) placementFD() int        { return c.fd }
func (c *hybridCgroup) members() ([]int, error) { return readProcs(c.v2) }

func (c *hybridCgroup) adopt(pid int) error {
	p := strconv.Itoa(pid)
	if err := writeCgroupFile(c.pids, "cgroup.procs", p); err != nil {
		return fmt.Errorf("move command into its pids cgroup: %w", err)
	}
	if err := writeCgroupFile(c.mem, "cgroup.procs", p); err != nil {
		return fmt.Errorf("move command into its memory cgroup: %w", err)
	}
	return nil
}

func (c *hybridCgroup) killAll(ctx context.Context) error {
	var kerr error
	if err := writeCgroupFile(c.v2, "cgroup.kill", "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
		kerr = err
	}
	if err := sweep(ctx, c.v2, c.pids, c.mem); err != nil {
		return errors.Join(kerr, err)
	}
	return nil
}

func (c *hybridCgroup) counters() Counters {
	var out Counters
	out.PidsMax = readKeyed(filepath.Join(c.pids, "pids.events"))["max"]
	out.OOMKills = readKeyed(filepath.Join(c.mem, "memory.oom_control"))["oom_kill"]
	if n, ok := readInt(filepath.Join(c.mem, "memory.failcnt")); ok {
		out.MemoryMax = n
	}
	if n, ok := readInt(filepath.Join(c.mem, "memory.max_usage_in_bytes")); ok {
		out.PeakMemory = n
	}
	out.CPUUsage = time.Duration(readKeyed(filepath.Join(c.v2, "cpu.stat"))["usage_usec"]) * time.Microsecond
	return out
}

func (c *hybridCgroup) remove(ctx context.Context) error {
	if c.fd >= 0 {
		_ = syscall.Close(c.fd)
		c.fd = -1
	}
	return errors.Join(removeTree(ctx, c.pids), removeTree(ctx, c.mem), removeTree(ctx, c.v2))
}

// removeTree removes a cgroup directory and its child cgroups, deepest first.
func removeTree(ctx context.Context, dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list cgroup %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeTree(ctx, filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return rmdirRetry(ctx, dir)
}

// ---- naming and the stale sweep ----

// runCgroupName names a run's cgroup after its owner so a later process can
// tell a live run from one whose owner crashed: run-<pid>-<start ticks>-<seq>.
func runCgroupName(ownerPid int, ownerStart uint64, seq uint64) string {
	return fmt.Sprintf("run-%d-%d-%d", ownerPid, ownerStart, seq)
}

// parseRunCgroupName is the inverse of runCgroupName.
func parseRunCgroupName(name string) (pid int, start uint64, ok bool) {
	rest, found := strings.CutPrefix(name, "run-")
	if !found {
		return 0, 0, false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 {
		return 0, 0, false
	}
	p, err1 := strconv.Atoi(parts[0])
	s, err2 := strconv.ParseUint(parts[1], 10, 64)
	_, err3 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || p <= 0 {
		return 0, 0, false
	}
	return p, s, true
}

// processStart returns a process's start time in clock ticks since boot
// (field 22 of /proc/PID/stat), which together with the pid names one
// process for the life of the machine.
func processStart(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may contain spaces and parentheses; the
	// fields after the last ')' are fixed.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat: no ')'", pid)
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is field 3 (state); start time is field 22.
	if len(fields) < 20 {
		return 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(fields))
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// ownerAlive reports whether the process that made a run cgroup still runs.
func ownerAlive(pid int, start uint64) bool {
	s, err := processStart(pid)
	return err == nil && s == start
}

// sweepStale kills and removes run cgroups whose owner is gone, e.g. after a
// previous process was SIGKILLed mid-run. It returns the names removed.
func sweepStale(ctx context.Context, l cgroupLayout) ([]string, error) {
	var removed []string
	var errs []error
	for _, base := range l.bases() {
		entries, err := os.ReadDir(base)
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s: %w", base, err))
			continue
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			pid, start, ok := parseRunCgroupName(e.Name())
			if !ok || ownerAlive(pid, start) {
				continue
			}
			dir := filepath.Join(base, e.Name())
			_ = writeCgroupFile(dir, "cgroup.kill", "1")
			if err := sweep(ctx, cgroupTree(dir)...); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := removeTree(ctx, dir); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, dir)
		}
	}
	return removed, errors.Join(errs...)
}

// cgroupTree lists dir and its descendant cgroup directories.
func cgroupTree(dir string) []string {
	out := []string{dir}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, cgroupTree(filepath.Join(dir, e.Name()))...)
		}
	}
	return out
}
