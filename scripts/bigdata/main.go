// Command bigdata is the one-command big-data benchmark of issue 36: it
// loads 100,000 agent traces of 10 spans (storetest.GenerateTraces, a
// fifth of them turns of 10-turn conversations, GenerateConversation) plus
// one 100,000-span and one 1,000,000-span trace into each store (a SQLite
// file; ClickHouse at LOOMWORK_CLICKHOUSE_DSN, or a server it starts with
// scripts/clickhouse.sh in the cache directory), then measures every list
// query (newest, each filter, attribute search, each sort both ways,
// sessions) and the list page with the big traces on its first page
// against one without, and runs the trace page's big-trace benchmark
// (go test ./web -bench BenchmarkBigTrace) when the branch has it. It
// prints a table and writes docs/bench-bigdata.md.
//
// The loaded stores are kept in the cache directory (-dir) and reused by
// the next run when their data version matches; -reload loads them again.
//
//	scripts/bigdata.sh                  # both stores, writes docs/bench-bigdata.md
//	scripts/bigdata.sh -stores sqlite   # one store
//
// (scripts/bigdata.sh is "cd scripts/bigdata && go run . ARGS": the
// command is a module of its own, as scripts may import only scripts in
// the main one; it runs from the repository's root.)
//
// Server time: for SQLite (in process) the wall time of the store call and
// this process's CPU time over it; for ClickHouse the server's own
// duration and CPU (user + system) of the call's queries, from
// system.query_log, and the client's wall time.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
	"github.com/loomwork/loomwork/store/sqlite"
	"github.com/loomwork/loomwork/store/storetest"
	"github.com/loomwork/loomwork/web"
)

// dataVersion names the generated data; a cached store of another version
// is loaded again.
const dataVersion = "v1"

type config struct {
	dir      string
	stores   []string
	traces   int
	runs     int
	out      string
	reload   bool
	webBench bool
	big      []int
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("bigdata: ")
	var cfg config
	cache := os.Getenv("LOOMWORK_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "loomwork")
	}
	stores := flag.String("stores", "sqlite,clickhouse", "stores to measure (sqlite, clickhouse)")
	flag.StringVar(&cfg.dir, "dir", filepath.Join(cache, "bigdata"), "cache directory for the loaded stores")
	flag.IntVar(&cfg.traces, "traces", 100_000, "10-span traces to load")
	flag.IntVar(&cfg.runs, "runs", 7, "timed runs of each query (after one warm-up)")
	flag.StringVar(&cfg.out, "out", "docs/bench-bigdata.md", "markdown report to write (\"\" for none)")
	flag.BoolVar(&cfg.reload, "reload", false, "load the stores again even when cached")
	flag.BoolVar(&cfg.webBench, "web-bench", true, "run go test ./web -bench BenchmarkBigTrace")
	big := flag.String("big", "100000,1000000", "span counts of the big traces")
	flag.Parse()
	cfg.stores = strings.Split(*stores, ",")
	for _, f := range strings.Split(*big, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 2 {
			log.Fatalf("-big: %q is not a span count", f)
		}
		cfg.big = append(cfg.big, n)
	}
	if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
		log.Fatal(err)
	}
	if err := chdirRoot(); err != nil {
		log.Fatal(err)
	}
	if err := run(context.Background(), cfg); err != nil {
		log.Fatal(err)
	}
}

// chdirRoot makes the repository's root (the first directory up from here
// holding scripts/clickhouse.sh) the working directory.
func chdirRoot() error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "scripts", "clickhouse.sh")); err == nil {
			return os.Chdir(d)
		}
		if filepath.Dir(d) == d {
			return fmt.Errorf("no repository root (with scripts/clickhouse.sh) above %s", dir)
		}
	}
}

// report is what one run found, for the markdown page.
type report struct {
	machine  []string
	stores   []storeReport
	webBench string
	command  string
}

type storeReport struct {
	name    string
	load    string // how the data got there
	results []result
	pages   []result
}

// result is one query's measurements over the timed runs.
type result struct {
	name, what        string
	wall              []time.Duration // client (or in-process) wall time
	cpu               []time.Duration // SQLite: this process; ClickHouse: the server
	server            []time.Duration // ClickHouse: the server's duration
	rows              int             // rows on the page
	bytes             int             // response bytes (pages)
	readRows, readMiB float64         // ClickHouse: read by the server (median run)
}

