package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// Child-process modes: the test binary re-executes itself to act as a
// second process on the same store file.
const (
	envChildMode = "LOOMWORK_SQLITE_TEST_CHILD"
	envChildPath = "LOOMWORK_SQLITE_TEST_PATH"
)

func TestMain(m *testing.M) {
	switch os.Getenv(envChildMode) {
	case "reader":
		os.Exit(childReader(os.Getenv(envChildPath)))
	case "writer":
		os.Exit(childWriter(os.Getenv(envChildPath)))
	}
	goleak.VerifyTestMain(m)
}

// openTemp opens a fresh store in a temporary directory.
func openTemp(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "traces.db")
	s, err := Open(context.Background(), Config{Path: path})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s, path
}

func TestConformance(t *testing.T) {
	testtier.Slow(t)
	// The subtests run at once, each in its own file; Reopen opens the
	// file of the most recent Open of the same top-level subtest.
	var mu sync.Mutex
	lastPath := map[string]string{}
	key := func(t *testing.T) string {
		name := t.Name()
		if i := strings.Index(name, "/"); i >= 0 {
			if j := strings.Index(name[i+1:], "/"); j >= 0 {
				return name[:i+1+j]
			}
		}
		return name
	}
	storetest.RunAll(t, storetest.Harness{
		Parallel: true,
		Open: func(t *testing.T) store.Store {
			path := filepath.Join(t.TempDir(), "traces.db")
			s, err := Open(context.Background(), Config{Path: path})
			if err != nil {
				t.Fatalf("Open(%s): %v", path, err)
			}
			mu.Lock()
			lastPath[key(t)] = path
			mu.Unlock()
			return s
		},
		Reopen: func(t *testing.T) store.Store {
			mu.Lock()
			path := lastPath[key(t)]
			mu.Unlock()
			if path == "" {
				t.Fatal("Reopen before Open")
			}
			s, err := Open(context.Background(), Config{Path: path})
			if err != nil {
				t.Fatalf("reopen %s: %v", path, err)
			}
			return s
		},
		New: func(t *testing.T) store.Store {
			s, err := New(Config{Path: filepath.Join(t.TempDir(), "traces.db")})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	})
}

func TestConfigValidateNamesEachBadField(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{}, "path must be set"},
		{Config{Path: ":memory:"}, "path must be a file path"},
		{Config{Path: "file:x.db?mode=ro"}, "path must be a file path"},
		{Config{Path: "x.db", Synchronous: "off"}, `synchronous must be "full" or "normal" (got "off")`},
		{Config{Path: "x.db", BusyTimeout: -time.Second}, "busy_timeout must not be negative"},
		{Config{Path: "x.db", MaxReaders: -1}, "max_readers must not be negative"},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v; want an error containing %q", c.cfg, err, c.want)
		}
	}
	if err := (Config{Path: "x.db", Synchronous: "NORMAL"}).Validate(); err != nil {
		t.Errorf("Validate(valid config): %v", err)
	}
	if err := (Config{Synchronous: "off", MaxReaders: -1}).Validate(); err == nil || strings.Count(err.Error(), "must") < 3 {
		t.Errorf("Validate with three problems should report all three, got %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if _, err := Open(ctx, Config{Path: filepath.Join(dir, "missing", "t.db")}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Open in a missing directory: %v; want a 'does not exist' error", err)
	}
	if _, err := Open(ctx, Config{Path: filepath.Join(dir, "none.db"), ReadOnly: true}); err == nil {
		t.Error("read-only Open of a missing file: nil error")
	}
	// A SQLite file that is something else entirely.
	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE notes (body TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(ctx, Config{Path: other}); err == nil || !strings.Contains(err.Error(), "not a Loomwork trace store") {
		t.Errorf("Open(foreign sqlite file) = %v; want 'not a Loomwork trace store'", err)
	}
	if _, err := Open(ctx, Config{Path: other, ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "not a Loomwork trace store") {
		t.Errorf("read-only Open(foreign sqlite file) = %v; want 'not a Loomwork trace store'", err)
	}
}

func TestMigrationIsRecorded(t *testing.T) {
	s, path := openTemp(t)
	s.Shutdown(context.Background())
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var uv int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&uv); err != nil {
		t.Fatal(err)
	}
	var n int
	var name string
	if err := db.QueryRow(`SELECT count(*), max(name) FROM schema_migrations`).Scan(&n, &name); err != nil {
		t.Fatal(err)
	}
	if uv != schemaVersion() || n != schemaVersion() || name != lastMigration(t) {
		t.Fatalf("user_version %d, %d recorded migrations (last %q); want %d and %s", uv, n, name, schemaVersion(), lastMigration(t))
	}
	// Reopening applies nothing twice.
	s2, err := Open(context.Background(), Config{Path: path})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	s2.Shutdown(context.Background())
	if err := db.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n != schemaVersion() {
		t.Fatalf("after reopen: %d recorded migrations (err %v)", n, err)
	}
}

