// Command throughput measures stored spans per second, CPU per span, peak
// RSS and bytes on disk per span for two OTLP → ClickHouse ingest paths on
// the same load (issue 17's side-by-side table):
//
//   - peer: the OpenTelemetry Collector v0.165 with the core otlpreceiver,
//     the batch processor (send_batch_size 5000) and the contrib
//     clickhouseexporter v0.165.1 (scripts/peercollector);
//   - serve: loom-eval serve --store clickhouse://… (cmd/loom-eval).
//
// Every run gets a fresh ClickHouse 26.7 (scripts/clickhouse.sh start) and
// a fresh target process, both on 127.0.0.1. N senders, each on its own
// gRPC connection, send pre-marshaled OTLP/gRPC requests of agent-shaped
// spans (collector/agenttrace) back to back for a fixed time; then the
// harness waits until every acknowledged span is in ClickHouse. Runs are
// interleaved: for each sender count, round 1 of every target, then round
// 2, and so on. See docs/throughput.md for the definitions.
//
//	cd scripts/throughput && go run . -duration 40s -senders 4,16 -rounds 2
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	Duration      time.Duration
	Senders       []int
	Rounds        int
	Targets       []string
	RequestSpans  int
	DrainTimeout  time.Duration
	Optimize      bool
	ServeArgs     string
	PeerAsync     bool
	ServeTable    string
	ServeTraceCol string
	ServeSpanCol  string
	Repo          string
	Out           string
	LoomEval      string
	Peer          string
	Keep          bool
	Lock          string
	Load          string
	PoolSpans     int
	Seed          uint64
	Sessions      string
	Doc           string
	Retries       int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "throughput: %v\n", err)
		if errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "Try: go run . -h")
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var (
	errUsage       = errors.New("usage")
	errProcessDied = errors.New("a process of the run died")
)

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("throughput", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.Duration, "duration", 40*time.Second, "how long the senders send in each run (e.g. 10s for a quick check)")
	senders := fs.String("senders", "4", "comma-separated sender counts; each sender is one gRPC connection with one request in flight")
	fs.IntVar(&o.Rounds, "rounds", 10, "paired rounds per sender count: each round runs every target once, the order alternating from round to round")
	targets := fs.String("targets", "peer,serve", "comma-separated targets in the order of odd rounds (even rounds reverse it): peer, serve")
	fs.IntVar(&o.RequestSpans, "request-spans", 1000, "spans per OTLP request: whole traces, so agent requests carry this many or a trace more (templated: a multiple of 10)")
	fs.StringVar(&o.Load, "load", "agent", "agent: varied agent traffic from a generated pool (docs/throughput.md); templated: issue 17's 16 agenttrace templates")
	fs.IntVar(&o.PoolSpans, "pool-spans", 250_000, "agent load: spans generated into the pool requests are composed from")
	fs.Uint64Var(&o.Seed, "seed", 42, "seed of the load")
	fs.StringVar(&o.Sessions, "sessions", "own", "process arrangement, the same for both targets: own = ClickHouse and the target each in a session of its own (setsid; under autogroup scheduling each gets its own CPU share, as separate services do); shared = both in the harness's session")
	fs.IntVar(&o.Retries, "retries", 1, "run a run again this many times when its ClickHouse or target died during it (the report lists each)")
	fs.StringVar(&o.Doc, "doc", "", "also write the results into this Markdown file between its <!-- throughput:begin --> and <!-- throughput:end --> lines (e.g. ../../docs/throughput.md)")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", 3*time.Minute, "after the senders stop, how long to wait for every acknowledged span to be stored")
	fs.BoolVar(&o.Optimize, "optimize", true, "after measuring, OPTIMIZE TABLE … FINAL every table of the run's database and measure bytes on disk again")
	fs.StringVar(&o.ServeArgs, "serve-args", "", "extra arguments for loom-eval serve, split on spaces; {dir} is the run's directory (e.g. \"--spool-dir {dir}/spool\")")
	fs.BoolVar(&o.PeerAsync, "peer-async-insert", true, "the peer exporter's async_insert (its default is true)")
	fs.StringVar(&o.ServeTable, "serve-table", "spans", "table serve stores spans in")
	fs.StringVar(&o.ServeTraceCol, "serve-trace-col", "trace_id", "trace id column of -serve-table")
	fs.StringVar(&o.ServeSpanCol, "serve-span-col", "span_id", "span id column of -serve-table")
	fs.StringVar(&o.Repo, "repo", "", "repository root (default: found upward from the working directory)")
	fs.StringVar(&o.Out, "out", "", "directory for binaries, run logs, results.json and results.md (default: a new directory under $TMPDIR)")
	fs.StringVar(&o.LoomEval, "loom-eval", "", "use this loom-eval binary instead of building ./cmd/loom-eval")
	fs.StringVar(&o.Peer, "peer", "", "use this peercollector binary instead of building scripts/peercollector")
	fs.BoolVar(&o.Keep, "keep", false, "keep each run's ClickHouse data directory")
	fs.StringVar(&o.Lock, "lock", "", "hold an exclusive flock(2) on this file during the runs of each sender count (not during the builds), e.g. /work/bench.lock on a shared machine")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	for s := range strings.SplitSeq(*senders, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return o, fmt.Errorf("%w: -senders %q: want positive integers", errUsage, *senders)
		}
		o.Senders = append(o.Senders, n)
	}
	for t := range strings.SplitSeq(*targets, ",") {
		t = strings.TrimSpace(t)
		if t != "peer" && t != "serve" {
			return o, fmt.Errorf("%w: -targets: unknown target %q (peer, serve)", errUsage, t)
		}
		o.Targets = append(o.Targets, t)
	}
	switch {
	case o.Duration <= 0:
		return o, fmt.Errorf("%w: -duration %s: want > 0", errUsage, o.Duration)
	case o.Rounds < 1:
		return o, fmt.Errorf("%w: -rounds %d: want ≥ 1", errUsage, o.Rounds)
	case o.Load != "agent" && o.Load != "templated":
		return o, fmt.Errorf("%w: -load %q: want agent or templated", errUsage, o.Load)
	case o.Sessions != "own" && o.Sessions != "shared":
		return o, fmt.Errorf("%w: -sessions %q: want own or shared", errUsage, o.Sessions)
	case o.Load == "templated" && (o.RequestSpans < spansPerTrace || o.RequestSpans%spansPerTrace != 0):
		return o, fmt.Errorf("%w: -request-spans %d: the templated load wants a positive multiple of %d", errUsage, o.RequestSpans, spansPerTrace)
	case o.RequestSpans < 1:
		return o, fmt.Errorf("%w: -request-spans %d: want ≥ 1", errUsage, o.RequestSpans)
	case o.Load == "agent" && o.PoolSpans < 10*o.RequestSpans:
		return o, fmt.Errorf("%w: -pool-spans %d: want at least ten requests' worth (%d)", errUsage, o.PoolSpans, 10*o.RequestSpans)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if o.Repo == "" {
		if o.Repo, err = findRepo(); err != nil {
			return err
		}
	}
	if o.Out == "" {
		if o.Out, err = os.MkdirTemp("", "loomwork-throughput-"); err != nil {
			return fmt.Errorf("output directory: %w", err)
		}
	}
	if o.Out, err = filepath.Abs(o.Out); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(o.Out, "bin"), 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	if o.LoomEval == "" {
		o.LoomEval = filepath.Join(o.Out, "bin", "loom-eval")
		log.Info("building loom-eval", "out", o.LoomEval)
		if err := goBuild(ctx, o.Repo, o.LoomEval, "./cmd/loom-eval", stderr); err != nil {
			return err
		}
	}
	if o.Peer == "" && contains(o.Targets, "peer") {
		o.Peer = filepath.Join(o.Out, "bin", "peercollector")
		log.Info("building scripts/peercollector", "out", o.Peer)
		if err := goBuild(ctx, filepath.Join(o.Repo, "scripts", "peercollector"), o.Peer, ".", stderr); err != nil {
			return err
		}
	}
	src, desc, err := makeLoad(o, log)
	if err != nil {
		return err
	}
	rep := report{
		Started: time.Now().UTC(), Options: o, Cores: runtime.NumCPU(),
		Load: desc, GoVersion: runtime.Version(),
	}
	if b, err := exec.CommandContext(ctx, "git", "-C", o.Repo, "rev-parse", "--short", "HEAD").Output(); err == nil {
		rep.Commit = strings.TrimSpace(string(b))
	}
	n := 0
	for _, s := range o.Senders {
		// One lock per sender count: the runs compared with each other
		// (peer, serve, peer, serve) run back to back, and others get the
		// machine between blocks of a few minutes.
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("stopped before the %d-sender runs: %w", s, err)
		}
		unlock, err := lock(o.Lock, log)
		if err != nil {
			return err
		}
		for round := 1; round <= o.Rounds; round++ {
			for _, t := range roundOrder(o.Targets, round) {
				n++
				if err := ctx.Err(); err != nil {
					unlock()
					return fmt.Errorf("stopped before run %d: %w", n, err)
				}
				log.Info("run", "n", n, "target", t, "senders", s, "round", round, "duration", o.Duration)
				r, err := oneRun(ctx, o, n, t, s, round, src, log)
				for try := 1; err != nil && errors.Is(err, errProcessDied) && try <= o.Retries && ctx.Err() == nil; try++ {
					// Rare, and void only this run: its ClickHouse or target
					// died (the process's exit status is in err).
					log.Warn("a process died; running again", "n", n, "target", t, "round", round, "error", err)
					rep.Retried = append(rep.Retried, fmt.Sprintf("run %d (%s, round %d): %v", n, t, round, err))
					r, err = oneRun(ctx, o, n, t, s, round, src, log)
				}
				if err != nil {
					unlock()
					return fmt.Errorf("run %d (%s, %d senders, round %d): %w", n, t, s, round, err)
				}
				rep.Runs = append(rep.Runs, r)
				log.Info("result", "target", t, "senders", s, "stored_per_s", int(r.StoredPerSec),
					"acked", r.Acked, "distinct", r.Distinct, "dup", r.Duplicates, "lost", r.Lost,
					"target_cpu_per_M", round1(r.TargetCPUPerM), "ch_cpu_per_M", round1(r.CHCPUPerM))
				if err := rep.write(o.Out); err != nil { // after every run: a partial result survives a crash
					unlock()
					return err
				}
			}
		}
		unlock()
	}
	rep.Finished = time.Now().UTC()
	if err := rep.write(o.Out); err != nil {
		return err
	}
	fmt.Fprint(stdout, rep.markdown())
	fmt.Fprintf(stdout, "\nresults: %s, %s\n", filepath.Join(o.Out, "results.json"), filepath.Join(o.Out, "results.md"))
	if o.Doc != "" {
		if err := spliceDoc(o.Doc, rep.markdown()); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote the tables into %s\n", o.Doc)
	}
	return nil
}