func run(ctx context.Context, cfg config) error {
	ctx = store.WithDefaultProject(ctx)
	rep := report{command: strings.TrimSpace("scripts/bigdata.sh " + strings.Join(os.Args[1:], " "))}
	rep.machine = machine()
	d := newDataset(cfg)
	for _, name := range cfg.stores {
		var sr storeReport
		var err error
		switch name {
		case "sqlite":
			sr, err = benchSQLite(ctx, cfg, d)
		case "clickhouse":
			sr, err = benchClickHouse(ctx, cfg, d)
		default:
			return fmt.Errorf("-stores: unknown store %q", name)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		rep.stores = append(rep.stores, sr)
		printStore(os.Stdout, sr)
	}
	if cfg.webBench {
		rep.webBench = webBench()
		fmt.Println(rep.webBench)
	} else {
		rep.webBench = "not run here (-web-bench=false): go test ./web -run '^$' -bench BenchmarkBigTrace -benchtime 1x measures it; docs/bench-bigdata-trace.md has its last figures"
	}
	rep.machine = append(rep.machine, "load average after: "+loadavg())
	if cfg.out == "" {
		return nil
	}
	f, err := os.Create(cfg.out)
	if err != nil {
		return err
	}
	defer f.Close()
	writeMarkdown(f, cfg, rep)
	log.Printf("wrote %s", cfg.out)
	return f.Close()
}

// dataset generates the benchmark's spans, the same for every run.
type dataset struct {
	cfg config
	// probe holds values of stored traces the selective queries look for.
	probe storetest.SearchProbe
	// bigStart is the start of the first big trace: every regular trace
	// starts before it.
	bigStart time.Time
	mid      time.Time // a time in the middle of the regular traces
	bigIDs   []string
}

const (
	chunkTraces = 5000
	chunkSpan   = 400 * time.Second // GenerateTraces' 5,000 traces take ~300 s
	convTurns   = 10
)

var epoch = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func newDataset(cfg config) *dataset {
	d := &dataset{cfg: cfg}
	chunks := (cfg.traces + chunkTraces - 1) / chunkTraces
	d.bigStart = epoch.Add(time.Duration(chunks)*chunkSpan + time.Hour)
	d.mid = epoch.Add(time.Duration(chunks) * chunkSpan / 2)
	// The probe values come from the middle chunk (generated again here:
	// a cached store is not loaded).
	c := chunks / 2
	n := min(chunkTraces, cfg.traces-c*chunkTraces)
	d.setProbe(storetest.GenerateTraces(n-n/5/convTurns*convTurns, 10, int64(4000+c)))
	return d
}

// each calls fn with the regular traces, chunk by chunk, in time order:
// four fifths GenerateTraces, one fifth turns of convTurns-turn
// conversations spread over the same time.
func (d *dataset) each(fn func(spans []store.Span) error) error {
	chunks := (d.cfg.traces + chunkTraces - 1) / chunkTraces
	left := d.cfg.traces
	for c := 0; c < chunks; c++ {
		n := min(chunkTraces, left)
		left -= n
		conv := n / 5 / convTurns
		plain := n - conv*convTurns
		spans := storetest.GenerateTraces(plain, 10, int64(4000+c))
		shift := time.Duration(c) * chunkSpan
		for i := range spans {
			shiftSpan(&spans[i], shift)
		}
		from := epoch.Add(shift)
		for k := 0; k < conv; k++ {
			id := fmt.Sprintf("conv-%03d-%03d", c, k)
			start := from.Add(time.Duration(k) * chunkSpan / time.Duration(conv+1))
			spans = append(spans, storetest.GenerateConversation(id, convTurns, 10, int64(9000+c*1000+k), start, 25*time.Second)...)
		}
		if err := fn(spans); err != nil {
			return err
		}
	}
	return nil
}

func shiftSpan(sp *store.Span, by time.Duration) {
	sp.StartTime, sp.EndTime = sp.StartTime.Add(by), sp.EndTime.Add(by)
	for e := range sp.Events {
		sp.Events[e].Time = sp.Events[e].Time.Add(by)
	}
}

func (d *dataset) setProbe(spans []store.Span) {
	for _, sp := range spans[len(spans)/2:] {
		if id, ok := sp.Attributes.String(semconv.AttrToolCallID); ok && d.probe.ToolCallID == "" {
			d.probe.ToolCallID = id
		}
		if len(sp.RetrievedDocs) > 0 && d.probe.Document == "" {
			d.probe.Document = sp.RetrievedDocs[0]
		}
	}
	d.probe.Conversation = "conv-000-000"
}

// bigTrace returns the i-th big trace (GenerateTraces with one trace),
// starting an hour after the one before, after every regular trace.
func (d *dataset) bigTrace(i int) []store.Span {
	spans := storetest.GenerateTraces(1, d.cfg.big[i], int64(777+i))
	shift := d.bigStart.Add(time.Duration(i) * time.Hour).Sub(spans[0].StartTime)
	for k := range spans {
		shiftSpan(&spans[k], shift)
	}
	return spans
}

// load writes the dataset into st: regular traces in batches of batch
// spans, then the big traces, each in batches.
func (d *dataset) load(ctx context.Context, st store.Store, batch int) error {
	t0 := time.Now()
	n := 0
	err := d.each(func(spans []store.Span) error {
		for lo := 0; lo < len(spans); lo += batch {
			if err := st.WriteSpans(ctx, spans[lo:min(lo+batch, len(spans))]); err != nil {
				return err
			}
		}
		n += len(spans)
		log.Printf("  %d spans in %s", n, time.Since(t0).Round(time.Second))
		return nil
	})
	if err != nil {
		return err
	}
	for i := range d.cfg.big {
		spans := d.bigTrace(i)
		for lo := 0; lo < len(spans); lo += batch {
			if err := st.WriteSpans(ctx, spans[lo:min(lo+batch, len(spans))]); err != nil {
				return err
			}
		}
		log.Printf("  big trace of %d spans written (%s)", len(spans), time.Since(t0).Round(time.Second))
		spans = nil
		runtime.GC()
		debug.FreeOSMemory()
	}
	return nil
}

// bigIDsOf lists the big traces' ids (the newest traces).
func (d *dataset) bigIDsOf(ctx context.Context, st store.Reader) ([]string, error) {
	page, err := st.ListTraces(ctx, store.TraceQuery{Start: d.bigStart, Limit: 10})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, t := range page.Traces {
		ids = append(ids, t.TraceID)
	}
	if len(ids) != len(d.cfg.big) {
		return nil, fmt.Errorf("the store lists %d big traces, want %d (reload with -reload)", len(ids), len(d.cfg.big))
	}
	return ids, nil
}

// namedQuery is one list query of the suite.
type namedQuery struct {
	name, what string
	q          store.TraceQuery
	sessions   bool
}

func (d *dataset) queries() []namedQuery {
	search := func(expr string) []store.SearchClause {
		c, err := store.ParseSearch(expr)
		if err != nil {
			panic(err)
		}
		return c
	}
	// The regular traces only, where a query would otherwise stop at the
	// big traces first (they are the newest).
	q := []namedQuery{
		{"newest", "newest first (the big traces on the page)", store.TraceQuery{}, false},
		{"service", "service=agent-api", store.TraceQuery{Service: "agent-api"}, false},
		{"agent", "agent=coding-agent", store.TraceQuery{Agent: "coding-agent"}, false},
		{"model", "model=gpt-4o", store.TraceQuery{Model: "gpt-4o"}, false},
		{"status_error", "status=error", store.TraceQuery{Status: store.StatusError}, false},
		{"status_ok", "status=ok", store.TraceQuery{Status: store.StatusOK}, false},
		{"min_duration", "min_duration=15s", store.TraceQuery{MinDuration: 15 * time.Second}, false},
		{"time_range", "10 minutes in the middle", store.TraceQuery{Start: d.mid, End: d.mid.Add(10 * time.Minute)}, false},
		{"text", "text=fetch_url", store.TraceQuery{Text: "fetch_url"}, false},
		{"attr_eq_common", "q=" + semconv.AttrRequestModel + "=gpt-4o", store.TraceQuery{Search: search(semconv.AttrRequestModel + "=gpt-4o")}, false},
		{"attr_eq_one_trace", "q=" + semconv.AttrToolCallID + "=<one trace's>", store.TraceQuery{Search: search(semconv.AttrToolCallID + "=" + d.probe.ToolCallID)}, false},
		{"attr_gt", "q=" + semconv.AttrUsageInputTokens + ">4000", store.TraceQuery{Search: search(semconv.AttrUsageInputTokens + ">4000")}, false},
		{"attr_exists", "q=error.type", store.TraceQuery{Search: search("error.type")}, false},
		{"evidence", "q=evidence:<one document>", store.TraceQuery{Search: search("evidence:" + d.probe.Document)}, false},
		{"session", "session=<one conversation>", store.TraceQuery{Session: d.probe.Conversation}, false},
		{"sort_start_asc", "sort=start asc", store.TraceQuery{Ascending: true}, false},
	}
	for _, k := range []string{store.SortDuration, store.SortSpans, store.SortErrors, store.SortTokens} {
		q = append(q,
			namedQuery{"sort_" + k, "sort=" + k, store.TraceQuery{SortBy: k}, false},
			namedQuery{"sort_" + k + "_asc", "sort=" + k + " asc", store.TraceQuery{SortBy: k, Ascending: true}, false})
	}
	q = append(q,
		namedQuery{"sort_tokens_model", "model=gpt-4o sort=tokens", store.TraceQuery{Model: "gpt-4o", SortBy: store.SortTokens}, false},
		namedQuery{"sessions", "ListSessions, first page", store.TraceQuery{}, true})
	return q
}

// measurer times one call on one store.
type measurer interface {
	// measure runs fn (with ctx) once, returning the wall time, CPU time,
	// server time (0 when not measured apart) and rows and bytes read by
	// the server (0 when not known).
	measure(ctx context.Context, fn func(ctx context.Context) (int, int, error)) (sample, error)
}

type sample struct {
	wall, cpu, server time.Duration
	rows, bytes       int
	readRows, readB   float64
}

func measureQueries(ctx context.Context, cfg config, st store.Store, m measurer, qs []namedQuery) ([]result, error) {
	var out []result
	for _, nq := range qs {
		fn := func(ctx context.Context) (int, int, error) {
			if nq.sessions {
				p, err := st.(store.SessionLister).ListSessions(ctx, store.SessionQuery{})
				return len(p.Sessions), 0, err
			}
			p, err := st.ListTraces(ctx, nq.q)
			return len(p.Traces), 0, err
		}
		r, err := repeat(ctx, cfg, m, nq.name, nq.what, fn)
		if err != nil {
			return nil, err
		}
		if r.rows == 0 {
			return nil, fmt.Errorf("%s (%s): empty page: the query proves nothing", nq.name, nq.what)
		}
		out = append(out, r)
		log.Printf("  %-20s %s", nq.name, fmtResult(r))
	}
	return out, nil
}

func repeat(ctx context.Context, cfg config, m measurer, name, what string, fn func(ctx context.Context) (int, int, error)) (result, error) {
	r := result{name: name, what: what}
	var samples []sample
	for i := 0; i <= cfg.runs; i++ {
		s, err := m.measure(ctx, fn)
		if err != nil {
			return r, fmt.Errorf("%s: %w", name, err)
		}
		if i == 0 {
			continue // warm-up
		}
		samples = append(samples, s)
		r.wall = append(r.wall, s.wall)
		r.cpu = append(r.cpu, s.cpu)
		if s.server > 0 {
			r.server = append(r.server, s.server)
		}
		r.rows, r.bytes = s.rows, s.bytes
	}
	slices.SortFunc(samples, func(a, b sample) int { return int(a.wall - b.wall) })
	med := samples[len(samples)/2]
	r.readRows, r.readMiB = med.readRows, med.readB/(1<<20)
	return r, nil
}

// pageResults measures the list page (GET /traces and the JSON API) with
// the big traces on the first page and without them (end= before them).
func pageResults(ctx context.Context, cfg config, d *dataset, st store.Store, m measurer) ([]result, error) {
	srv, err := web.New(web.Config{}, web.Deps{Traces: st})
	if err != nil {
		return nil, err
	}
	without := url.Values{"end": {d.bigStart.Format(time.RFC3339Nano)}}.Encode()
	var out []result
	for _, p := range []struct{ name, what, path string }{
		{"page_with_big", "GET /traces: the 1M- and 100k-span traces on the first page", "/traces"},
		{"page_without_big", "GET /traces?end=<before them>", "/traces?" + without},
		{"api_with_big", "GET /api/v1/traces, the big traces on the page", "/api/v1/traces"},
		{"api_without_big", "GET /api/v1/traces?end=<before them>", "/api/v1/traces?" + without},
	} {
		fn := func(ctx context.Context) (int, int, error) {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest("GET", p.path, nil).WithContext(ctx))
			if rec.Code != 200 {
				return 0, 0, fmt.Errorf("GET %s: status %d: %.300s", p.path, rec.Code, rec.Body.String())
			}
			return strings.Count(rec.Body.String(), `"trace_id"`) + strings.Count(rec.Body.String(), `<tr class=`), rec.Body.Len(), nil
		}
		r, err := repeat(ctx, cfg, m, p.name, p.what, fn)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		log.Printf("  %-20s %s", p.name, fmtResult(r))
	}
	return out, nil
}

