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

// BenchmarkWarmStart measures a trivial sandboxed Python run (the whole
// Runner.Run) four ways in one loop, so every variant sees the same machine
// load: cold (the run starts its own helper), warm (claimed from a pool of
// one, refilled before the next timed run), cold with an egress policy
// (namespace network set up and the proxy started per run), and python
// started bare. With LOOMWORK_SANDBOX_BENCH_HELPER naming a binary (a
// built loom-eval), the helper is that binary started as "<bin> sandbox",
// as in the CLI and the coding agent under loom-eval, instead of this small
// test binary.
func BenchmarkWarmStart(b *testing.B) {
	needRootB(b)
	cfg := Config{}
	if bin := os.Getenv("LOOMWORK_SANDBOX_BENCH_HELPER"); bin != "" {
		cfg.Executable, cfg.HelperArgs = bin, []string{"sandbox"}
	}
	start := func(pool int) *Runner {
		c := cfg
		c.Pool = pool
		r, err := New(c)
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		return r
	}
	cold, warm := start(0), start(1)
	defer func() { _ = cold.Shutdown(context.Background()); _ = warm.Shutdown(context.Background()) }()
	policy := &Egress{Allow: []EgressRule{{Host: "files.example.org", Ports: []int{443}}}}
	req := Request{Command: []string{"/usr/bin/python3", "-I", "-c", "pass"}}
	egressReq := req
	egressReq.Egress = policy
	var coldS, warmS, egressS []time.Duration // Result.Startup
	timed := func(r *Runner, req Request, wantWarm bool, startup *[]time.Duration) time.Duration {
		t0 := time.Now()
		res, err := r.Run(context.Background(), req)
		d := time.Since(t0)
		if err != nil || !res.Exited || res.ExitCode != 0 || res.Warm != wantWarm || res.Startup <= 0 {
			b.Fatalf("run: %v %+v", err, res)
		}
		*startup = append(*startup, res.Startup)
		return d
	}
	var coldD, warmD, egressD, bare []time.Duration
	for b.Loop() {
		coldD = append(coldD, timed(cold, req, false, &coldS))
		b.StopTimer()
		for warm.PoolReady() < 1 {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		warmD = append(warmD, timed(warm, req, true, &warmS))
		egressD = append(egressD, timed(cold, egressReq, false, &egressS))
		b.StopTimer()
		t1 := time.Now()
		if err := exec.Command("/usr/bin/python3", "-I", "-c", "pass").Run(); err != nil {
			b.Fatal(err)
		}
		bare = append(bare, time.Since(t1))
		b.StartTimer()
	}
	for _, s := range [][]time.Duration{coldD, warmD, egressD, bare, coldS, warmS, egressS} {
		slices.Sort(s)
	}
	b.ReportMetric(ms(percentile(coldS, 0.50)), "cold-startup-p50-ms")
	b.ReportMetric(ms(percentile(coldS, 0.95)), "cold-startup-p95-ms")
	b.ReportMetric(ms(percentile(warmS, 0.50)), "pool-startup-p50-ms")
	b.ReportMetric(ms(percentile(warmS, 0.95)), "pool-startup-p95-ms")
	b.ReportMetric(ms(percentile(egressS, 0.50)), "egress-startup-p50-ms")
	b.ReportMetric(ms(percentile(egressS, 0.95)), "egress-startup-p95-ms")
	b.ReportMetric(ms(percentile(coldD, 0.50)), "cold-p50-ms")
	b.ReportMetric(ms(percentile(coldD, 0.95)), "cold-p95-ms")
	b.ReportMetric(ms(percentile(warmD, 0.50)), "pool-p50-ms")
	b.ReportMetric(ms(percentile(warmD, 0.95)), "pool-p95-ms")
	b.ReportMetric(ms(percentile(egressD, 0.50)), "egress-cold-p50-ms")
	b.ReportMetric(ms(percentile(egressD, 0.95)), "egress-cold-p95-ms")
	b.ReportMetric(ms(percentile(bare, 0.50)), "bare-p50-ms")
	b.ReportMetric(ms(percentile(bare, 0.95)), "bare-p95-ms")
	b.ReportMetric(0, "ns/op")
}
