package collector_test

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loomwork/loomwork/collector/agenttrace"
	"github.com/loomwork/loomwork/collector/genai"
	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
)

var (
	bytesSpans  = flag.Int("bytes.spans", 1_000_000, "BenchmarkClickHouseBytesPerSpan: spans to store")
	bytesInsert = flag.String("bytes.inserts", "4000,50000", "BenchmarkClickHouseBytesPerSpan: spans per insert, comma-separated")
	bytesData   = flag.String("bytes.data", "fresh,templates", "BenchmarkClickHouseBytesPerSpan: data sets (fresh: every id new; templates: BenchmarkIngest's 16 request templates with patched trace ids)")
	bytesPeer   = flag.Bool("bytes.peer", true, "BenchmarkClickHouseBytesPerSpan: also store the same spans in the contrib clickhouseexporter's schema")
	bytesWait   = flag.Duration("bytes.settle", 0, "BenchmarkClickHouseBytesPerSpan: wait this long after the last insert before measuring")
	bytesKeep   = flag.String("bytes.keep", "", "BenchmarkClickHouseBytesPerSpan: copy the store's spans table into this table (db.table) before the database is dropped, for experiments")
	bytesAlter  = flag.String("bytes.alter", "", "BenchmarkClickHouseBytesPerSpan: SQL statements (;-separated, {db} for the store's database) run on the fresh schema before the load, to price variants")
	bytesWide   = flag.Bool("bytes.wide", false, "BenchmarkClickHouseBytesPerSpan: store every part in the Wide format, which keeps per-column sizes (Compact parts report none)")
)