// --- SQLite ---

type inProcess struct{}

func (inProcess) measure(ctx context.Context, fn func(ctx context.Context) (int, int, error)) (sample, error) {
	cpu0, t0 := cpuTime(), time.Now()
	rows, bytes, err := fn(ctx)
	return sample{wall: time.Since(t0), cpu: cpuTime() - cpu0, rows: rows, bytes: bytes}, err
}

func benchSQLite(ctx context.Context, cfg config, d *dataset) (storeReport, error) {
	sr := storeReport{name: "SQLite"}
	dir := filepath.Join(cfg.dir, "sqlite")
	path := filepath.Join(dir, "traces.db")
	marker := filepath.Join(dir, "loaded-"+dataVersion+"-"+sizeTag(cfg))
	if _, err := os.Stat(marker); err != nil || cfg.reload {
		os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return sr, err
		}
		st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
		if err != nil {
			return sr, err
		}
		log.Printf("sqlite: loading %s", path)
		t0, cpu0 := time.Now(), cpuTime()
		if err := d.load(ctx, st, 5000); err != nil {
			st.Shutdown(ctx)
			return sr, err
		}
		if err := st.Shutdown(ctx); err != nil {
			return sr, err
		}
		sr.load = fmt.Sprintf("loaded in %s (%s CPU) into %s", time.Since(t0).Round(time.Second), (cpuTime() - cpu0).Round(time.Second), path)
		if err := os.WriteFile(marker, []byte(sr.load+"\n"), 0o644); err != nil {
			return sr, err
		}
	} else {
		b, _ := os.ReadFile(marker)
		sr.load = "cached: " + strings.TrimSpace(string(b))
	}
	if fi, err := os.Stat(path); err == nil {
		sr.load += fmt.Sprintf("; file %.0f MiB", float64(fi.Size())/(1<<20))
	}
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		return sr, err
	}
	defer st.Shutdown(ctx)
	if d.bigIDs, err = d.bigIDsOf(ctx, st); err != nil {
		return sr, err
	}
	log.Printf("sqlite: queries")
	if sr.results, err = measureQueries(ctx, cfg, st, inProcess{}, d.queries()); err != nil {
		return sr, err
	}
	if sr.pages, err = pageResults(ctx, cfg, d, st, inProcess{}); err != nil {
		return sr, err
	}
	return sr, nil
}

