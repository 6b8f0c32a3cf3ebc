package collector

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Bounds of the default memory limit.
const (
	minDefaultMemoryMiB = 512
	maxDefaultMemoryMiB = 2048
)

// DefaultMemoryLimitMiB is the memory limit serve runs with when none is
// given: an eighth of the memory the process may use (the cgroup's limit
// when there is one, else the machine's), at least 512 MiB and at most
// 2 GiB. Ingest holds little: admitted requests while they are decoded,
// mapped and handed on — with the spool, data waiting for the store waits on
// disk, not in memory — so more memory buys no throughput, while the old
// default (80% of the machine, 19 GB here) let a flood grow the process to
// gigabytes before anything was refused.
func DefaultMemoryLimitMiB() uint32 {
	return defaultMemoryLimitMiB(availableMemory())
}

func defaultMemoryLimitMiB(total uint64) uint32 {
	mib := total >> 20 / 8
	return uint32(min(max(mib, minDefaultMemoryMiB), maxDefaultMemoryMiB))
}

// availableMemory is the cgroup v2 memory.max when set, else MemTotal from
// /proc/meminfo, else 0 (unknown: the default is then the minimum).
func availableMemory() uint64 {
	total := uint64(0)
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				if kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil {
					total = kb << 10
				}
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64); err == nil && (total == 0 || n < total) {
			total = n
		}
	}
	return total
}

// GCMemoryLimit is the Go runtime's soft memory limit for a memory limit of
// limitMiB: 60%, below the memory limiter's refusal threshold (70%), so
// that with a high GC target (DefaultGCPercent) the collector collects
// garbage before the limiter mistakes it for load and refuses data.
func GCMemoryLimit(limitMiB uint32) int64 {
	return int64(limitMiB) << 20 * 6 / 10
}