func TestNewerSchemaIsClearError(t *testing.T) {
	s, path := openTemp(t)
	s.Shutdown(context.Background())
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, ro := range []bool{false, true} {
		_, err := Open(context.Background(), Config{Path: path, ReadOnly: ro})
		if err == nil || !strings.Contains(err.Error(), "schema version 99, newer than this binary supports") {
			t.Errorf("Open(read-only=%v) of a newer file = %v; want a 'newer than this binary' error", ro, err)
		}
	}
}

func TestReadOnlyStoreReadsAndRefusesWrites(t *testing.T) {
	w, path := openTemp(t)
	ctx := context.Background()
	spans := storetest.GenerateTraces(5, 4, 1)
	if err := w.WriteSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, Config{Path: path, ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open: %v", err)
	}
	defer r.Shutdown(context.Background())
	if err := r.WriteSpans(ctx, spans[:1]); !errors.Is(err, errReadOnly) {
		t.Fatalf("WriteSpans on a read-only store = %v; want errReadOnly", err)
	}
	got, err := r.GetTrace(ctx, spans[0].TraceID)
	if err != nil || len(got) != 4 {
		t.Fatalf("read-only GetTrace: %d spans, %v", len(got), err)
	}
	// Writes after the read-only store opened are visible to it (WAL).
	more := storetest.GenerateTraces(3, 4, 2)
	if err := w.WriteSpans(ctx, more); err != nil {
		t.Fatal(err)
	}
	page, err := r.ListTraces(ctx, store.TraceQuery{})
	if err != nil || len(page.Traces) != 8 {
		t.Fatalf("read-only ListTraces after more writes: %d traces, %v; want 8", len(page.Traces), err)
	}
}

func TestShutdownIsIdempotentAndLaterCallsFail(t *testing.T) {
	s, _ := openTemp(t)
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	ctx := context.Background()
	if err := s.WriteSpans(ctx, storetest.GenerateTraces(1, 2, 1)); !errors.Is(err, errClosed) {
		t.Errorf("WriteSpans after Shutdown = %v", err)
	}
	if _, err := s.GetTrace(ctx, "0123456789abcdef0123456789abcdef"); !errors.Is(err, errClosed) {
		t.Errorf("GetTrace after Shutdown = %v", err)
	}
	if _, err := s.ListTraces(ctx, store.TraceQuery{}); !errors.Is(err, errClosed) {
		t.Errorf("ListTraces after Shutdown = %v", err)
	}
}