func sizeTag(cfg config) string {
	parts := []string{fmt.Sprint(cfg.traces)}
	for _, b := range cfg.big {
		parts = append(parts, fmt.Sprint(b))
	}
	return strings.Join(parts, "-")
}

// --- ClickHouse ---

// fromServer measures a call by what the server sends with each of its
// queries (system.query_log is off on libchdb servers): CPU is the
// queries' user and system time over all their threads (profile events),
// server time the elapsed time of each query's last progress packet,
// summed over the call's queries.
type fromServer struct {
	conn driver.Conn
}

func (f *fromServer) measure(ctx context.Context, fn func(ctx context.Context) (int, int, error)) (sample, error) {
	var mu sync.Mutex
	var s sample
	qctx := ch.Context(ctx, ch.WithProfileEvents(func(evs []ch.ProfileEvent) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range evs {
			if e.Type != "increment" {
				continue
			}
			switch e.Name {
			case "UserTimeMicroseconds", "SystemTimeMicroseconds":
				s.cpu += time.Duration(e.Value) * time.Microsecond
			case "SelectedRows":
				s.readRows += float64(e.Value)
			case "SelectedBytes":
				s.readB += float64(e.Value)
			}
		}
	}))
	var last time.Duration
	qctx = ch.Context(qctx, ch.WithProgress(func(p *ch.Progress) {
		mu.Lock()
		defer mu.Unlock()
		if p.Elapsed < last { // the next query of the call
			s.server += last
		}
		last = p.Elapsed
	}))
	t0 := time.Now()
	rows, bytes, err := fn(qctx)
	mu.Lock()
	defer mu.Unlock()
	s.wall, s.rows, s.bytes = time.Since(t0), rows, bytes
	s.server += last
	return s, err
}