// roundOrder is the targets' order in a round: as given in odd rounds,
// reversed in even ones, so neither target always runs first (after a
// fresh start of everything, or right after the other's heavy merges).
func roundOrder(targets []string, round int) []string {
	if round%2 == 1 {
		return targets
	}
	out := slices.Clone(targets)
	slices.Reverse(out)
	return out
}

// makeLoad builds the load the options ask for and describes it.
func makeLoad(o options, log *slog.Logger) (loadSource, loadInfo, error) {
	if o.Load == "templated" {
		templates, err := makeTemplates(16, o.RequestSpans, o.Seed, time.Now().Add(-time.Hour))
		if err != nil {
			return nil, loadInfo{}, err
		}
		return templatedLoad(templates), loadInfo{Name: "templated", Requests: 16, RequestBytes: len(templates[0].body), RequestSpans: o.RequestSpans}, nil
	}
	began := time.Now()
	l, err := makeAgentLoad(o.Seed, o.PoolSpans, o.RequestSpans)
	if err != nil {
		return nil, loadInfo{}, err
	}
	info := l.info()
	log.Info("agent load pool generated", "traces", info.PoolTraces, "spans", info.PoolSpans, "bytes", info.PoolBytes, "took", time.Since(began).Round(time.Millisecond))
	return l, info, nil
}

