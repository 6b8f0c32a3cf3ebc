package reliability

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/internal/testtier"
)

var defaultRSSMiB = flag.Int64("reliability.default-rss-mib", 0, "row 1's bound on serve's RSS with default flags, in MiB; 0: serve's default memory limit on this machine (collector.DefaultMemoryLimitMiB)")

var features serveFeatures

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if loomEvalBuild.dir != "" {
		os.RemoveAll(loomEvalBuild.dir)
	}
	if *reportPath != "" {
		if err := writeReport(*reportPath, features); err != nil {
			fmt.Fprintln(os.Stderr, "write report:", err)
			code = 1
		}
	}
	os.Exit(code)
}

const token = "reliability-token-0123456789"

// The rows' lengths. make test runs each row shorter (Pick's first value);
// the long tier (LOOMWORK_LONG=1, make soak) runs the lengths of issue 17's
// scaling that docs/reliability.md describes and quotes figures from, so
// its figures are regenerated with LOOMWORK_LONG=1. A short row is the
// same scenario with the same checks, for less time: every outage stays
// longer than the timeout it is about (the SDK's 10 s; serve's 30 s store
// write), every kill and restart still happens, and only the load's and
// the quiet phases' durations shrink. The subtests keep their names (the
// doc's -run patterns); each row's label in the report gives its length.
var (
	manyExportersFor = testtier.Pick(12*time.Second, 15*time.Second) // over the SDK's 10 s timeout: a second wave starts even if the first timed out
	floodCapacityFor = testtier.Pick(2*time.Second, 5*time.Second)
	floodFor         = testtier.Pick(5*time.Second, 12*time.Second)
	junkFloodFor     = testtier.Pick(2*time.Second, 6*time.Second)
	// before and after an outage: load runs before it starts and after it ends
	outageBefore = testtier.Pick(2*time.Second, 3*time.Second)
	outageAfter  = testtier.Pick(3*time.Second, 5*time.Second)
	// serve down: under the SDK's 10 s timeout either way (the patient
	// exporter must lose nothing, the default one only what its retries
	// miss)
	serveDownFor = testtier.Pick(4*time.Second, 8*time.Second)
	// ClickHouse down: longer than the SDK's 10 s timeout (what saves the
	// spans is the spool, not the sender's retries)
	clickhouseDownFor = testtier.Pick(12*time.Second, 20*time.Second)
	// ClickHouse hung: longer than serve's 30 s store-write timeout
	// (collector.DefaultTimeout, no flag) as well
	clickhouseHungFor = testtier.Pick(32*time.Second, 35*time.Second)
	// the disk stays full this long after the first refusal
	diskFullFor = testtier.Pick(2*time.Second, 5*time.Second)
	// the kill -9 moments after (re)start: early, mid, late in a run
	kill9Moments = testtier.Pick(
		[]time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second},
		[]time.Duration{500 * time.Millisecond, 2 * time.Second, 4 * time.Second})
	restartBefore = testtier.Pick(1500*time.Millisecond, 3*time.Second)
	restartAfter  = testtier.Pick(time.Second, 2*time.Second)
)

// secs names a length in the rows' labels: "15 s", "0.5 s".
func secs(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
}

