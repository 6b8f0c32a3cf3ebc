package sandbox

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted)-1) + 0.5)
	return sorted[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkRunTrivialPython measures a whole sandboxed `python3 -I -c pass`
// (helper re-exec, namespaces, cgroups, mounts, seccomp, python start-up,
// teardown) and, for comparison, the same python started bare. The sandbox's
// own overhead is the difference of the two.
func BenchmarkRunTrivialPython(b *testing.B) {
	needRootB(b)
	r, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = r.Shutdown(context.Background()) }()
	req := Request{Command: []string{"/usr/bin/python3", "-I", "-c", "pass"}}
	var sandboxed, bare []time.Duration
	for b.Loop() {
		t0 := time.Now()
		res, err := r.Run(context.Background(), req)
		sandboxed = append(sandboxed, time.Since(t0))
		if err != nil || !res.Exited || res.ExitCode != 0 {
			b.Fatalf("run: %v %+v", err, res)
		}
		b.StopTimer()
		t1 := time.Now()
		if err := exec.Command("/usr/bin/python3", "-I", "-c", "pass").Run(); err != nil {
			b.Fatal(err)
		}
		bare = append(bare, time.Since(t1))
		b.StartTimer()
	}
	slices.Sort(sandboxed)
	slices.Sort(bare)
	b.ReportMetric(ms(percentile(sandboxed, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(sandboxed, 0.95)), "p95-ms")
	b.ReportMetric(ms(percentile(bare, 0.50)), "bare-p50-ms")
	b.ReportMetric(ms(percentile(sandboxed, 0.50)-percentile(bare, 0.50)), "overhead-p50-ms")
	b.ReportMetric(ms(percentile(sandboxed, 0.95)-percentile(bare, 0.95)), "overhead-p95-ms")
}

// BenchmarkForkBombRefusal measures, from inside the sandbox, how long a
// fork loop runs before the first fork past a 32-task pids limit is refused.
func BenchmarkForkBombRefusal(b *testing.B) {
	needRootB(b)
	r, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = r.Shutdown(context.Background()) }()
	code := `
import json, os, time
t0 = time.monotonic(); n = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        print(json.dumps({'forks': n, 'ms': (time.monotonic() - t0) * 1000})); break
    if pid == 0:
        time.sleep(30); os._exit(0)
    n += 1
`
	var refusal []time.Duration
	var forks int
	for b.Loop() {
		res, err := r.Run(context.Background(), Request{Command: []string{"/usr/bin/python3", "-I", "-c", code}, Limits: Limits{Tasks: 32}})
		if err != nil || res.Counters.PidsMax < 1 {
			b.Fatalf("run: %v %+v", err, res)
		}
		var got struct {
			Forks int
			MS    float64
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(res.Stdout)), &got); err != nil {
			b.Fatalf("decode %q: %v", res.Stdout, err)
		}
		forks = got.Forks
		refusal = append(refusal, time.Duration(got.MS*float64(time.Millisecond)))
	}
	slices.Sort(refusal)
	b.ReportMetric(float64(forks+1), "refused-at-fork")
	b.ReportMetric(ms(percentile(refusal, 0.50)), "refusal-p50-ms")
	b.ReportMetric(ms(percentile(refusal, 0.95)), "refusal-p95-ms")
}

func needRootB(b *testing.B) {
	b.Helper()
	if euid := os.Geteuid(); euid != 0 {
		b.Skipf("needs root (got euid %d)", euid)
	}
}