func oneRun(ctx context.Context, o options, n int, tname string, senders, round int, src loadSource, log *slog.Logger) (res result, err error) {
	dir := filepath.Join(o.Out, fmt.Sprintf("run%02d-%s-s%d-r%d", n, tname, senders, round))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, fmt.Errorf("run directory: %w", err)
	}
	chDir := filepath.Join(dir, "clickhouse")
	ch, err := startClickHouse(ctx, o.Repo, o.LoomEval, chDir, o.Sessions)
	if err != nil {
		return res, err
	}
	defer func() {
		err = errors.Join(err, ch.stop())
		if !o.Keep {
			err = errors.Join(err, os.RemoveAll(filepath.Join(chDir, "data")))
		}
	}()
	db := fmt.Sprintf("tp_%s_%d", tname, n)
	var (
		tg target
		p  *process
	)
	switch tname {
	case "peer":
		tg = target{Name: "peer", Table: "otel_traces", TraceCol: "TraceId", SpanCol: "SpanId"}
		p, err = startPeer(ctx, o.Peer, dir, ch.TCPAddr, db, o.PeerAsync, o.Sessions)
	case "serve":
		tg = target{Name: "serve", Table: o.ServeTable, TraceCol: o.ServeTraceCol, SpanCol: o.ServeSpanCol}
		p, err = startServe(ctx, o.LoomEval, dir, ch.TCPAddr, db, o.ServeArgs, o.Sessions)
	}
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, p.stop(60*time.Second)) }()
	res = result{Target: tname, Senders: senders, Round: round, Order: n, Database: db, Dir: dir}
	res.LoadAvg = loadAvg()

	// CPU from just before the first send to the moment every acknowledged
	// span is stored (the drain included: the peer's exporter does its work
	// after the ack).
	tcpu0, err1 := procCPU(p.PID)
	ccpu0, err2 := procCPU(ch.PID)
	busy0, err3 := machineBusy()
	if err := errors.Join(err1, err2, err3); err != nil {
		return res, err
	}
	self0 := selfCPU()
	load, err := drive(ctx, p.GRPCAddr, src, senders, o.Duration)
	if err != nil {
		return res, err
	}
	res.Requests, res.Failed, res.FirstError = load.Requests, load.Failed, load.FirstError
	res.Acked, res.Rejected = load.Acked, load.Rejected
	res.SendSeconds = load.Stopped.Sub(load.Began).Seconds()
	res.AckedPerSec = float64(load.Acked) / res.SendSeconds

	// Drain: poll count() until it reaches the acknowledged spans, then
	// confirm with the distinct (trace id, span id) count, because count()
	// also counts duplicates (the peer's exporter re-sends an insert that
	// timed out on its side but succeeded in ClickHouse), which would end
	// the wait before every acknowledged span is in.
	countQ := fmt.Sprintf("SELECT count() FROM `%s`.`%s`", db, tg.Table)
	distinctQ := fmt.Sprintf("SELECT uniqExact(`%s`, `%s`) FROM `%s`.`%s`", tg.TraceCol, tg.SpanCol, db, tg.Table)
	drainEnd := time.Now().Add(o.DrainTimeout)
	var stored int64
	storedAt := time.Now()
	for q, pause := countQ, 100*time.Millisecond; ; {
		// The query sees the parts that exist when it starts: stamp the
		// start, so the query's own run time (~0.5 s for uniqExact over
		// millions of rows on a busy machine) is not counted as drain.
		asked := time.Now()
		v, err := ch.queryInts(ctx, q)
		storedAt = asked
		if err == nil && len(v) == 1 {
			stored = v[0]
		}
		if stored >= load.Acked {
			if q == distinctQ {
				res.Complete = true
				break
			}
			q, pause = distinctQ, 500*time.Millisecond
			continue
		}
		if storedAt.After(drainEnd) || ctx.Err() != nil || ch.proc.died("") != nil || p.died("") != nil {
			log.Warn("drain timed out", "acked", load.Acked, "stored", stored, "query_error", err)
			break
		}
		time.Sleep(pause)
	}
	// A process that died during the run makes it void: say which, and
	// how it ended.
	if err := errors.Join(ch.proc.died("ClickHouse"), p.died(tname)); err != nil {
		return res, fmt.Errorf("%w: %w", errProcessDied, err)
	}
	tcpu1, err1 := procCPU(p.PID)
	ccpu1, err2 := procCPU(ch.PID)
	busy1, err3 := machineBusy()
	self1 := selfCPU()
	trss, err4 := peakRSS(p.PID)
	crss, err5 := peakRSS(ch.PID)
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		return res, err
	}
	wall := storedAt.Sub(load.Began).Seconds()
	res.DrainSeconds = storedAt.Sub(load.Stopped).Seconds()
	res.TargetCPUSeconds = (tcpu1 - tcpu0).Seconds()
	res.CHCPUSeconds = (ccpu1 - ccpu0).Seconds()
	res.ClientCPUSeconds = (self1 - self0).Seconds()
	res.OtherCores = ((busy1 - busy0).Seconds() - res.TargetCPUSeconds - res.CHCPUSeconds - res.ClientCPUSeconds) / wall
	res.TargetPeakRSS, res.CHPeakRSS = trss, crss

	// Loss and duplication, span by span.
	v, err := ch.queryInts(ctx, fmt.Sprintf("SELECT count(), uniqExact(`%s`, `%s`) FROM `%s`.`%s`", tg.TraceCol, tg.SpanCol, db, tg.Table))
	if err != nil || len(v) != 2 {
		return res, fmt.Errorf("count stored spans: %w (got %v)", err, v)
	}
	res.Stored, res.Distinct = v[0], v[1]
	res.Duplicates = res.Stored - res.Distinct
	res.Lost = max(0, res.Acked-res.Distinct)
	res.StoredPerSec = float64(res.Distinct) / wall
	if res.Distinct > 0 {
		m := float64(res.Distinct) / 1e6
		res.TargetCPUPerM = res.TargetCPUSeconds / m
		res.CHCPUPerM = res.CHCPUSeconds / m
		res.ClientCPUPerM = res.ClientCPUSeconds / m
	}
	// Merge amplification, before OPTIMIZE adds its own: rows merged per
	// row inserted (both tables of the run's database and the server's
	// own system tables; the span table dominates).
	if v, err := ch.queryInts(ctx, "SELECT sumIf(value, event = 'MergedRows'), sumIf(value, event = 'InsertedRows') FROM system.events"); err == nil && len(v) == 2 && v[1] > 0 {
		res.MergedPerInserted = float64(v[0]) / float64(v[1])
	}
	if res.DiskBytes, err = ch.diskBytes(ctx, db); err != nil {
		return res, err
	}
	if res.Distinct > 0 {
		res.BytesPerSpan = float64(res.DiskBytes) / float64(res.Distinct)
	}
	if o.Optimize {
		if err := ch.optimizeAll(ctx, db); err != nil {
			return res, err
		}
		if res.DiskBytesOptimized, err = ch.diskBytes(ctx, db); err != nil {
			return res, err
		}
		if res.Distinct > 0 {
			res.BytesPerSpanOptimized = float64(res.DiskBytesOptimized) / float64(res.Distinct)
		}
	}
	return res, nil
}