func TestNewDoesNoIOAndStartFailureReleasesEverything(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if _, err := New(Config{MaxReaders: -1}); err == nil || !strings.Contains(err.Error(), "path must be set") || !strings.Contains(err.Error(), "max_readers") {
		t.Errorf("New with a bad config: %v; want errors naming path and max_readers", err)
	}
	missing := filepath.Join(dir, "missing", "t.db")
	s, err := New(Config{Path: missing})
	if err != nil {
		t.Fatalf("New does no I/O, so a missing directory is Start's error: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("New touched the file system: %v", err)
	}
	if _, err := s.GetTrace(ctx, strings.Repeat("ab", 16)); !errors.Is(err, errNotStarted) {
		t.Errorf("GetTrace before Start = %v, want errNotStarted", err)
	}
	if err := s.Start(ctx); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Start in a missing directory: %v", err)
	}
	if s.writer != nil || s.reader != nil || s.codec != nil {
		t.Error("a failed Start kept what it had opened")
	}
	// A failed Start may be retried once the cause is fixed.
	if err := os.Mkdir(filepath.Dir(missing), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatalf("Start after fixing the directory: %v", err)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	// Failing in the migration (a file from a newer binary) closes the
	// connections it opened; goleak in TestMain sees any left behind.
	newer := filepath.Join(dir, "newer.db")
	db, err := sql.Open("sqlite", newer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA user_version = 999`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err = New(Config{Path: newer})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err == nil {
		t.Fatal("Start on a newer schema: nil error")
	}
	if s.writer != nil || s.reader != nil || s.codec != nil {
		t.Error("a failed Start kept what it had opened")
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown after a failed Start: %v", err)
	}
}

func TestShutdownHonoursItsContextWhileAWriteIsInFlight(t *testing.T) {
	s, _ := openTemp(t)
	s.writeMu.Lock() // a write in flight
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown while a write holds the lock: %v, want DeadlineExceeded", err)
	}
	if err := s.WriteSpans(context.Background(), storetest.GenerateTraces(1, 2, 1)); !errors.Is(err, errClosed) {
		t.Errorf("WriteSpans once Shutdown began: %v, want errClosed", err)
	}
	s.writeMu.Unlock() // the write ends: the connections close
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown after the write ended: %v", err)
	}
}

func TestUnstorableTimeIsErrorNamingTheSpan(t *testing.T) {
	s, _ := openTemp(t)
	spans := storetest.GenerateTraces(1, 3, 1)
	spans[2].StartTime = time.Time{}
	err := s.WriteSpans(context.Background(), spans)
	if err == nil || !strings.Contains(err.Error(), "span 2") || !strings.Contains(err.Error(), "start_time") {
		t.Fatalf("WriteSpans with a zero start time = %v; want an error naming span 2 and start_time", err)
	}
	if _, err := s.GetTrace(context.Background(), spans[0].TraceID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("rejected batch was partly stored: %v", err)
	}
}

func TestNaNAndInfCostRoundTrip(t *testing.T) {
	s, _ := openTemp(t)
	spans := storetest.GenerateTraces(1, 3, 1)
	nan, inf := math.NaN(), math.Inf(1)
	spans[1].CostUSD, spans[2].CostUSD = &nan, &inf
	if err := s.WriteSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTrace(context.Background(), spans[0].TraceID)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]store.Span{}
	for _, sp := range got {
		byID[sp.SpanID] = sp
	}
	if c := byID[spans[1].SpanID].CostUSD; c == nil || !math.IsNaN(*c) {
		t.Errorf("NaN cost read back as %v", c)
	}
	if c := byID[spans[2].SpanID].CostUSD; c == nil || !math.IsInf(*c, 1) {
		t.Errorf("+Inf cost read back as %v", c)
	}
}

func TestPageTokenOfAnotherQueryIsError(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	if err := s.WriteSpans(ctx, storetest.GenerateTraces(10, 2, 1)); err != nil {
		t.Fatal(err)
	}
	p, err := s.ListTraces(ctx, store.TraceQuery{Limit: 3, Status: store.StatusOK})
	if err != nil || p.NextPageToken == "" {
		t.Fatalf("first page: %v, token %q", err, p.NextPageToken)
	}
	for _, q := range []store.TraceQuery{
		{Limit: 3, PageToken: p.NextPageToken},                                                  // filters differ
		{Limit: 3, Status: store.StatusOK, SortBy: store.SortSpans, PageToken: p.NextPageToken}, // sort differs
		{Limit: 3, Status: store.StatusOK, Ascending: true, PageToken: p.NextPageToken},         // direction differs
	} {
		if _, err := s.ListTraces(ctx, q); err == nil || !strings.Contains(err.Error(), "different sort or filters") {
			t.Errorf("ListTraces(%+v) = %v; want a 'different sort or filters' error", q, err)
		}
	}
	// The limit may change between pages.
	if _, err := s.ListTraces(ctx, store.TraceQuery{Limit: 5, Status: store.StatusOK, PageToken: p.NextPageToken}); err != nil {
		t.Errorf("next page with another limit: %v", err)
	}
}

func TestLimitAboveMaxIsClamped(t *testing.T) {
	testtier.Slow(t)
	testtier.NoRace(t, "TestConformance") // single-goroutine: writes, then one list
	t.Parallel()                          // a file of its own
	s, _ := openTemp(t)
	ctx := context.Background()
	if err := s.WriteSpans(ctx, storetest.GenerateTraces(store.MaxPageSize+5, 1, 1)); err != nil {
		t.Fatal(err)
	}
	p, err := s.ListTraces(ctx, store.TraceQuery{Limit: 1 << 30})
	if err != nil || len(p.Traces) != store.MaxPageSize || p.NextPageToken == "" {
		t.Fatalf("ListTraces(limit 2^30): %d traces, token %q, %v; want %d and a token", len(p.Traces), p.NextPageToken, err, store.MaxPageSize)
	}
}

// startChild runs this test binary as a second process in mode on path.
func startChild(t *testing.T, mode, path string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChildMode+"="+mode, envChildPath+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child %s: %v", mode, err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill() // by pid
			cmd.Wait()
		}
	})
	return cmd, bufio.NewScanner(out)
}

// readerRounds is how many rounds the reader process reads while the
// writer writes as many batches: each round reads every trace (up to 170),
// CPU in SQLite under -race, so make test does 10 and the long tier 30.
// The child process inherits LOOMWORK_LONG, so both sides agree.
var readerRounds = testtier.Pick(10, 30)

// childReader opens path read-only and, readerRounds times, lists every
// trace and checks each one's spans, printing "ok <traces>" per round.
func childReader(path string) int {
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: path, ReadOnly: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child reader:", err)
		return 2
	}
	defer s.Shutdown(context.Background())
	for round := 0; round < readerRounds; round++ {
		n := 0
		q := store.TraceQuery{Limit: store.MaxPageSize}
		for {
			p, err := s.ListTraces(ctx, q)
			if err != nil {
				fmt.Fprintln(os.Stderr, "child reader: list:", err)
				return 3
			}
			for _, tr := range p.Traces {
				spans, err := s.GetTrace(ctx, tr.TraceID)
				if err != nil {
					fmt.Fprintln(os.Stderr, "child reader: get:", err)
					return 4
				}
				// The summary and the spans are read in separate snapshots;
				// spans can only have grown in between.
				if int64(len(spans)) < tr.SpanCount {
					fmt.Fprintf(os.Stderr, "child reader: trace %s has %d spans, summary says %d\n", tr.TraceID, len(spans), tr.SpanCount)
					return 5
				}
			}
			n += len(p.Traces)
			if p.NextPageToken == "" {
				break
			}
			q.PageToken = p.NextPageToken
		}
		fmt.Printf("ok %d\n", n)
	}
	return 0
}

func TestReadOnlyProcessReadsWhileAnotherWrites(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a file of its own; a child process reads it
	w, path := openTemp(t)
	ctx := context.Background()
	const initial = 20
	if err := w.WriteSpans(ctx, storetest.GenerateTraces(initial, 10, 1)); err != nil {
		t.Fatal(err)
	}
	cmd, out := startChild(t, "reader", path)
	// Keep writing while the other process reads.
	done := make(chan error, 1)
	go func() {
		for i := 0; i < readerRounds; i++ {
			if err := w.WriteSpans(ctx, storetest.GenerateTraces(5, 10, int64(100+i))); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	last, rounds := 0, 0
	for out.Scan() {
		f := strings.Fields(out.Text())
		if len(f) != 2 || f[0] != "ok" {
			t.Fatalf("child printed %q", out.Text())
		}
		n, _ := strconv.Atoi(f[1])
		if n < initial || n < last {
			t.Fatalf("reader process saw %d traces after %d; want at least %d and never fewer", n, last, initial)
		}
		last = n
		rounds++
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("reader process: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("writer: %v", err)
	}
	if rounds != readerRounds {
		t.Fatalf("reader finished %d rounds, want %d", rounds, readerRounds)
	}
}

// childWriter writes 10-span traces in 50-span batches to path forever,
// printing the number of batches acknowledged after each one.
func childWriter(path string) int {
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: path})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child writer:", err)
		return 2
	}
	for i := 0; ; i++ {
		if err := s.WriteSpans(ctx, storetest.GenerateTraces(5, 10, int64(1000+i))); err != nil {
			fmt.Fprintln(os.Stderr, "child writer:", err)
			return 3
		}
		fmt.Printf("acked %d\n", i+1)
	}
}

// TestKilledWriterLosesNoAcknowledgedSpan kills a writing process with
// SIGKILL and checks that every batch it acknowledged is in the file exactly
// once, and that retrying them after the restart changes nothing.
func TestKilledWriterLosesNoAcknowledgedSpan(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a file of its own; waits on a child process
	path := filepath.Join(t.TempDir(), "traces.db")
	cmd, out := startChild(t, "writer", path)
	acked := 0
	for out.Scan() {
		if _, err := fmt.Sscanf(out.Text(), "acked %d", &acked); err != nil {
			t.Fatalf("child printed %q", out.Text())
		}
		if acked == 25 {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Shutdown(context.Background())
	check := func() {
		t.Helper()
		for i := 0; i < acked; i++ {
			spans := storetest.GenerateTraces(5, 10, int64(1000+i))
			for k := 0; k < len(spans); k += 10 {
				got, err := s.GetTrace(ctx, spans[k].TraceID)
				if err != nil || len(got) != 10 {
					t.Fatalf("acknowledged batch %d trace %s: %d spans, %v; want 10", i, spans[k].TraceID, len(got), err)
				}
			}
		}
		// Summaries count each span once (a batch being written when the
		// process died is either all there or not at all).
		p, err := s.ListTraces(ctx, store.TraceQuery{Limit: store.MaxPageSize})
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range p.Traces {
			if tr.SpanCount != 10 {
				t.Fatalf("trace %s summary counts %d spans, want 10", tr.TraceID, tr.SpanCount)
			}
		}
		if len(p.Traces) < 5*acked {
			t.Fatalf("%d traces listed, want at least %d", len(p.Traces), 5*acked)
		}
	}
	check()
	for i := 0; i < acked; i++ { // the sender retries what it is unsure of
		if err := s.WriteSpans(ctx, storetest.GenerateTraces(5, 10, int64(1000+i))); err != nil {
			t.Fatal(err)
		}
	}
	check()
}

// lastMigration is the name of the newest embedded migration.
func lastMigration(t *testing.T) string {
	t.Helper()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	return ms[len(ms)-1].Name
}