func benchClickHouse(ctx context.Context, cfg config, d *dataset) (storeReport, error) {
	sr := storeReport{name: "ClickHouse"}
	dsn := os.Getenv("LOOMWORK_CLICKHOUSE_DSN")
	if dsn == "" {
		var stop func()
		var err error
		if dsn, stop, err = startClickHouse(filepath.Join(cfg.dir, "clickhouse")); err != nil {
			return sr, err
		}
		defer stop()
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return sr, fmt.Errorf("LOOMWORK_CLICKHOUSE_DSN: %w", err)
	}
	db := "loomwork_bigdata_" + dataVersion + "_" + strings.ReplaceAll(sizeTag(cfg), "-", "_")
	u.Path = "/" + db
	opts, err := ch.ParseDSN(u.String())
	if err != nil {
		return sr, err
	}
	opts.Auth.Database = "default"
	conn, err := ch.Open(opts)
	if err != nil {
		return sr, err
	}
	defer conn.Close()
	var loaded uint64
	_ = conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = 'bigdata_loaded'", db).Scan(&loaded)
	if loaded == 0 || cfg.reload {
		if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" SYNC"); err != nil {
			return sr, err
		}
		st, err := clickhouse.Open(ctx, clickhouse.Config{DSN: u.String()})
		if err != nil {
			return sr, err
		}
		log.Printf("clickhouse: loading database %s", db)
		t0, cpu0 := time.Now(), cpuTime()
		if err := d.load(ctx, st, 20_000); err != nil {
			st.Shutdown(ctx)
			return sr, err
		}
		st.Shutdown(ctx)
		sr.load = fmt.Sprintf("loaded in %s (client CPU %s) into database %s", time.Since(t0).Round(time.Second), (cpuTime() - cpu0).Round(time.Second), db)
		if err := conn.Exec(ctx, "CREATE TABLE "+db+".bigdata_loaded (note String) ENGINE = Memory"); err != nil {
			return sr, err
		}
		if err := conn.Exec(ctx, "CREATE TABLE "+db+".bigdata_note (note String) ENGINE = MergeTree ORDER BY tuple()"); err == nil {
			_ = conn.Exec(ctx, "INSERT INTO "+db+".bigdata_note VALUES (?)", sr.load)
		}
	} else {
		var note string
		_ = conn.QueryRow(ctx, "SELECT any(note) FROM "+db+".bigdata_note").Scan(&note)
		sr.load = "cached: " + note
	}
	var version string
	_ = conn.QueryRow(ctx, "SELECT version()").Scan(&version)
	var bytesOnDisk uint64
	_ = conn.QueryRow(ctx, "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = ? AND active", db).Scan(&bytesOnDisk)
	sr.load += fmt.Sprintf("; ClickHouse %s, %.0f MiB on disk", version, float64(bytesOnDisk)/(1<<20))
	st, err := clickhouse.Open(ctx, clickhouse.Config{DSN: u.String()})
	if err != nil {
		return sr, err
	}
	defer st.Shutdown(ctx)
	if d.bigIDs, err = d.bigIDsOf(ctx, st); err != nil {
		return sr, err
	}
	m := &fromServer{conn: conn}
	log.Printf("clickhouse: queries")
	if sr.results, err = measureQueries(ctx, cfg, st, m, d.queries()); err != nil {
		return sr, err
	}
	if sr.pages, err = pageResults(ctx, cfg, d, st, m); err != nil {
		return sr, err
	}
	return sr, nil
}

