package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
)

// Every request the senders make carries spans no other request carries:
// otherwise a store that deduplicates would report fewer stored spans than
// acknowledged and the harness would call it loss.
func TestFilledRequestsNeverRepeatASpanAndKeepTheTemplatesShape(t *testing.T) {
	templates, err := makeTemplates(4, 100, 7, time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[24]byte]bool{}
	var buf []byte
	for k := range 64 {
		tpl := templates[k%len(templates)]
		buf = tpl.fill(buf, uint64(k))
		if len(buf) != len(tpl.body) {
			t.Fatalf("request %d is %d bytes, template %d", k, len(buf), len(tpl.body))
		}
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(buf); err != nil {
			t.Fatalf("request %d does not decode: %v", k, err)
		}
		td := req.Traces()
		if td.SpanCount() != 100 {
			t.Fatalf("request %d has %d spans, want 100", k, td.SpanCount())
		}
		spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
		traces := map[[16]byte]int{}
		for i := range spans.Len() {
			sp := spans.At(i)
			var key [24]byte
			tid, sid := sp.TraceID(), sp.SpanID()
			copy(key[:16], tid[:])
			copy(key[16:], sid[:])
			if seen[key] {
				t.Fatalf("request %d repeats span %x/%x", k, tid, sid)
			}
			seen[key] = true
			traces[tid]++
		}
		for tid, n := range traces {
			if n != spansPerTrace {
				t.Fatalf("request %d: trace %x has %d spans, want whole traces of %d", k, tid, n, spansPerTrace)
			}
		}
	}
	// The template itself is untouched by fill.
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(templates[0].body); err != nil || req.Traces().SpanCount() != 100 {
		t.Fatalf("template 0 changed: %v", err)
	}
}

func TestMakeTemplatesRefusesRequestsThatCutATrace(t *testing.T) {
	if _, err := makeTemplates(2, 105, 1, time.Now()); err == nil || !strings.Contains(err.Error(), "multiple of 10") {
		t.Fatalf("err = %v, want the multiple-of-10 rule", err)
	}
}

