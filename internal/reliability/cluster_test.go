package reliability

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	chstore "github.com/loomwork/loomwork/store/clickhouse"
)

var (
	clusterReport = flag.String("cluster.report", "", "write the cluster figures into this Markdown file (relative paths are from the module root), between the cluster figures markers")
	clusterShort  = flag.Bool("cluster.short", false, "half-length phases, as without LOOMWORK_CLUSTER_TEST=full (make test's variant)")
)

const (
	clusterMarkBegin = "<!-- cluster figures: begin (written by TestClusterIngest; do not edit by hand) -->"
	clusterMarkEnd   = "<!-- cluster figures: end -->"
)

// TestClusterIngest is issue 21's scale-out proof on one machine: 2 shards
// × 2 replicas of the libchdb ClickHouse (chtest.StartCluster), two
// stateless `loom-eval serve` writing through the Distributed tables, SDK
// exporters sending to both, and one replica killed with SIGKILL in the
// middle of the ingest and restarted later. Counted span by span: every
// acknowledged span is stored, none twice, both replicas of each shard end
// equal, and reads answer while the replica is down. It also measures
// ingest (spans/s per node) and query latency on the cluster.
//
//	go test ./internal/reliability -run TestClusterIngest -v -count=1 -args -cluster.report docs/clickhouse.md
func TestClusterIngest(t *testing.T) {
	testtier.Slow(t)
	bin := buildLoomEval(t)
	c := chtest.StartCluster(t, 2, 2)
	db := c.NewDatabaseName(t)
	// Full length under make cluster-test and the long tier.
	short := *clusterShort || !(chtest.FullClusterTests(t) || testtier.Long())
	phase := func(d time.Duration) time.Duration {
		if short {
			return d / 2
		}
		return d
	}
	params := []string{"cluster=" + chtest.ClusterName, "cluster_coordinator=none"}
	dsn := c.DSN(db, params...)
	var serves []*serveProc
	for i := range 2 {
		spool := filepath.Join(t.TempDir(), "spool")
		serves = append(serves, startServe(t, bin, "--store", dsn, "--spool-dir", spool))
		t.Logf("serve %d: pid %d, OTLP/gRPC %s", i+1, serves[i].cmd.Process.Pid, serves[i].GRPCAddr)
	}
	reader := openClusterStore(t, dsn)
	fig := clusterFigures{Nodes: len(c.Nodes)}

	// Phase 1: throughput. Back-to-back exporters on both serves.
	// The short run (make test) sends from half the exporters: the same
	// checks, with a core left for the suite's other packages.
	senders := 4
	if short {
		senders = 2
	}
	cfg := loadConfig{Senders: senders, SpansPerExport: 512, Exporter: exporterPatient}
	var loads []*load
	startLoads := func(cfg loadConfig) {
		for _, s := range serves {
			l, err := startLoad(s.GRPCAddr, cfg)
			if err != nil {
				t.Fatal(err)
			}
			loads = append(loads, l)
		}
	}
	startLoads(cfg)
	before := nodeRows(t, c, db)
	t0 := time.Now()
	time.Sleep(phase(10 * time.Second))
	for _, l := range loads {
		l.stop()
	}
	waitSpoolsEmpty(t, serves)
	settled := waitClusterSettled(t, c, db, 2*time.Second, 2*time.Minute)
	took := time.Since(t0)
	after := nodeRows(t, c, db)
	var acked int64
	for _, l := range loads {
		acked += l.ackedSpans()
	}
	fig.ThroughputSpans, fig.ThroughputSecs = settled, took.Seconds()
	fig.AckedPerSec = float64(acked) / took.Seconds()
	for i := range c.Nodes {
		fig.NodeRowsPerSec = append(fig.NodeRowsPerSec, float64(after[i]-before[i])/took.Seconds())
	}
	fig.GetTrace, fig.ListTraces = queryLatency(t, reader, loads[0], 40)

	// Phase 2: a replica dies mid-ingest. Reads during the outage ask for
	// traces of phase 1, which are stored: an acknowledgement of phase 2
	// only says the span is in a serve's spool, and a shard with a replica
	// down takes no writes until it is back.
	stored := loads
	loads = nil
	startLoads(loadConfig{Senders: senders, SpansPerExport: 256, Interval: 100 * time.Millisecond, Exporter: exporterPatient})
	time.Sleep(phase(4 * time.Second))
	const victim = 1 // shard 1, replica 2
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	t.Logf("killed node s%dr%d (SIGKILL)", c.Nodes[victim].Shard, c.Nodes[victim].Replica)
	// Reads keep working while it is down: every shard has another replica.
	var downGet, downList []time.Duration
	var readErrs []string
	for time.Since(killedAt) < phase(10*time.Second) {
		g, l, errs := readOnce(reader, stored[len(downGet)%len(stored)])
		readErrs = append(readErrs, errs...)
		if g > 0 {
			downGet = append(downGet, g)
		}
		if l > 0 {
			downList = append(downList, l)
		}
		time.Sleep(300 * time.Millisecond)
	}
	fig.DownGetTrace, fig.DownListTraces = summarize(downGet), summarize(downList)
	fig.DownReadErrors = len(readErrs)
	if len(readErrs) > 0 {
		t.Errorf("%d reads failed while a replica was down, first: %s", len(readErrs), readErrs[0])
	}
	if len(downGet) == 0 || len(downList) == 0 {
		t.Errorf("no read answered while the replica was down (GetTrace %d, ListTraces %d)", len(downGet), len(downList))
	}
	if err := c.Start(victim); err != nil {
		t.Fatal(err)
	}
	fig.DownSecs = time.Since(killedAt).Seconds()
	t.Logf("restarted node s%dr%d after %.1f s", c.Nodes[victim].Shard, c.Nodes[victim].Replica, fig.DownSecs)
	time.Sleep(phase(4 * time.Second))
	for _, l := range loads {
		l.stop()
	}
	waitSpoolsEmpty(t, serves)
	waitClusterSettled(t, c, db, 3*time.Second, 3*time.Minute)
	for _, s := range serves {
		s.term(60 * time.Second)
	}

	// Count span by span, through the Distributed table (one replica per
	// shard), then replica against replica.
	// Each load has its own nonce: count each against its own keys.
	for _, l := range loads {
		fig.add(tally(l.recs, clusterKeys(t, c, db, l.nonce)))
	}
	for _, l := range loads {
		fig.Attempts = append(fig.Attempts, l.tries.String())
	}
	t.Logf("replica kill: sent %d, acked %d, stored %d, duplicated %d, lost among acked %d", fig.Sent, fig.Acked, fig.Stored, fig.Duplicated, fig.Lost)
	if fig.Lost != 0 {
		t.Errorf("%d acknowledged spans are not in the cluster (want 0)", fig.Lost)
	}
	if fig.Duplicated != 0 {
		t.Errorf("%d spans are stored more than once (want 0)", fig.Duplicated)
	}
	if fig.Acked == 0 {
		t.Error("no span was acknowledged")
	}
	fig.Replicas = replicaCounts(t, c, db)
	for s := 0; s < c.Shards; s++ {
		a, b := fig.Replicas[s*c.Replicas], fig.Replicas[s*c.Replicas+1]
		if a != b {
			t.Errorf("shard %d: replicas hold %d and %d distinct spans; the restarted replica must have caught up", s+1, a, b)
		}
	}
	t.Log(fig.markdown())
	if *clusterReport != "" {
		if err := writeClusterReport(*clusterReport, fig.markdown()); err != nil {
			t.Errorf("write cluster report: %v", err)
		}
	}
}