// lock takes an exclusive flock on path (nothing when path is empty) and
// returns its release.
func lock(path string, log *slog.Logger) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	began := time.Now()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if w := time.Since(began); w > time.Second {
		log.Info("waited for the lock", "path", path, "waited", w.Round(time.Second))
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}

func goBuild(ctx context.Context, dir, out, pkg string, stderr io.Writer) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s in %s: %w", pkg, dir, err)
	}
	return nil
}

// findRepo walks up from the working directory to the Loomwork checkout.
func findRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(filepath.Join(d, "cmd", "loom-eval")); err == nil && fi.IsDir() {
			if _, err := os.Stat(filepath.Join(d, "scripts", "clickhouse.sh")); err == nil {
				return d, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("find repository: no directory above %s has cmd/loom-eval and scripts/clickhouse.sh; pass -repo", dir)
		}
	}
}

// machineBusy is the CPU time all cores spent not idle (first line of
// /proc/stat, minus idle and iowait).
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("machine cpu: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("machine cpu: unexpected /proc/stat line %q", line)
	}
	var busy int64
	for i, s := range f[1:] {
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest time is already in user
			continue
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("machine cpu: %q: %w", line, err)
		}
		busy += v
	}
	return time.Duration(busy) * time.Second / userHZ, nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func round1(x float64) float64 { return float64(int(x*10+0.5)) / 10 }