// TestReliability reproduces the rows of issue 17's table. Each row is a
// subtest and can run alone (-run 'TestReliability/2-').
func TestReliability(t *testing.T) {
	testtier.Slow(t)
	bin := buildLoomEval(t)
	features = probeFeatures(t, bin)
	t.Logf("serve features: spool=%v", features.Spool)

	var capacityRef float64 // row 1 default flags, acked spans/s
	t.Run("1-many-exporters", func(t *testing.T) {
		scale := "96 exporters (issue: 148) × 1,024-span exports back to back for " + secs(manyExportersFor) + ", embedded store"
		t.Run("default-flags", func(t *testing.T) {
			r, rate := manyExporters(t, bin, "1. 96 SDK exporters, default flags", scale, nil)
			capacityRef = rate
			bound := *defaultRSSMiB
			if bound == 0 {
				bound = int64(collector.DefaultMemoryLimitMiB())
			}
			r.check(t, r.Mem.HWM <= bound<<20, "serve's VmHWM %s is over %d MiB (the default memory limit must be a real bound)", mib(r.Mem.HWM), bound)
		})
		t.Run("memory-limit-512", func(t *testing.T) {
			r, rate := manyExporters(t, bin, "1. same, --memory-limit-mib 512", scale+" (issue: limit 1024)", []string{"--memory-limit-mib", "512"})
			r.check(t, r.Mem.HWM <= 512<<20, "serve's VmHWM %s is over the 512 MiB limit", mib(r.Mem.HWM))
			if capacityRef > 0 {
				// A rate, so recorded rather than failed (under CI's parallel
				// packages it measures the neighbours too): 101–115% in quiet
				// runs since the admission budget became a 128th of the limit.
				r.open(t, rate >= 0.9*capacityRef, "goodput %.0f spans/s is under 90%% of the same load's with default flags (%.0f spans/s)", rate, capacityRef)
			}
		})
	})

	t.Run("2-flood-of-large-requests", func(t *testing.T) {
		floodRow(t, bin)
	})

	t.Run("3-unauthenticated-flood", func(t *testing.T) {
		unauthRow(t, bin)
	})

	t.Run("4-timestamp-out-of-range-clickhouse", func(t *testing.T) {
		timestampRow(t, bin)
	})

	// The outage rows run one after the other: run at once, a row's serve
	// restarted on its fixed address (freeAddr: free when picked, not
	// reserved) collided with another row's ClickHouse ports, and the
	// disk-full row's senders, sharing the CPU, no longer filled the spool
	// within its wait.
	t.Run("5-outages", func(t *testing.T) {
		t.Run("serve-down-8s-default-exporter", func(t *testing.T) { serveDownRow(t, bin, exporterDefault) })
		t.Run("serve-down-8s-patient-exporter", func(t *testing.T) { serveDownRow(t, bin, exporterPatient) })
		t.Run("clickhouse-unreachable-20s", func(t *testing.T) { clickhouseOutageRow(t, bin, false, clickhouseDownFor) })
		t.Run("clickhouse-hung-35s", func(t *testing.T) { clickhouseOutageRow(t, bin, true, clickhouseHungFor) })
		t.Run("spool-disk-full", func(t *testing.T) { diskFullRow(t, bin) })
	})

	t.Run("6-restarts-under-load", func(t *testing.T) {
		t.Run("kill9-sqlite-three-moments-and-twice", func(t *testing.T) { kill9SQLiteRow(t, bin) })
		t.Run("sigterm-sqlite", func(t *testing.T) { sigtermRow(t, bin) })
		t.Run("kill9-clickhouse", func(t *testing.T) { kill9ClickHouseRow(t, bin) })
	})
}

// refusals is how many attempts were refused retryably (RESOURCE_EXHAUSTED
// or UNAVAILABLE, with or without RetryInfo).
func refusals(c *codeCount) int {
	return c.get("ResourceExhausted") + c.get("ResourceExhausted+RetryInfo") + c.get("Unavailable") + c.get("Unavailable+RetryInfo")
}

// finishSQLite stops the load, then serve (SIGTERM), and counts the
// embedded store.
func finishSQLite(t *testing.T, r *rowResult, s *serveProc, l *load, dbPath string) {
	t.Helper()
	l.stop()
	s.term(60 * time.Second)
	keys, sc := sqliteKeys(t, dbPath, l.nonce)
	r.C = tally(l.recs, keys)
	r.HasSpans = true
	r.Mem = s.memory()
	r.Tries, r.Finals = l.tries.String(), l.finals.String()
	if sc.Foreign > 0 {
		r.note("%d stored spans belong to no sender", sc.Foreign)
	}
}