func openClusterStore(t *testing.T, dsn string) *chstore.Store {
	t.Helper()
	cfg, err := chstore.ConfigFromDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := chstore.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open the cluster store: %v", err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

// nodeQuery runs a one-number query on node i.
func nodeQuery(c *chtest.Cluster, i int, q string) (uint64, error) {
	n := c.Nodes[i]
	if n.Process == nil {
		return 0, fmt.Errorf("node s%dr%d is down", n.Shard, n.Replica)
	}
	opts, err := clickhouse.ParseDSN("clickhouse://" + n.Addr() + "/default")
	if err != nil {
		return 0, err
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(store.WithDefaultProject(context.Background()), 30*time.Second)
	defer cancel()
	var v uint64
	err = conn.QueryRow(ctx, q).Scan(&v)
	return v, err
}

// nodeRows is the row count of spans_local on each node.
func nodeRows(t *testing.T, c *chtest.Cluster, db string) []uint64 {
	t.Helper()
	out := make([]uint64, len(c.Nodes))
	for i := range c.Nodes {
		v, err := nodeQuery(c, i, "SELECT count() FROM "+db+".spans_local")
		if err != nil {
			t.Fatalf("count spans on node %d: %v", i, err)
		}
		out[i] = v
	}
	return out
}

func replicaCounts(t *testing.T, c *chtest.Cluster, db string) []uint64 {
	t.Helper()
	out := make([]uint64, len(c.Nodes))
	for i := range c.Nodes {
		v, err := nodeQuery(c, i, "SELECT uniqExact(trace_id, span_id) FROM "+db+".spans_local")
		if err != nil {
			t.Fatalf("count distinct spans on node %d: %v", i, err)
		}
		out[i] = v
	}
	return out
}

func waitSpoolsEmpty(t *testing.T, serves []*serveProc) {
	t.Helper()
	for i, s := range serves {
		if !waitFor(t.Context(), 3*time.Minute, func() bool {
			h := s.health()
			return h.OK && (h.Spool == nil || h.Spool.Bytes == 0)
		}) {
			t.Errorf("serve %d's spool did not drain within 3 min: %s", i+1, s.health().Raw)
		}
	}
}

// waitClusterSettled waits until the distinct span count through the
// Distributed table stops growing for quiet.
func waitClusterSettled(t *testing.T, c *chtest.Cluster, db string, quiet, within time.Duration) uint64 {
	t.Helper()
	var last uint64
	lastChange := time.Now()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		n, err := nodeQuery(c, 0, "SELECT uniqExact(trace_id, span_id) FROM "+db+".spans")
		if err == nil && n != last {
			last, lastChange = n, time.Now()
		}
		if time.Since(lastChange) >= quiet {
			return last
		}
		time.Sleep(500 * time.Millisecond)
	}
	return last
}

// clusterKeys reads the run's spans as readers see them (FINAL collapses
// raw repeats on each shard): key → copies.
func clusterKeys(t *testing.T, c *chtest.Cluster, db string, nonce [8]byte) map[uint64]int {
	t.Helper()
	opts, err := clickhouse.ParseDSN("clickhouse://" + c.Nodes[0].Addr() + "/default")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rows, err := conn.Query(ctx, "SELECT trace_id, span_id FROM "+db+".spans FINAL")
	if err != nil {
		t.Fatalf("read span ids of %s: %v", db, err)
	}
	defer rows.Close()
	keys := map[uint64]int{}
	for rows.Next() {
		var tid, sid string
		if err := rows.Scan(&tid, &sid); err != nil {
			t.Fatal(err)
		}
		if k, ok := keyOfHex(tid, sid, nonce); ok {
			keys[k]++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// ackedTrace is the trace id of an acknowledged export of l (its first
// span's trace).
func ackedTrace(l *load) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.recs) - 1; i >= 0; i-- {
		if r := l.recs[i]; r.acked {
			return traceIDOf(l.nonce, r.first).String(), true
		}
	}
	return "", false
}

// readOnce times one GetTrace of an acknowledged trace and one ListTraces
// page (newest 50); a zero duration is a read not made or failed.
func readOnce(s store.Store, l *load) (get, list time.Duration, errs []string) {
	ctx, cancel := context.WithTimeout(store.WithDefaultProject(context.Background()), 30*time.Second)
	defer cancel()
	if id, ok := ackedTrace(l); ok {
		t0 := time.Now()
		spans, err := s.GetTrace(ctx, id)
		switch {
		case err != nil:
			errs = append(errs, "GetTrace: "+err.Error())
		case len(spans) == 0:
			errs = append(errs, "GetTrace "+id+": no spans for an acknowledged trace")
		default:
			get = time.Since(t0)
		}
	}
	t0 := time.Now()
	page, err := s.ListTraces(ctx, store.TraceQuery{Limit: 50})
	switch {
	case err != nil:
		errs = append(errs, "ListTraces: "+err.Error())
	case len(page.Traces) == 0:
		errs = append(errs, "ListTraces: empty page")
	default:
		list = time.Since(t0)
	}
	return get, list, errs
}

func queryLatency(t *testing.T, s store.Store, l *load, n int) (get, list latency) {
	t.Helper()
	var gs, ls []time.Duration
	for range n {
		g, li, errs := readOnce(s, l)
		if len(errs) > 0 {
			t.Errorf("read on the cluster: %s", errs[0])
		}
		if g > 0 {
			gs = append(gs, g)
		}
		if li > 0 {
			ls = append(ls, li)
		}
	}
	return summarize(gs), summarize(ls)
}

type latency struct {
	N        int
	P50, P95 time.Duration
}

func summarize(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return latency{N: len(s), P50: s[len(s)/2], P95: s[min(len(s)-1, len(s)*95/100)]}
}

func (l latency) String() string {
	if l.N == 0 {
		return "—"
	}
	return fmt.Sprintf("p50 %s, p95 %s (n=%d)", l.P50.Round(100*time.Microsecond), l.P95.Round(100*time.Microsecond), l.N)
}

type clusterFigures struct {
	Nodes                        int
	ThroughputSpans              uint64
	ThroughputSecs, AckedPerSec  float64
	NodeRowsPerSec               []float64
	GetTrace, ListTraces         latency
	DownGetTrace, DownListTraces latency
	DownReadErrors               int
	DownSecs                     float64
	counts
	Replicas []uint64
	Attempts []string
}

func (f *clusterFigures) add(c counts) {
	f.Sent += c.Sent
	f.Acked += c.Acked
	f.Stored += c.Stored
	f.Duplicated += c.Duplicated
	f.Lost += c.Lost
	f.NeverStored += c.NeverStored
}

func (f *clusterFigures) markdown() string {
	var b strings.Builder
	names := []string{"s1r1", "s1r2", "s2r1", "s2r2"}
	fmt.Fprintf(&b, "Measured %s on this machine (2 cores shared with other work), 2 shards × 2 replicas, two `serve` with spools, 8 OTLP/gRPC SDK exporters (4 per serve):\n\n", time.Now().UTC().Format("2006-01-02"))
	b.WriteString("| figure | value |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| ingest, back-to-back exporters (512-span exports) | %s spans acknowledged/s; %s spans stored in %.1f s, sending to settled |\n", commas(int64(f.AckedPerSec)), commas(int64(f.ThroughputSpans)), f.ThroughputSecs)
	per := make([]string, len(f.NodeRowsPerSec))
	for i, r := range f.NodeRowsPerSec {
		n := fmt.Sprint(i)
		if i < len(names) {
			n = names[i]
		}
		per[i] = fmt.Sprintf("%s %s", n, commas(int64(r)))
	}
	fmt.Fprintf(&b, "| rows written per node, spans/s over the same interval | %s |\n", strings.Join(per, ", "))
	fmt.Fprintf(&b, "| GetTrace of an acknowledged trace, after ingest | %s |\n", f.GetTrace)
	fmt.Fprintf(&b, "| ListTraces, newest 50, after ingest | %s |\n", f.ListTraces)
	fmt.Fprintf(&b, "| replica s1r2 killed (SIGKILL) under load, restarted after | %.1f s |\n", f.DownSecs)
	fmt.Fprintf(&b, "| GetTrace while it was down | %s; %d reads failed |\n", f.DownGetTrace, f.DownReadErrors)
	fmt.Fprintf(&b, "| ListTraces while it was down | %s |\n", f.DownListTraces)
	fmt.Fprintf(&b, "| spans of the kill phase: sent / acknowledged / stored / duplicated / **lost among acknowledged** | %s / %s / %s / %d / **%d** |\n", commas(f.Sent), commas(f.Acked), commas(f.Stored), f.Duplicated, f.Lost)
	reps := make([]string, len(f.Replicas))
	for i, r := range f.Replicas {
		reps[i] = fmt.Sprintf("%s %s", names[min(i, len(names)-1)], commas(int64(r)))
	}
	fmt.Fprintf(&b, "| distinct spans per node at the end | %s |\n", strings.Join(reps, ", "))
	fmt.Fprintf(&b, "| exporters' gRPC attempts in the kill phase (per serve) | %s |\n", strings.Join(f.Attempts, "; "))
	return b.String()
}

// writeClusterReport puts md between the cluster markers of path.
func writeClusterReport(path, md string) error {
	if !filepath.IsAbs(path) {
		root, err := moduleRoot()
		if err != nil {
			return err
		}
		path = filepath.Join(root, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, clusterMarkBegin), strings.Index(s, clusterMarkEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q … %q markers", path, clusterMarkBegin, clusterMarkEnd)
	}
	s = s[:i+len(clusterMarkBegin)] + "\n" + md + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}