// drive against the real serve pipeline (embedded store): every span it
// counts as acknowledged is in the store, and nothing else is.
func TestDriveCountsWhatTheServerAcknowledged(t *testing.T) {
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "traces.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Shutdown(context.Background())
	srv, err := collector.NewServer(collector.ServerConfig{GRPCAddr: "127.0.0.1:0", HTTPAddr: collector.AddrOff}, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	templates, err := makeTemplates(4, 100, 3, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	res, err := drive(context.Background(), srv.GRPCAddr(), templatedLoad(templates), 3, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || res.Requests == 0 || res.Acked != res.Requests*100 {
		t.Fatalf("result %+v: want some requests, none failed, 100 acked spans each", res)
	}
	// The agent load too: requests of varying span counts, each counted.
	agent, err := makeAgentLoad(5, 3_000, 150)
	if err != nil {
		t.Fatal(err)
	}
	res2, err := drive(context.Background(), srv.GRPCAddr(), agent, 2, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Failed != 0 || res2.Requests == 0 || res2.Acked < res2.Requests*150 {
		t.Fatalf("agent load result %+v: want some requests, none failed, ≥ 150 acked spans each", res2)
	}
	res.Acked += res2.Acked
	var stored int64
	q := store.TraceQuery{Limit: 1000}
	for {
		page, err := st.ListTraces(store.WithDefaultProject(context.Background()), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Traces {
			stored += s.SpanCount
		}
		if page.NextPageToken == "" {
			break
		}
		q.PageToken = page.NextPageToken
	}
	if stored != res.Acked {
		t.Fatalf("store holds %d spans, drive counted %d acknowledged", stored, res.Acked)
	}
}

func TestProcParsersReadTheFieldsAfterTheCommandName(t *testing.T) {
	// A command name with spaces and a ')' must not shift the fields.
	stat := "1234 (a b) c) S 1 1 1 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 8 0 100 0 0\n"
	got, err := parseStatCPU(stat)
	if err != nil || got != 3800*time.Millisecond {
		t.Fatalf("parseStatCPU = %v, %v; want 3.8s (250+130 ticks)", got, err)
	}
	if _, err := parseStatCPU("garbage"); err == nil {
		t.Fatal("parseStatCPU accepted a line without a command name")
	}
	hwm, err := parseVmHWM("Name:\tx\nVmPeak:\t  9 kB\nVmHWM:\t  2048 kB\nVmRSS:\t 1 kB\n")
	if err != nil || hwm != 2048<<10 {
		t.Fatalf("parseVmHWM = %d, %v; want 2 MiB", hwm, err)
	}
	if _, err := parseVmHWM("Name:\tx\n"); err == nil {
		t.Fatal("parseVmHWM accepted a status without VmHWM")
	}
	// This process's own files parse.
	if _, err := peakRSS(selfPID()); err != nil {
		t.Fatal(err)
	}
	if _, err := procCPU(selfPID()); err != nil {
		t.Fatal(err)
	}
	if _, err := machineBusy(); err != nil {
		t.Fatal(err)
	}
}

func TestFlagsRefuseWhatWouldMeasureSomethingElse(t *testing.T) {
	for _, args := range [][]string{
		{"-senders", "4,x"},
		{"-senders", "0"},
		{"-targets", "peer,jaeger"},
		{"-load", "templated", "-request-spans", "1005"},
		{"-load", "random"},
		{"-sessions", "cgroup"},
		{"-pool-spans", "5000"},
		{"-duration", "0s"},
		{"-rounds", "0"},
		{"extra"},
	} {
		if _, err := parseFlags(args, &strings.Builder{}); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
	o, err := parseFlags([]string{"-duration", "5s", "-senders", "4, 16", "-targets", "serve,peer"}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Duration != 5*time.Second || len(o.Senders) != 2 || o.Senders[1] != 16 || o.Targets[0] != "serve" || o.RequestSpans != 1000 || o.Rounds != 10 ||
		o.Load != "agent" || o.Sessions != "own" {
		t.Fatalf("options %+v", o)
	}
}

// Paired rounds alternate the order, so neither target always runs on a
// freshly idle machine or right after the other.
func TestRoundsAlternateTheOrder(t *testing.T) {
	ts := []string{"peer", "serve"}
	if got := roundOrder(ts, 1); !slices.Equal(got, []string{"peer", "serve"}) {
		t.Errorf("round 1: %v", got)
	}
	if got := roundOrder(ts, 2); !slices.Equal(got, []string{"serve", "peer"}) {
		t.Errorf("round 2: %v", got)
	}
	if !slices.Equal(ts, []string{"peer", "serve"}) {
		t.Errorf("roundOrder changed its argument: %v", ts)
	}
}

// The interval is a t interval on the logarithms of the ratios: checked
// against values worked by hand.
func TestRatioIntervalIsATIntervalOnLogRatios(t *testing.T) {
	gm, lo, hi := ratioCI([]float64{2, 2, 2})
	if math.Abs(gm-2) > 1e-12 || math.Abs(lo-2) > 1e-12 || math.Abs(hi-2) > 1e-12 {
		t.Errorf("equal ratios: %v (%v–%v), want 2 (2–2)", gm, lo, hi)
	}
	// ln 1 = 0, ln e² = 2: mean 1, sd √2, se 1, t(1) = 12.706.
	gm, lo, hi = ratioCI([]float64{1, math.Exp(2)})
	if math.Abs(gm-math.E) > 1e-9 || math.Abs(lo-math.Exp(1-12.706)) > 1e-9 || math.Abs(hi-math.Exp(1+12.706)) > 1e-6 {
		t.Errorf("ratios 1, e²: %v (%v–%v)", gm, lo, hi)
	}
	if _, lo, _ := ratioCI([]float64{3}); !math.IsNaN(lo) {
		t.Errorf("one ratio has no interval, got lower bound %v", lo)
	}
	if got := t975(9); got != 2.262 {
		t.Errorf("t975(9) = %v, want 2.262", got)
	}
	if got := t975(60); math.Abs(got-2.000) > 0.005 {
		t.Errorf("t975(60) = %v, want 2.000", got)
	}
}

func TestPairedTableHasEveryRoundAndTheRatios(t *testing.T) {
	run := func(order int, target string, round int, rate, cpu, bytes float64, rss int64) result {
		return result{Order: order, Target: target, Senders: 4, Round: round, StoredPerSec: rate,
			TargetCPUPerM: cpu / 2, CHCPUPerM: cpu / 2, BytesPerSpanOptimized: bytes, TargetPeakRSS: rss, Complete: true}
	}
	r := report{Options: options{Duration: 40 * time.Second, Sessions: "own"}, Load: loadInfo{Name: "agent"}, Runs: []result{
		run(1, "peer", 1, 10000, 100, 400, 500e6), run(2, "serve", 1, 25000, 40, 380, 400e6),
		run(3, "serve", 2, 30000, 30, 380, 400e6), run(4, "peer", 2, 12000, 100, 400, 500e6),
	}}
	md := r.markdown()
	for _, want := range []string{
		"| 4 | 1 | peer first | 10,000 · 25,000 | 2.50 | 100.0 · 40.0 | 0.40 | 400.0 · 380.0 | 0.95 | 500 · 400 MB | 0.80 |",
		"| 4 | 2 | serve first | 12,000 · 30,000 | 2.50 |",
		"| 4 | 2 | **2.50×** (2.50–2.50) |",
		"processes in own sessions",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestSpliceDocReplacesOnlyBetweenTheMarkers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	orig := "# title\n\ntext naming `" + docBegin + "` and `" + docEnd + "`\n" + docBegin + "\nold table\n" + docEnd + "\ntext after\n"
	if err := os.WriteFile(path, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := spliceDoc(path, "new table\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if want := "# title\n\ntext naming `" + docBegin + "` and `" + docEnd + "`\n" + docBegin + "\n\nnew table\n\n" + docEnd + "\ntext after\n"; string(b) != want {
		t.Fatalf("doc =\n%s\nwant\n%s", b, want)
	}
	if err := os.WriteFile(path, []byte("no markers"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := spliceDoc(path, "x"); err == nil || !strings.Contains(err.Error(), docBegin) {
		t.Fatalf("err = %v, want one naming the markers", err)
	}
}

func TestMarkdownJoinsRunsInOrderAndReportsLossAndDuplicates(t *testing.T) {
	r := report{Options: options{Duration: 40 * time.Second, RequestSpans: 1000}, Runs: []result{
		{Order: 1, Target: "peer", Senders: 4, StoredPerSec: 55416.4, TargetCPUPerM: 13, CHCPUPerM: 17, TargetPeakRSS: 422e6, BytesPerSpan: 24, Complete: true},
		{Order: 2, Target: "serve", Senders: 4, StoredPerSec: 45651, TargetCPUPerM: 13, CHCPUPerM: 25, TargetPeakRSS: 243e6, BytesPerSpan: 90, Lost: 3, Complete: true},
		{Order: 3, Target: "peer", Senders: 4, StoredPerSec: 47617, TargetCPUPerM: 14, CHCPUPerM: 17, TargetPeakRSS: 601e6, BytesPerSpan: 25, Duplicates: 2, Complete: false},
	}}
	md := r.markdown()
	for _, want := range []string{
		"| peer | 4 | 55,416 · 47,617 | 13.0–14.0 | 17.0 | ",
		"| 422–601 MB | 24–25 |",
		"| 0 · 2 |",
		"| serve | 4 | 45,651 |",
		"| 3 · 0 |",
		"(drain timed out)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestPeerConfigHasTheIssuesSettings(t *testing.T) {
	c := peerConfig("127.0.0.1:4317", "127.0.0.1:9000", "tp_peer_1", true)
	for _, want := range []string{"endpoint: 127.0.0.1:4317", "max_recv_msg_size_mib: 64", "send_batch_size: 5000", "endpoint: tcp://127.0.0.1:9000", "database: tp_peer_1", "create_schema: true", "async_insert: true", "exporters: [clickhouse]"} {
		if !strings.Contains(c, want) {
			t.Errorf("config lacks %q:\n%s", want, c)
		}
	}
	if strings.Contains(c, "sending_queue") {
		t.Error("config overrides the exporter's default sending queue")
	}
}

// -sessions decides the process arrangement of ClickHouse and the target
// alike: own puts a child in a session it leads (its own autogroup),
// shared leaves it in the harness's session.
func TestSessionsArrangeChildren(t *testing.T) {
	sid := func(pid int) int {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		n, err := strconv.Atoi(f[3]) // state ppid pgrp session
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, mode := range []string{"own", "shared"} {
		p, err := startProcess("sleep", []string{"30"}, filepath.Join(t.TempDir(), "log"), mode)
		if err != nil {
			t.Fatal(err)
		}
		got := sid(p.PID)
		p.stop(5 * time.Second)
		want := sid(os.Getpid())
		if mode == "own" {
			want = p.PID
		}
		if got != want {
			t.Errorf("-sessions %s: child's session %d, want %d", mode, got, want)
		}
	}
}

// The final command writes its tables into docs/throughput.md: the page
// has the marker lines, and splicing changes nothing outside them.
func TestThroughputDocTakesTheTables(t *testing.T) {
	orig, err := os.ReadFile(filepath.Join("..", "..", "docs", "throughput.md"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "throughput.md")
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := spliceDoc(path, "NEW TABLES\n"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	before, _, _ := strings.Cut(string(orig), "\n"+docBegin+"\n")
	_, after, _ := strings.Cut(string(orig), "\n"+docEnd+"\n")
	if want := before + "\n" + docBegin + "\n\nNEW TABLES\n\n" + docEnd + "\n" + after; string(got) != want {
		t.Fatalf("splicing docs/throughput.md changed more than its generated block")
	}
}

// A process that exits during a run is named with how it ended, so a
// void run says why.
func TestDiedNamesTheProcessAndItsExit(t *testing.T) {
	p, err := startProcess("sh", []string{"-c", "exit 7"}, filepath.Join(t.TempDir(), "log"), "shared")
	if err != nil {
		t.Fatal(err)
	}
	<-p.exited
	if err := p.died("ClickHouse"); err == nil || !strings.Contains(err.Error(), "ClickHouse") || !strings.Contains(err.Error(), "exit status 7") {
		t.Fatalf("died = %v, want the name and the exit status", err)
	}
	q, err := startProcess("sleep", []string{"30"}, filepath.Join(t.TempDir(), "log"), "shared")
	if err != nil {
		t.Fatal(err)
	}
	defer q.stop(5 * time.Second)
	if err := q.died("peer"); err != nil {
		t.Fatalf("a running process: %v", err)
	}
}