func manyExporters(t *testing.T, bin, row, scale string, flags []string) (*rowResult, float64) {
	r := newRow(t, row, scale, "serve "+strings.Join(append([]string{"--store", "sqlite"}, flags...), " ")+"; "+exporterDefault.Name)
	dbPath := filepath.Join(t.TempDir(), "traces.db")
	s := startServe(t, bin, append([]string{"--store", dbPath}, flags...)...)
	l, err := startLoad(s.GRPCAddr, loadConfig{Senders: 96, SpansPerExport: 1024, Exporter: exporterDefault})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(manyExportersFor)
	// Goodput is what was acknowledged while the senders were sending. The
	// whole run's rate (stopping waits for senders asleep in the SDK's
	// 5–30 s retry backoff) is a note: its tail measured the backoff of the
	// last refused senders, not serve, and made the two runs of this row
	// differ by the refusals near the end.
	window := time.Since(l.start)
	rate := float64(l.ackedSpans()) / window.Seconds()
	finishSQLite(t, r, s, l, dbPath)
	r.note("acknowledged %.0f spans/s while sending (%s); %.0f spans/s over the whole run (%s, until the last sender's retries ended)",
		rate, window.Round(time.Second), float64(r.C.Acked)/l.end.Sub(l.start).Seconds(), l.end.Sub(l.start).Round(time.Second))
	r.spanTargets(t)
	deadlines := l.tries.get("DeadlineExceeded")
	// Open under load: held on a quiet machine (4 timeouts against 123
	// refusals), not under CI's parallel packages (70 against 30).
	r.open(t, deadlines <= refusals(&l.tries), "senders saw %d deadline timeouts and only %d retryable refusals (RESOURCE_EXHAUSTED/UNAVAILABLE): an overloaded serve must refuse, not queue", deadlines, refusals(&l.tries))
	return r, rate
}

func floodRow(t *testing.T, bin string) {
	r := newRow(t, "2. 300 concurrent requests × 4,096 spans, --memory-limit-mib 512",
		"as the issue (300 × 4,096), for "+secs(floodFor)+" after a "+secs(floodCapacityFor)+" capacity run of 4 senders", "serve --store sqlite --memory-limit-mib 512; raw OTLP/gRPC, 10 s deadline, RetryInfo honoured")
	dbPath := filepath.Join(t.TempDir(), "traces.db")
	s := startServe(t, bin, "--store", dbPath, "--memory-limit-mib", "512")
	nonce := newNonce()
	capRun, err := flood(s.GRPCAddr, nonce, 0, 4, 4096, floodCapacityFor)
	if err != nil {
		t.Fatal(err)
	}
	capacity := float64(capRun.ackedSpans()) / capRun.took.Seconds()
	fl, err := flood(s.GRPCAddr, nonce, 1000, 300, 4096, floodFor)
	if err != nil {
		t.Fatal(err)
	}
	goodput := float64(fl.ackedSpans()) / fl.took.Seconds()
	s.term(60 * time.Second)
	keys, _ := sqliteKeys(t, dbPath, nonce)
	r.C = tally(append(append([]exportRecord{}, capRun.recs...), fl.recs...), keys)
	r.HasSpans = true
	r.Mem = s.memory()
	ok := fl.outcomes.get("OK")
	r.Tries = fl.outcomes.String()
	r.Finals = fmt.Sprintf("%d of %d flood requests accepted", ok, len(fl.recs))
	r.note("capacity (4 senders) %.0f spans/s; goodput under the flood %.0f spans/s (%.0f%%)", capacity, goodput, 100*goodput/capacity)
	r.spanTargets(t)
	r.check(t, r.Mem.HWM <= 512<<20, "serve's VmHWM %s is over the 512 MiB limit", mib(r.Mem.HWM))
	// Rates and timeouts depend on the CPU the flood gets, so they are
	// recorded (OPEN when missed) rather than failed: in seven quiet runs
	// goodput was 89–110% of capacity and no request hit its deadline;
	// under CI the flood shares the cores with other packages.
	r.open(t, goodput >= 0.9*capacity, "goodput %.0f spans/s under the flood is below 90%% of capacity %.0f spans/s", goodput, capacity)
	r.open(t, fl.outcomes.get("deadline exceeded") == 0, "%d requests ran into the sender's 10 s deadline: accepted work must finish, the rest be refused early", fl.outcomes.get("deadline exceeded"))
	r.check(t, fl.refusals == fl.retryOK, "%d of %d refusals carry no RetryInfo", fl.refusals-fl.retryOK, fl.refusals)
	other := fl.outcomes.total("OK", "deadline exceeded", "ResourceExhausted", "ResourceExhausted+RetryInfo", "Unavailable", "Unavailable+RetryInfo")
	r.check(t, other == 0, "%d requests failed with something else than OK, RESOURCE_EXHAUSTED or UNAVAILABLE", other)
}

