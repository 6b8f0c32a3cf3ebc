package sandbox

import (
	"fmt"
	"strings"
	"time"
)

// Reason says why a run ended (or, for limits the command survived, what
// disturbed it).
type Reason string

// Reasons, in the order they take precedence when several apply.
const (
	ReasonTimeout   Reason = "timeout"    // the wall-clock limit was reached
	ReasonCancelled Reason = "cancelled"  // the caller's context was cancelled
	ReasonOutput    Reason = "output"     // stdout or stderr exceeded Limits.Output
	ReasonMemory    Reason = "memory"     // the memory cgroup OOM-killed a process
	ReasonCPU       Reason = "cpu"        // RLIMIT_CPU or the tree's CPU budget
	ReasonFileSize  Reason = "file_size"  // RLIMIT_FSIZE was reached
	ReasonPids      Reason = "pids"       // a fork or thread was refused by pids.max
	ReasonOpenFiles Reason = "open_files" // RLIMIT_NOFILE was reached
	ReasonSignal    Reason = "signal"     // killed by a signal, no limit involved
	ReasonExit      Reason = "exit"       // exited on its own (any exit code)
)

// Counters are raw values read from the kernel after the run.
type Counters struct {
	// PidsMax is the "max" count of pids.events: forks refused by pids.max.
	PidsMax int64 `json:"pids_events_max"`
	// OOMKills is oom_kill from memory.events (v2) or memory.oom_control (v1).
	OOMKills int64 `json:"oom_kills"`
	// MemoryMax counts hits of the memory limit (memory.events max, v1 failcnt).
	MemoryMax int64 `json:"memory_limit_hits"`
	// CPUUsage is the tree's CPU time from the cgroup's cpu.stat.
	CPUUsage time.Duration `json:"cgroup_cpu_usage"`
	// PeakMemory is the cgroup's peak memory (memory.peak / max_usage_in_bytes).
	PeakMemory int64 `json:"cgroup_peak_memory_bytes"`
}

// Result describes a finished run.
type Result struct {
	// Command is what ran.
	Command []string `json:"command"`
	// Exited is true when the command exited on its own; ExitCode is then
	// its status. Otherwise Signal names the signal that killed it.
	Exited   bool   `json:"exited"`
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	// Reason is why the run ended; Evidence says what it was read from.
	Reason   Reason   `json:"reason"`
	Evidence []string `json:"evidence,omitempty"`
	// Stdout and Stderr are capped at Limits.Output; Truncated marks a cut.
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	// CPUTime is the CPU used by the whole tree; PeakMemory its peak memory.
	CPUTime    time.Duration `json:"cpu_time"`
	PeakMemory int64         `json:"peak_memory_bytes"`
	// WallTime runs from starting the helper to the tree being gone.
	WallTime time.Duration `json:"wall_time"`
	// Limits are the limits the run had.
	Limits Limits `json:"limits"`
	// Counters are the kernel counters the reason was read from.
	Counters Counters `json:"counters"`
	// Cgroups names the cgroup layout used ("v2" or "hybrid"); Cgroup is
	// the run's cgroup name (removed by the time Run returns).
	Cgroups string `json:"cgroups"`
	Cgroup  string `json:"cgroup"`
	// Warm is true when the run claimed a sandbox from the pool.
	Warm bool `json:"warm,omitempty"`
	// Startup runs from the call to Run to the command's release at its
	// exec (cgroups, helper, namespaces, root, network, hand-off): the
	// sandbox's own start cost, before the command's first instruction.
	Startup time.Duration `json:"startup"`
	// Egress is what the egress proxy recorded; nil when the run had no
	// network.
	Egress *EgressReport `json:"egress,omitempty"`
}

// Summary is a one-line human description of the result.
func (r *Result) Summary() string {
	var b strings.Builder
	if r.Exited {
		fmt.Fprintf(&b, "exit %d", r.ExitCode)
	} else {
		fmt.Fprintf(&b, "killed by %s", r.Signal)
	}
	fmt.Fprintf(&b, " (reason: %s)", r.Reason)
	fmt.Fprintf(&b, ", wall %s, cpu %s, peak memory %s",
		r.WallTime.Round(time.Millisecond), r.CPUTime.Round(time.Millisecond), humanBytes(r.PeakMemory))
	return b.String()
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