// BenchmarkClickHouseBytesPerSpan stores -bytes.spans agent-shaped spans
// (agenttrace.Generator, mapped by genai.MapTraces as serve maps them) in
// a fresh ClickHouse database through the store, in inserts of each
// -bytes.inserts size, and reports bytes on disk per span: the sum of
// bytes_on_disk over the active parts of every table of the database
// (system.parts), as is after the last insert (no OPTIMIZE), divided by the
// spans. With -bytes.peer the same spans also go, in 5,000-span inserts,
// into a second database holding the OpenTelemetry Collector contrib
// clickhouseexporter's tables (otel_traces with Map attributes and its
// trace-id lookup table and view), for a side-by-side figure. It logs the
// breakdown per table and, for spans, per column.
//
//	go test ./collector -run '^$' -bench BenchmarkClickHouseBytesPerSpan -benchtime 1x
func BenchmarkClickHouseBytesPerSpan(b *testing.B) {
	srv := chtest.Start(b)
	for _, data := range strings.Split(*bytesData, ",") {
		for _, ins := range strings.Split(*bytesInsert, ",") {
			var insert int
			if _, err := fmt.Sscan(ins, &insert); err != nil || insert <= 0 {
				b.Fatalf("-bytes.inserts: %q", ins)
			}
			b.Run(fmt.Sprintf("data=%s/insert=%d", data, insert), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					bytesRun(b, srv, data, insert)
				}
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

func bytesRun(b *testing.B, srv *chtest.Server, data string, insert int) {
	ctx := context.Background()
	next := requestSource(b, data)
	db := srv.NewDatabase(b)
	st, err := clickhouse.Open(ctx, clickhouse.Config{DSN: srv.DSN(db)})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Shutdown(ctx)
	conn := bytesConn(b, srv)
	defer conn.Close()
	if *bytesWide {
		for _, t := range []string{"spans", "trace_index"} {
			if err := conn.Exec(ctx, "ALTER TABLE "+db+"."+t+" MODIFY SETTING min_bytes_for_wide_part = 0, min_rows_for_wide_part = 0"); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, q := range strings.Split(*bytesAlter, ";") {
		if q = strings.TrimSpace(q); q != "" {
			if err := conn.Exec(ctx, strings.ReplaceAll(q, "{db}", db)); err != nil {
				b.Fatal(err)
			}
		}
	}
	var peerDB string
	if *bytesPeer {
		peerDB = srv.NewDatabase(b)
		createPeer(b, conn, peerDB)
	}
	var pending []store.Span
	var peerPending []ptrace.Traces
	peerSpans := 0
	total := 0
	for total < *bytesSpans {
		td := next()
		spans, rejected := genai.MapTraces(td, genai.Options{})
		if len(rejected) > 0 {
			b.Fatalf("rejected: %v", rejected[0])
		}
		pending = append(pending, spans...)
		total += len(spans)
		if len(pending) >= insert || total >= *bytesSpans {
			if err := st.WriteSpans(ctx, pending); err != nil {
				b.Fatal(err)
			}
			pending = nil
		}
		if *bytesPeer {
			peerPending = append(peerPending, td)
			peerSpans += td.SpanCount()
			if peerSpans >= 5000 || total >= *bytesSpans {
				insertPeer(b, conn, peerDB, peerPending)
				peerPending, peerSpans = nil, 0
			}
		}
	}
	if *bytesWait > 0 {
		time.Sleep(*bytesWait)
	}
	if *bytesKeep != "" {
		for _, q := range []string{"DROP TABLE IF EXISTS " + *bytesKeep, "CREATE TABLE " + *bytesKeep + " AS " + db + ".spans",
			"INSERT INTO " + *bytesKeep + " SELECT * FROM " + db + ".spans"} {
			if err := conn.Exec(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
	}
	ours := diskBytes(b, conn, db)
	b.ReportMetric(float64(ours)/float64(total), "loomwork-B/span")
	logBreakdown(b, conn, db, "spans", total)
	if *bytesPeer {
		peer := diskBytes(b, conn, peerDB)
		b.ReportMetric(float64(peer)/float64(total), "peer-B/span")
		logBreakdown(b, conn, peerDB, "otel_traces", total)
	}
}

// requestSource returns a function producing one 1,000-span OTLP request
// per call.
func requestSource(b *testing.B, data string) func() ptrace.Traces {
	switch data {
	case "fresh":
		g := agenttrace.NewGenerator(7, time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
		return func() ptrace.Traces { return g.Batch(100, 10) }
	case "templates":
		templates := makeTemplates(b, 16, 1000)
		k := uint64(0)
		return func() ptrace.Traces {
			body := templates[k%uint64(len(templates))].instance(k)
			k++
			req := ptraceotlp.NewExportRequest()
			if err := req.UnmarshalProto(body); err != nil {
				b.Fatal(err)
			}
			return req.Traces()
		}
	}
	b.Fatalf("-bytes.data: unknown %q", data)
	return nil
}

func bytesConn(b *testing.B, srv *chtest.Server) driver.Conn {
	opts, err := ch.ParseDSN(srv.DSN("default"))
	if err != nil {
		b.Fatal(err)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	return conn
}

func diskBytes(b *testing.B, conn driver.Conn, db string) uint64 {
	var n uint64
	if err := conn.QueryRow(context.Background(),
		"SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = ?", db).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// logBreakdown logs bytes on disk per table and, for table, compressed
// bytes per column (0 for Compact parts, which keep no per-column sizes).
func logBreakdown(b *testing.B, conn driver.Conn, db, table string, spans int) {
	ctx := context.Background()
	var out strings.Builder
	fmt.Fprintf(&out, "database %s, %d spans\n", db, spans)
	rows, err := conn.Query(ctx, `SELECT table, count(), sum(rows), sum(bytes_on_disk), sum(data_compressed_bytes), sum(data_uncompressed_bytes),
		sum(secondary_indices_compressed_bytes), sum(primary_key_bytes_in_memory), groupUniqArray(part_type)
		FROM system.parts WHERE active AND database = ? GROUP BY table ORDER BY table`, db)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(&out, "%-20s %6s %10s %12s %8s %12s %12s %10s %s\n", "table", "parts", "rows", "on disk", "B/span", "compressed", "uncompr.", "skip idx", "types")
	for rows.Next() {
		var t string
		var parts, n, disk, comp, uncomp, idx, pk uint64
		var types []string
		if err := rows.Scan(&t, &parts, &n, &disk, &comp, &uncomp, &idx, &pk, &types); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&out, "%-20s %6d %10d %12d %8.2f %12d %12d %10d %v\n", t, parts, n, disk, float64(disk)/float64(spans), comp, uncomp, idx, types)
	}
	rows.Close()
	rows, err = conn.Query(ctx, `SELECT column, sum(column_data_compressed_bytes) AS c, sum(column_data_uncompressed_bytes)
		FROM system.parts_columns WHERE active AND database = ? AND table = ? GROUP BY column ORDER BY c DESC`, db, table)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var c string
		var comp, uncomp uint64
		if err := rows.Scan(&c, &comp, &uncomp); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&out, "  %-34s %12d %8.2f B/span (uncompressed %.1f)\n", c, comp, float64(comp)/float64(spans), float64(uncomp)/float64(spans))
	}
	rows.Close()
	// Printed, not logged: the benchmark log truncates long output.
	fmt.Print(out.String())
}

// createPeer creates the contrib clickhouseexporter's trace tables (the
// Map schema of traces_table.sql, traces_id_ts_lookup_table.sql and
// traces_id_ts_lookup_mv.sql, v0.165) in db.
func createPeer(b *testing.B, conn driver.Conn, db string) {
	ctx := context.Background()
	for _, q := range []string{
		`CREATE TABLE ` + db + `.otel_traces (
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Duration UInt64 CODEC(T64, ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (Timestamp DateTime64(9), Name LowCardinality(String), Attributes Map(LowCardinality(String), String)) CODEC(ZSTD(1)),
    Links Nested (TraceId String, SpanId String, TraceState String, Attributes Map(LowCardinality(String), String)) CODEC(ZSTD(1)),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_value mapValues(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1,
    INDEX idx_lower_span_name lower(SpanName) TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 8
) ENGINE = MergeTree
PARTITION BY toDate(Timestamp)
PRIMARY KEY (ServiceName, SpanName, toDateTime(Timestamp))
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp), Timestamp)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1` + peerWide(),
		`CREATE TABLE ` + db + `.otel_traces_trace_id_ts (
    TraceId String CODEC(ZSTD(1)),
    Start SimpleAggregateFunction(min, DateTime) CODEC(ZSTD(1)),
    End SimpleAggregateFunction(max, DateTime) CODEC(ZSTD(1))
) ENGINE = AggregatingMergeTree
PARTITION BY toStartOfWeek(Start)
ORDER BY (TraceId)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1`,
		`CREATE MATERIALIZED VIEW ` + db + `.otel_traces_trace_id_ts_mv TO ` + db + `.otel_traces_trace_id_ts
AS SELECT TraceId, min(Timestamp) AS Start, max(Timestamp) AS End
FROM ` + db + `.otel_traces WHERE TraceId != '' GROUP BY TraceId`,
	} {
		if err := conn.Exec(ctx, q); err != nil {
			b.Fatalf("peer schema: %v", err)
		}
	}
}

// insertPeer inserts tds into the peer's otel_traces as its exporter maps
// them: ids as hex, attribute values as AsString, kinds and status codes
// by name.
func insertPeer(b *testing.B, conn driver.Conn, db string, tds []ptrace.Traces) {
	ctx := context.Background()
	batch, err := conn.PrepareBatch(ctx, `INSERT INTO `+db+`.otel_traces (Timestamp, TraceId, SpanId, ParentSpanId, TraceState,
		SpanName, SpanKind, ServiceName, ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, Duration,
		StatusCode, StatusMessage, Events.Timestamp, Events.Name, Events.Attributes,
		Links.TraceId, Links.SpanId, Links.TraceState, Links.Attributes)`)
	if err != nil {
		b.Fatal(err)
	}
	for _, td := range tds {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			rs := rss.At(i)
			res := map[string]string{}
			rs.Resource().Attributes().Range(func(k string, v pcommon.Value) bool { res[k] = v.AsString(); return true })
			service := res["service.name"]
			sss := rs.ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				ss := sss.At(j)
				sp := ss.Spans()
				for k := 0; k < sp.Len(); k++ {
					s := sp.At(k)
					attrs := map[string]string{}
					s.Attributes().Range(func(k string, v pcommon.Value) bool { attrs[k] = v.AsString(); return true })
					var evTimes []time.Time
					var evNames []string
					var evAttrs []map[string]string
					for e := 0; e < s.Events().Len(); e++ {
						ev := s.Events().At(e)
						evTimes = append(evTimes, ev.Timestamp().AsTime())
						evNames = append(evNames, ev.Name())
						m := map[string]string{}
						ev.Attributes().Range(func(k string, v pcommon.Value) bool { m[k] = v.AsString(); return true })
						evAttrs = append(evAttrs, m)
					}
					var lTrace, lSpan, lState []string
					var lAttrs []map[string]string
					for l := 0; l < s.Links().Len(); l++ {
						ln := s.Links().At(l)
						lTrace = append(lTrace, ln.TraceID().String())
						lSpan = append(lSpan, ln.SpanID().String())
						lState = append(lState, ln.TraceState().AsRaw())
						m := map[string]string{}
						ln.Attributes().Range(func(k string, v pcommon.Value) bool { m[k] = v.AsString(); return true })
						lAttrs = append(lAttrs, m)
					}
					parent := ""
					if !s.ParentSpanID().IsEmpty() {
						parent = s.ParentSpanID().String()
					}
					if err := batch.Append(s.StartTimestamp().AsTime(), s.TraceID().String(), s.SpanID().String(), parent,
						s.TraceState().AsRaw(), s.Name(), s.Kind().String(), service, res, ss.Scope().Name(), ss.Scope().Version(),
						attrs, uint64(s.EndTimestamp()-s.StartTimestamp()), s.Status().Code().String(), s.Status().Message(),
						evTimes, evNames, evAttrs, lTrace, lSpan, lState, lAttrs); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	}
	if err := batch.Send(); err != nil {
		b.Fatal(err)
	}
}

func peerWide() string {
	if *bytesWide {
		return ", min_bytes_for_wide_part = 0, min_rows_for_wide_part = 0"
	}
	return ""
}