// startClickHouse starts a server on dir with scripts/clickhouse.sh (its
// data persists there for the next run) and returns its DSN.
func startClickHouse(dir string) (string, func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	if out, err := exec.Command("scripts/clickhouse.sh", "fetch").CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("scripts/clickhouse.sh fetch: %w: %s", err, out)
	}
	cmd := exec.Command("scripts/clickhouse.sh", "start", dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("scripts/clickhouse.sh start %s: %w", dir, err)
	}
	dsn := ""
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "LOOMWORK_CLICKHOUSE_DSN="); ok {
			dsn = strings.Trim(v, `'"`)
		}
	}
	if dsn == "" {
		return "", nil, fmt.Errorf("scripts/clickhouse.sh start printed no DSN: %s", out)
	}
	stop := func() {
		if out, err := exec.Command("scripts/clickhouse.sh", "stop", dir).CombinedOutput(); err != nil {
			log.Printf("scripts/clickhouse.sh stop %s: %v: %s", dir, err, out)
		}
	}
	return dsn, stop, nil
}

// --- the trace page benchmark ---

// webBench runs the trace page's big-trace benchmark (another part of
// issue 36) and returns its output, or a line saying it is not there.
func webBench() string {
	cmd := exec.Command("go", "test", "./web", "-run", "^$", "-bench", "BenchmarkBigTrace", "-benchtime", "1x", "-timeout", "60m")
	out, err := cmd.CombinedOutput()
	text := string(out)
	if !strings.Contains(text, "BenchmarkBigTrace") {
		return "BenchmarkBigTrace: not on this branch (go test ./web -run '^$' -bench BenchmarkBigTrace ran no benchmark); the trace page and rollup of the big traces are not measured here"
	}
	if err != nil {
		return fmt.Sprintf("BenchmarkBigTrace failed: %v\n%s", err, text)
	}
	return strings.TrimSpace(text)
}