func unauthRow(t *testing.T, bin string) {
	r := newRow(t, "3. unauthenticated gRPC flood, --auth-token set",
		"64 concurrent 16 MiB messages (8 connections) for "+secs(junkFloodFor), "serve --store sqlite --auth-token …; raw gRPC, no token")
	s := startServe(t, bin, "--store", filepath.Join(t.TempDir(), "traces.db"), "--auth-token", token)
	time.Sleep(500 * time.Millisecond)
	s.sampler.resetIdle(s.cmd.Process.Pid)
	var all codeCount
	total := 0
	done := make(chan struct{})
	var errs []error
	for range 8 {
		go func() {
			c, n, err := junkFlood(s.GRPCAddr, "", 8, 16<<20, junkFloodFor)
			all.mu.Lock()
			if err != nil {
				errs = append(errs, err)
			} else {
				for k, v := range c.m {
					if all.m == nil {
						all.m = map[string]int{}
					}
					all.m[k] += v
				}
				total += n
			}
			all.mu.Unlock()
			done <- struct{}{}
		}()
	}
	for range 8 {
		<-done
	}
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
	// The token still works: one request with it is answered (a junk
	// message is INVALID_ARGUMENT, which proves it got past the check).
	withToken, _, err := junkFlood(s.GRPCAddr, "Bearer "+token, 1, 1<<10, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	r.Mem = s.memory()
	s.term(30 * time.Second)
	r.Mem = s.memory()
	r.Tries = all.String()
	r.Finals = fmt.Sprintf("%d requests; with the token: %s", total, withToken.String())
	growth := r.Mem.HWM - r.Mem.IdleRSS
	r.note("VmHWM − idle VmRSS = %s", mib(growth))
	r.check(t, all.get("Unauthenticated") == total && total > 0, "%d of %d unauthenticated requests were answered otherwise than UNAUTHENTICATED", total-all.get("Unauthenticated"), total)
	r.check(t, growth <= 64<<20, "serve grew by %s over idle (%s) under an unauthenticated flood: the token must be checked before a message is read", mib(growth), mib(r.Mem.IdleRSS))
	r.check(t, withToken.get("Unauthenticated") == 0, "a request with the token was refused: %s", withToken.String())
}

func clickhouseServe(t *testing.T, bin string, ch *chServer, db string, extra ...string) (*serveProc, string) {
	t.Helper()
	args := []string{"--store", ch.DSN(db)}
	setup := "serve --store clickhouse"
	if features.Spool {
		args = append(args, "--spool-dir", filepath.Join(t.TempDir(), "spool"))
		setup += " --spool-dir DIR"
	} else {
		setup += " (no spool: this serve has no --spool-dir)"
	}
	args = append(args, extra...)
	if len(extra) > 0 {
		setup += " " + strings.Join(extra, " ")
	}
	return startServe(t, bin, args...), setup
}

func timestampRow(t *testing.T, bin string) {
	ch := startClickHouse(t, bin)
	const db = "rel"
	s, setup := clickhouseServe(t, bin, ch, db)
	r := newRow(t, "4. one span with start = 2^64−1 ns among 3 valid, ClickHouse", "as the issue (one request)", setup+"; raw OTLP/gRPC")
	nonce := newNonce()
	td := rawTraces(nonce, 1<<32|1, 4, 3, maxTimestamp)
	resp, err := exportOnce(s.GRPCAddr, td)
	r.Finals = attemptName(err)
	if err == nil {
		r.Finals = fmt.Sprintf("OK, partial_success rejected_spans=%d %q", resp.PartialSuccess().RejectedSpans(), resp.PartialSuccess().ErrorMessage())
	}
	r.Tries = r.Finals
	waitClickHouseSettled(t, ch, db, 2*time.Second, 30*time.Second)
	s.term(60 * time.Second)
	keys, _ := clickhouseKeys(t, ch, db, nonce)
	r.C = tally([]exportRecord{{first: 1<<32 | 1, n: 3, acked: err == nil}, {first: 1<<32 | 4, n: 1}}, keys)
	r.HasSpans = true
	r.Mem = s.memory()
	r.check(t, err == nil, "the request was refused as a whole (%v): the bad span must be rejected alone", err)
	if err == nil {
		r.check(t, resp.PartialSuccess().RejectedSpans() == 1, "partial_success rejected %d spans, want 1", resp.PartialSuccess().RejectedSpans())
	}
	r.check(t, r.C.Stored == 3 && keys[1<<32|4] == 0, "the store holds %d of the 3 valid spans (and the bad one %d times)", r.C.Stored-int64(min(keys[1<<32|4], 1)), keys[1<<32|4])
}

// outageSenders is the outage rows' sender count: the long tier offers
// the 20k spans/s, the suite half of it, with the same checks, so
// that the suite's other packages keep a core.
var outageSenders = testtier.Pick(4, 8)

// outageExporters names the outage rows' load in their labels.
func outageExporters() string {
	return fmt.Sprintf("%d exporters × 256 spans every 100 ms", outageSenders)
}

// outageLoad is the load of the outage rows: outageSenders senders × 256
// spans every 100 ms (≤ 2,560 spans/s each).
func outageLoad(t *testing.T, addr string, exp exporterSetup, payload int) *load {
	l, err := startLoad(addr, loadConfig{Senders: outageSenders, SpansPerExport: 256, Interval: 100 * time.Millisecond, PayloadBytes: payload, Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// finishClickHouse stops the load, waits for the store to settle (the
// spool drained), stops serve and counts.
func finishClickHouse(t *testing.T, r *rowResult, s *serveProc, l *load, ch *chServer, db string) {
	t.Helper()
	l.stop()
	if s.running() {
		began := time.Now()
		var h health
		drained := waitFor(t.Context(), 90*time.Second, func() bool {
			h = s.health()
			return !h.OK || h.Spool == nil || h.Spool.Bytes == 0
		})
		if h.Spool != nil {
			if drained {
				r.note("the spool drained %s after the senders stopped", secs(time.Since(began).Round(time.Second)))
			} else {
				// What is left stays on disk for the next start; the row
				// still counts it as not stored, and says why.
				r.note("the spool still held %s bytes %s after the senders stopped; serve log: %s", commas(h.Spool.Bytes), secs(time.Since(began).Round(time.Second)), tailFile(s.logPath(), 10))
			}
		}
		waitClickHouseSettled(t, ch, db, 3*time.Second, 90*time.Second)
		s.term(60 * time.Second)
	}
	keys, sc := clickhouseKeys(t, ch, db, l.nonce)
	r.C = tally(l.recs, keys)
	r.HasSpans = true
	vis, rawTraces := visibleDuplicates(t, ch, db)
	if raw := sc.Rows - sc.Distinct; raw > 0 {
		r.note("%s raw repeated rows in %d+ traces (ReplacingMergeTree collapses them; GetTrace of those traces returned %d duplicates)", commas(int64(raw)), rawTraces, vis)
	}
	r.C.Duplicated = vis
	r.Mem = s.memory()
	r.Tries, r.Finals = l.tries.String(), l.finals.String()
}

// spoolTargets: with a spool, a store outage loses nothing at all.
func (r *rowResult) spoolTargets(t *testing.T) {
	t.Helper()
	r.check(t, features.Spool, "serve has no --spool-dir: no durable spool between receiver and store")
	r.check(t, r.C.NeverStored == 0, "%s sent spans never reached the store (with a spool sized for the outage, want 0)", commas(r.C.NeverStored))
}

// storeDownSeen polls /healthz for up to within and reports whether it
// said the store is unreachable.
func storeDownSeen(t *testing.T, s *serveProc, within time.Duration) (bool, string) {
	var last health
	ok := waitFor(t.Context(), within, func() bool {
		last = s.health()
		return last.OK && last.Store.Reachable != nil && !*last.Store.Reachable
	})
	return ok, fmt.Sprintf("%d %s", last.Status, last.Raw)
}

func serveDownRow(t *testing.T, bin string, exp exporterSetup) {
	ch := startClickHouse(t, bin)
	const db = "rel"
	s, setup := clickhouseServe(t, bin, ch, db)
	scale := "as the issue (8 s)"
	if serveDownFor != 8*time.Second {
		scale = secs(serveDownFor) + " (issue: 8 s; under the SDK's 10 s timeout likewise)"
	}
	r := newRow(t, "5. serve down "+secs(serveDownFor)+" (kill -9, restart), "+strings.SplitN(exp.Name, " (", 2)[0]+" exporter",
		scale+"; "+outageExporters()+", "+secs(outageBefore)+" before and "+secs(outageAfter)+" after", setup+"; "+exp.Name)
	l := outageLoad(t, s.GRPCAddr, exp, 0)
	time.Sleep(outageBefore)
	s.kill9()
	time.Sleep(serveDownFor)
	s.restart()
	time.Sleep(outageAfter)
	finishClickHouse(t, r, s, l, ch, db)
	r.spanTargets(t)
	if exp.Name == exporterPatient.Name {
		r.check(t, r.C.NeverStored == 0, "%s sent spans never reached the store although the exporter waits 60 s", commas(r.C.NeverStored))
	} else {
		r.note("a spool cannot help while serve itself is down: what the SDK's own retries (inside its 10 s timeout) do not deliver is lost at the sender")
	}
}

func clickhouseOutageRow(t *testing.T, bin string, hung bool, d time.Duration) {
	ch := startClickHouse(t, bin)
	const db = "rel"
	s, setup := clickhouseServe(t, bin, ch, db)
	what, scale := "unreachable (kill -9, restart on its data dir)", secs(d)+" (issue: 30 s; longer than the SDK's 10 s timeout)"
	if hung {
		what, scale = "hung (SIGSTOP, SIGCONT)", secs(d)+" (issue: 91 s; longer than the SDK's 10 s and serve's 30 s store-write timeouts)"
	}
	r := newRow(t, fmt.Sprintf("5. ClickHouse %s %s", what, d), scale+"; "+outageExporters()+", "+secs(outageBefore)+" before and "+secs(outageAfter)+" after", setup+"; "+exporterDefault.Name)
	l := outageLoad(t, s.GRPCAddr, exporterDefault, 0)
	time.Sleep(outageBefore)
	began := time.Now()
	if hung {
		ch.pause()
	} else {
		ch.kill9()
	}
	seen, last := storeDownSeen(t, s, d-2*time.Second)
	time.Sleep(time.Until(began.Add(d)))
	if hung {
		ch.resume()
	} else {
		ch.restart()
	}
	time.Sleep(outageAfter)
	finishClickHouse(t, r, s, l, ch, db)
	r.spanTargets(t)
	r.spoolTargets(t)
	r.check(t, seen, "/healthz never said the store is unreachable during the outage (last answer: %s)", last)
}

func diskFullRow(t *testing.T, bin string) {
	r := newRow(t, "5. spool disk full (64 MiB tmpfs) while ClickHouse is down", "64 MiB tmpfs, 2 KiB spans; "+outageExporters()+" with ClickHouse down until the disk is full and "+secs(diskFullFor)+" more, "+secs(outageAfter)+" after", "serve --store clickhouse --spool-dir TMPFS --spool-max-mib 1024; "+exporterDefault.Name)
	if !features.Spool {
		r.check(t, false, "serve has no --spool-dir: there is no spool to fill")
		return
	}
	dir := testtier.Tmpfs(t, 64<<20)
	ch := startClickHouse(t, bin)
	const db = "rel"
	s := startServe(t, bin, "--store", ch.DSN(db), "--spool-dir", dir, "--spool-max-mib", "1024")
	l := outageLoad(t, s.GRPCAddr, exporterDefault, 2048)
	time.Sleep(outageBefore)
	ch.kill9()
	// ClickHouse stays down until the disk has filled and a sender was
	// refused: on a quiet machine that takes ~2 s; under CI's shared CPU
	// the senders fill it more slowly (a run saw its refusals only after
	// the 10 s this waited before).
	full := waitFor(t.Context(), 30*time.Second, func() bool { return refusals(&l.tries) > 0 })
	time.Sleep(diskFullFor)
	// /readyz says the disk is full (issue 36: it stayed 200).
	var code int
	var body string
	notReady := waitFor(t.Context(), 10*time.Second, func() bool {
		code, body = s.readyz()
		return code == 503 && strings.Contains(body, "disk is full")
	})
	okBefore := l.tries.get("OK")
	ch.restart()
	// The spool heals once the store is back (issue 36: the feeder stored
	// what the spool held but could not write its checkpoint, and 1 span
	// was acknowledged in the 84 s after ClickHouse returned).
	restarted := time.Now()
	healed := waitFor(t.Context(), 60*time.Second, func() bool { return l.tries.get("OK") > okBefore })
	r.note("acknowledged again %s after ClickHouse returned", secs(time.Since(restarted)))
	time.Sleep(outageAfter)
	finishClickHouse(t, r, s, l, ch, db)
	r.spanTargets(t)
	r.check(t, full, "no sender was refused retryably while the spool's disk was full")
	r.check(t, notReady, "/readyz while the spool's disk was full answered %d %s; want 503 saying the disk is full", code, body)
	r.check(t, healed, "no export was acknowledged within 60 s of ClickHouse's return: the full spool did not heal")
	if !healed || !notReady {
		if b, err := os.ReadFile(s.logPath()); err == nil {
			t.Logf("serve's log (last 8 KiB):\n%s", b[max(0, len(b)-8<<10):])
		}
	}
	r.note("a full disk refuses (retryably); what the SDK gives up on within its 10 s timeout is lost at the sender: %s spans never stored", commas(r.C.NeverStored))
}

func kill9SQLiteRow(t *testing.T, bin string) {
	r := newRow(t, "6. kill -9 of serve under load at three moments and twice in a row, embedded store",
		"16 exporters × 512 spans back to back; kill -9 at "+secs(kill9Moments[0])+", "+secs(kill9Moments[1])+" and "+secs(kill9Moments[2])+" after (re)start, then twice in a row (the second right after ready), "+secs(restartAfter)+" more", "serve --store sqlite; "+exporterPatient.Name)
	dbPath := filepath.Join(t.TempDir(), "traces.db")
	s := startServe(t, bin, "--store", dbPath)
	l, err := startLoad(s.GRPCAddr, loadConfig{Senders: 16, SpansPerExport: 512, Exporter: exporterPatient})
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range kill9Moments {
		time.Sleep(at)
		s.kill9()
		s.restart()
	}
	time.Sleep(time.Second)
	s.kill9()
	s.restart()
	s.kill9()
	s.restart()
	time.Sleep(restartAfter)
	finishSQLite(t, r, s, l, dbPath)
	r.spanTargets(t)
}

func sigtermRow(t *testing.T, bin string) {
	r := newRow(t, "6. SIGTERM of serve under load, embedded store", "16 exporters × 512 spans back to back; SIGTERM after "+secs(restartBefore)+", restart, "+secs(restartAfter)+" more", "serve --store sqlite; "+exporterPatient.Name)
	dbPath := filepath.Join(t.TempDir(), "traces.db")
	s := startServe(t, bin, "--store", dbPath)
	l, err := startLoad(s.GRPCAddr, loadConfig{Senders: 16, SpansPerExport: 512, Exporter: exporterPatient})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(restartBefore)
	s.term(60 * time.Second)
	s.restart()
	time.Sleep(restartAfter)
	finishSQLite(t, r, s, l, dbPath)
	r.spanTargets(t)
}

func kill9ClickHouseRow(t *testing.T, bin string) {
	ch := startClickHouse(t, bin)
	const db = "rel"
	s, setup := clickhouseServe(t, bin, ch, db)
	r := newRow(t, "6. kill -9 of serve under load, ClickHouse", outageExporters()+"; kill -9 after "+secs(restartBefore)+", restart at once, "+secs(restartBefore)+" more", setup+"; "+exporterPatient.Name)
	l := outageLoad(t, s.GRPCAddr, exporterPatient, 0)
	time.Sleep(restartBefore)
	s.kill9()
	s.restart()
	time.Sleep(restartBefore)
	finishClickHouse(t, r, s, l, ch, db)
	r.spanTargets(t)
}