// --- output ---

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func maxOf(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/1e6) }

func fmtResult(r result) string {
	s := fmt.Sprintf("wall %s ms (max %s)", ms(median(r.wall)), ms(maxOf(r.wall)))
	if len(r.server) > 0 {
		s += fmt.Sprintf(", server %s ms, server CPU %s ms", ms(median(r.server)), ms(median(r.cpu)))
	} else {
		s += fmt.Sprintf(", CPU %s ms", ms(median(r.cpu)))
	}
	if r.bytes > 0 {
		s += fmt.Sprintf(", %d bytes", r.bytes)
	}
	return s
}

func printStore(w io.Writer, sr storeReport) {
	fmt.Fprintf(w, "\n%s (%s)\n", sr.name, sr.load)
	for _, r := range append(slices.Clone(sr.results), sr.pages...) {
		fmt.Fprintf(w, "  %-20s %s\n", r.name, fmtResult(r))
	}
}

func writeMarkdown(w io.Writer, cfg config, rep report) {
	fmt.Fprintf(w, "# Big data: lists at 100,000 traces with a million-span trace\n\n")
	fmt.Fprintf(w, "Regenerate with `%s` (issue 36; `-reload` loads the stores again). It loads %d agent traces of 10 spans", rep.command, cfg.traces)
	fmt.Fprintf(w, " (`storetest.GenerateTraces`; a fifth of them turns of %d-turn conversations, `GenerateConversation`)", convTurns)
	fmt.Fprintf(w, " and one trace each of %s spans, the newest, into each store, caches the loaded stores in `-dir`", joinInts(cfg.big))
	fmt.Fprintf(w, " (default `$LOOMWORK_CACHE/bigdata`), runs every query once to warm up and %d times timed, and reports the median (and the slowest run).\n\n", cfg.runs)
	fmt.Fprintf(w, "Server time: SQLite runs in the benchmark's process, so its time is the store call's wall time and CPU the process's CPU over it;")
	fmt.Fprintf(w, " for ClickHouse, the server's elapsed time (the last progress packet of each of the call's queries, summed) and its CPU (user + system over all threads, from the profile events it sends), with the client's wall time beside them.")
	fmt.Fprintf(w, " Target (issue 36): at most 200 ms server time for each list query. The machine is shared with other jobs:")
	fmt.Fprintf(w, " wall and server times rise with their load, CPU times much less, so both are given (\"CPU ≤ 200\" is the target read as CPU).\n\n")
	fmt.Fprintf(w, "What the stores read: SQLite walks the sort key's index (`traces_by_*`, project first) or drives from a selective filter's own index or set")
	fmt.Fprintf(w, " (tags, `session_turns`, search blooms), never sorting more than 2,000 summaries (`store/sqlite/plan.go`); ClickHouse reads the `traces` summary table")
	fmt.Fprintf(w, " kept at ingest (`ORDER BY (project, trace_id)`); for a search, `trace_attrs` (a row per trace and insert: its spans' attribute keys, low-cardinality typed values, least and greatest typed integers) and spans only for the rest, through skip indexes and up to three time windows (docs/clickhouse.md).")
	fmt.Fprintf(w, " A list row carries call groups, not calls, so a page with the million-span trace on it is as large as one without.\n\n")
	fmt.Fprintf(w, "Machine:\n\n")
	for _, m := range rep.machine {
		fmt.Fprintf(w, "- %s\n", m)
	}
	yes := func(d time.Duration) string {
		if d <= 200*time.Millisecond {
			return "yes"
		}
		return "**no**"
	}
	for _, sr := range rep.stores {
		fmt.Fprintf(w, "\n## %s\n\n%s.\n\n", sr.name, sr.load)
		if sr.name == "ClickHouse" {
			fmt.Fprintf(w, "| query | what | server ms (max) | ≤ 200 | server CPU ms | CPU ≤ 200 | client wall ms | rows read | MiB read |\n|---|---|---:|---|---:|---|---:|---:|---:|\n")
			for _, r := range append(slices.Clone(sr.results), sr.pages...) {
				fmt.Fprintf(w, "| %s | %s | %s (%s) | %s | %s | %s | %s | %.0f | %.1f |\n", r.name, r.what, ms(median(r.server)), ms(maxOf(r.server)), yes(median(r.server)),
					ms(median(r.cpu)), yes(median(r.cpu)), ms(median(r.wall)), r.readRows, r.readMiB)
			}
		} else {
			fmt.Fprintf(w, "| query | what | wall ms (max) | ≤ 200 | CPU ms |\n|---|---|---:|---|---:|\n")
			for _, r := range append(slices.Clone(sr.results), sr.pages...) {
				fmt.Fprintf(w, "| %s | %s | %s (%s) | %s | %s |\n", r.name, r.what, ms(median(r.wall)), ms(maxOf(r.wall)), yes(median(r.wall)), ms(median(r.cpu)))
			}
		}
		if len(sr.pages) > 0 {
			fmt.Fprintf(w, "\nResponse sizes: ")
			var parts []string
			for _, r := range sr.pages {
				parts = append(parts, fmt.Sprintf("%s %d bytes", r.name, r.bytes))
			}
			fmt.Fprintf(w, "%s.\n", strings.Join(parts, ", "))
		}
	}
	fmt.Fprintf(w, "\n## The trace page of the big traces\n\n```\n%s\n```\n", rep.webBench)
}

func joinInts(ns []int) string {
	var s []string
	for _, n := range ns {
		s = append(s, fmt.Sprintf("%d", n))
	}
	return strings.Join(s, " and ")
}

// --- machine ---

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func machine() []string {
	out := []string{fmt.Sprintf("%d cores (%s/%s), Go %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "MemTotal:") {
				out = append(out, "memory "+strings.TrimSpace(strings.TrimPrefix(l, "MemTotal:")))
			}
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				out = append(out, "CPU "+strings.TrimSpace(strings.SplitN(l, ":", 2)[1]))
				break
			}
		}
	}
	out = append(out, "load average before: "+loadavg()+" (the machine is shared: wall times are pessimistic, CPU times less so)")
	out = append(out, "run at "+time.Now().UTC().Format(time.RFC3339))
	return out
}
