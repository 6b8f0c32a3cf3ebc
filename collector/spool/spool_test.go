package spool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir) // never returns
	}
	goleak.VerifyTestMain(m)
}

// logBuf collects what the WAL logs, for asserting what a repair reported.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func testOptions(dir string) Options {
	return Options{Dir: dir, SegmentBytes: 4 << 10, MaxBytes: 1 << 20,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))}
}

func mustOpen(t *testing.T, o Options) *WAL {
	t.Helper()
	w, err := Open(context.Background(), o)
	if err != nil {
		t.Fatalf("open %s: %v", o.Dir, err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func mustAppend(t *testing.T, w *WAL, rec []byte) {
	t.Helper()
	if err := w.Append(context.Background(), rec); err != nil {
		t.Fatalf("append %d bytes: %v", len(rec), err)
	}
}

// record i's content: a recognisable prefix and a size that varies.
func rec(i, size int) []byte {
	b := []byte(fmt.Sprintf("record-%06d|", i))
	for len(b) < size {
		b = append(b, byte('a'+i%26))
	}
	return b
}

// readAll reads until nothing more is available, copying the data, and
// returns the records and the End of the last one.
func readAll(t *testing.T, w *WAL, maxBytes int) ([][]byte, []Position) {
	t.Helper()
	var out [][]byte
	var ends []Position
	for {
		recs, err := w.TryRead(maxBytes)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if len(recs) == 0 {
			return out, ends
		}
		for _, r := range recs {
			out = append(out, bytes.Clone(r.Data))
			ends = append(ends, r.End)
		}
	}
}

func equalRecords(t *testing.T, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d: got %q…, want %q…", i, head(got[i]), head(want[i]))
		}
	}
}

func head(b []byte) []byte { return b[:min(len(b), 20)] }

func TestRoundTrip(t *testing.T) {
	w := mustOpen(t, testOptions(t.TempDir()))
	var want [][]byte
	for i := range 60 {
		size := 1 + (i*373)%1500
		if i%20 == 7 {
			size = 10 << 10 // larger than a segment: a segment of its own
		}
		r := rec(i, size)
		mustAppend(t, w, r)
		want = append(want, r)
	}
	got, _ := readAll(t, w, 3000)
	equalRecords(t, got, want)
	st := w.Stats()
	if st.Appended != 60 || st.Pending != 60 || st.Segments < 10 {
		t.Errorf("stats after 60 appends over 4 KiB segments: %+v", st)
	}
}

func TestReadHonoursMaxBytes(t *testing.T) {
	w := mustOpen(t, testOptions(t.TempDir()))
	for i := range 10 {
		mustAppend(t, w, rec(i, 100))
	}
	mustAppend(t, w, rec(10, 2000))
	recs, err := w.TryRead(350)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("maxBytes 350 over 100-byte records returned %d records, want 3", len(recs))
	}
	recs, _ = w.TryRead(1)
	if len(recs) != 1 || !bytes.HasPrefix(recs[0].Data, []byte("record-000003")) {
		t.Fatalf("maxBytes 1 must still return the next record, got %d", len(recs))
	}
	var got int
	for {
		recs, _ := w.TryRead(150)
		if len(recs) == 0 {
			break
		}
		got += len(recs)
	}
	if got != 7 { // 6 small ones one by one, then the 2000-byte one alone
		t.Fatalf("read %d more records, want 7", got)
	}
}

func TestConcurrentAppendersEachRecordOnceInOrder(t *testing.T) {
	o := testOptions(t.TempDir())
	o.SegmentBytes = 64 << 10
	w := mustOpen(t, o)
	const appenders, each = 8, 150
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type seen struct{ a, i int }
	var got []seen
	readerDone := make(chan error, 1)
	go func() {
		n := 0
		for n < appenders*each {
			recs, err := w.Read(ctx, 32<<10)
			if err != nil {
				readerDone <- err
				return
			}
			for _, r := range recs {
				var s seen
				if _, err := fmt.Sscanf(string(r.Data), "%d %d|", &s.a, &s.i); err != nil {
					readerDone <- fmt.Errorf("record %q: %w", head(r.Data), err)
					return
				}
				got = append(got, s)
				n++
			}
			if err := w.Commit(recs[len(recs)-1].End); err != nil {
				readerDone <- err
				return
			}
		}
		readerDone <- nil
	}()

	var wg sync.WaitGroup
	for a := range appenders {
		wg.Go(func() {
			for i := range each {
				b := fmt.Appendf(nil, "%d %d|", a, i)
				b = append(b, bytes.Repeat([]byte{'x'}, (a*31+i*17)%3000)...)
				if err := w.Append(ctx, b); err != nil {
					t.Errorf("appender %d record %d: %v", a, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := <-readerDone; err != nil {
		t.Fatal(err)
	}
	next := make([]int, appenders)
	for _, s := range got {
		if s.i != next[s.a] {
			t.Fatalf("appender %d: read record %d, want %d (lost, repeated or out of order)", s.a, s.i, next[s.a])
		}
		next[s.a]++
	}
	st := w.Stats()
	if st.Committed != appenders*each || st.Pending != 0 {
		t.Errorf("after committing everything: %+v", st)
	}
	// Group commit: appenders waiting together share an fdatasync.
	if st.SyncCount >= st.Appended {
		t.Errorf("%d fdatasyncs for %d records from %d concurrent appenders: no group commit", st.SyncCount, st.Appended, appenders)
	}
	if st.Segments > 2 {
		t.Errorf("%d segments left after everything was committed", st.Segments)
	}
}

// restart: after Close, and after a WAL that was abandoned without Close
// (as a crashed process leaves it), reopening replays exactly the records
// after the last Commit.
func TestRestartReplaysAfterCommit(t *testing.T) {
	for _, closeFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("close=%v", closeFirst), func(t *testing.T) {
			o := testOptions(t.TempDir())
			w, err := Open(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			var all [][]byte
			for i := range 50 {
				all = append(all, rec(i, 300+i*10))
				mustAppend(t, w, all[i])
			}
			recs, err := w.TryRead(20 * 600)
			if err != nil || len(recs) < 21 {
				t.Fatalf("read %d records: %v", len(recs), err)
			}
			if err := w.Commit(recs[19].End); err != nil {
				t.Fatal(err)
			}
			if closeFirst {
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				t.Cleanup(func() { w.Close() }) // only to stop its goroutine at the end
			}
			w2 := mustOpen(t, o)
			if st := w2.Stats(); st.Pending != 30 {
				t.Errorf("pending after reopen = %d, want 30", st.Pending)
			}
			got, _ := readAll(t, w2, 1<<20)
			equalRecords(t, got, all[20:])
		})
	}
}

func TestCommitRemovesSegmentsAndFreesBytes(t *testing.T) {
	o := testOptions(t.TempDir())
	w := mustOpen(t, o)
	for i := range 20 {
		mustAppend(t, w, rec(i, 1000))
	}
	before := w.Stats()
	files, _ := listSegments(o.Dir)
	if before.Segments < 5 || len(files) != before.Segments {
		t.Fatalf("20 KB over 4 KiB segments: stats %+v, files %v", before, files)
	}
	got, ends := readAll(t, w, 1<<20)
	if len(got) != 20 {
		t.Fatalf("read %d", len(got))
	}
	if err := w.Commit(ends[9]); err != nil {
		t.Fatal(err)
	}
	mid := w.Stats()
	if mid.Segments >= before.Segments || mid.Bytes >= before.Bytes || mid.Committed != 10 || mid.Pending != 10 {
		t.Fatalf("after committing half: %+v (before %+v)", mid, before)
	}
	if err := w.Commit(ends[19]); err != nil {
		t.Fatal(err)
	}
	after := w.Stats()
	files, _ = listSegments(o.Dir)
	if after.Segments != 1 || len(files) != 1 || after.Bytes != 0 || after.Pending != 0 {
		t.Fatalf("after committing all: %+v, files %v", after, files)
	}
	if err := w.Commit(ends[5]); err != nil {
		t.Errorf("committing an old position again must be a no-op: %v", err)
	}
	if err := w.Commit(Position{Segment: ends[19].Segment, Offset: ends[19].Offset + 100}); err == nil {
		t.Error("committing past the durable end was accepted")
	}
}

func TestErrFullUntilCommit(t *testing.T) {
	o := testOptions(t.TempDir())
	o.MaxBytes = 16 << 10
	w := mustOpen(t, o)
	n := 0
	var err error
	for ; n < 100; n++ {
		if err = w.Append(context.Background(), rec(n, 1000)); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrFull) {
		t.Fatalf("append %d into a 16 KiB spool: %v, want ErrFull", n, err)
	}
	if st := w.Stats(); st.Bytes > o.MaxBytes || st.Bytes < o.MaxBytes-2*1008 {
		t.Fatalf("full at %d bytes, max %d", st.Bytes, o.MaxBytes)
	}
	got, ends := readAll(t, w, 1<<20)
	if len(got) != n {
		t.Fatalf("read %d of %d acknowledged records from a full spool", len(got), n)
	}
	if err := w.Commit(ends[len(ends)-1]); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, w, rec(n, 1000))
	if err := w.Append(context.Background(), make([]byte, 20<<10)); !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrFull) {
		t.Errorf("a record larger than max_bytes: %v, want ErrTooLarge (permanent), not ErrFull", err)
	}
	if err := w.Append(context.Background(), nil); err == nil {
		t.Error("an empty record was accepted")
	}
}

// lastSegment returns the path and bytes of the highest segment in dir.
func lastSegment(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	idx, err := listSegments(dir)
	if err != nil || len(idx) == 0 {
		t.Fatalf("segments in %s: %v %v", dir, idx, err)
	}
	p := segmentPath(dir, idx[len(idx)-1])
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, b
}

// TestTornTailLosesOnlyTheTornRecord damages the end of the last segment as
// a crash mid-write can, after five acknowledged records; the sixth is the
// one being written. Reopening keeps the five and logs the cut.
func TestTornTailLosesOnlyTheTornRecord(t *testing.T) {
	const n, size = 6, 500
	lastFrame := func(b []byte) int { return len(b) - int(frameLen(size)) }
	cases := []struct {
		name string
		corr func(b []byte) []byte
	}{
		{"truncated mid-record", func(b []byte) []byte { return b[:lastFrame(b)+frameHeaderLen+size/2] }},
		{"truncated mid-length", func(b []byte) []byte { return b[:lastFrame(b)+2] }},
		{"zeroed tail", func(b []byte) []byte {
			clear(b[len(b)-100:])
			return b
		}},
		{"zeroed whole record", func(b []byte) []byte {
			clear(b[lastFrame(b):])
			return b
		}},
		{"zeros past the end", func(b []byte) []byte { return append(b, make([]byte, 4096)...) }},
		{"flipped CRC byte", func(b []byte) []byte {
			b[lastFrame(b)+5] ^= 0x40
			return b
		}},
		{"flipped data byte", func(b []byte) []byte {
			b[len(b)-1] ^= 1
			return b
		}},
		{"length past EOF", func(b []byte) []byte {
			b[lastFrame(b)+3] = 0x7f
			return b
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t.TempDir())
			o.SegmentBytes = 64 << 10
			var logs logBuf
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			w, err := Open(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			var want [][]byte
			for i := range n {
				want = append(want, rec(i, size))
				mustAppend(t, w, want[i])
			}
			w.Close()
			path, b := lastSegment(t, o.Dir)
			if err := os.WriteFile(path, tc.corr(b), 0o644); err != nil {
				t.Fatal(err)
			}
			w2, err := Open(context.Background(), o)
			if err != nil {
				t.Fatalf("open after a torn tail: %v", err)
			}
			got, _ := readAll(t, w2, 1<<20)
			lost := n - len(got)
			if tc.name == "zeros past the end" {
				lost++ // nothing torn: all six are there
			}
			if lost != 1 {
				t.Fatalf("%d records lost, want only the torn one", lost)
			}
			equalRecords(t, got, want[:len(got)])
			if !strings.Contains(logs.String(), "torn write") {
				t.Errorf("the cut was not logged: %q", logs.String())
			}
			// The repaired log takes new records and survives a reopen.
			mustAppend(t, w2, []byte("after repair"))
			w2.Close()
			w3 := mustOpen(t, o)
			got2, _ := readAll(t, w3, 1<<20)
			if len(got2) != len(got)+1 || string(got2[len(got2)-1]) != "after repair" {
				t.Fatalf("after repair and reopen: %d records, want %d", len(got2), len(got)+1)
			}
		})
	}
}

func TestTornSegmentHeader(t *testing.T) {
	o := testOptions(t.TempDir())
	w := mustOpen(t, o)
	mustAppend(t, w, rec(0, 100))
	w.Close()
	// A crash right after creating the next segment, before its header.
	if err := os.WriteFile(segmentPath(o.Dir, 1), []byte("LW"), 0o644); err != nil {
		t.Fatal(err)
	}
	w2 := mustOpen(t, o)
	got, _ := readAll(t, w2, 1<<20)
	if len(got) != 1 {
		t.Fatalf("read %d records, want 1", len(got))
	}
	mustAppend(t, w2, rec(1, 100))
	got, _ = readAll(t, w2, 1<<20)
	if len(got) != 1 {
		t.Fatalf("after rewriting the header: read %d records, want 1", len(got))
	}
}

// recordOffsets returns where each record of a segment file starts.
func recordOffsets(b []byte) []int64 {
	var offs []int64
	for p := int64(headerLen); p+frameHeaderLen <= int64(len(b)); {
		offs = append(offs, p)
		p += frameHeaderLen + int64(uint32(b[p])|uint32(b[p+1])<<8|uint32(b[p+2])<<16|uint32(b[p+3])<<24)
	}
	return offs
}

func TestMidLogCorruptionAndRepair(t *testing.T) {
	for _, where := range []string{"sealed segment", "last segment"} {
		t.Run(where, func(t *testing.T) {
			o := testOptions(t.TempDir())
			w, err := Open(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			var want [][]byte
			for i := range 20 {
				want = append(want, rec(i, 900)) // four records a segment
				mustAppend(t, w, want[i])
			}
			w.Close()
			idx, _ := listSegments(o.Dir)
			seg := idx[1]
			if where == "last segment" {
				seg = idx[len(idx)-1]
			}
			path := segmentPath(o.Dir, seg)
			b, _ := os.ReadFile(path)
			offs := recordOffsets(b)
			if len(offs) < 3 {
				t.Fatalf("segment %d has %d records", seg, len(offs))
			}
			bad := offs[1]
			b[bad+frameHeaderLen+10] ^= 0xff
			os.WriteFile(path, b, 0o644)

			_, err = Open(context.Background(), o)
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("open a log with a bad record mid-way: %v, want *CorruptionError", err)
			}
			if ce.Segment != seg || ce.Offset != bad || !errors.Is(err, errBadChecksum) {
				t.Fatalf("corruption reported at %d:%d (%v), want %d:%d", ce.Segment, ce.Offset, ce.Err, seg, bad)
			}
			if !strings.Contains(err.Error(), segmentName(seg)) || !strings.Contains(err.Error(), fmt.Sprint(bad)) {
				t.Errorf("the error does not name the file and offset: %v", err)
			}

			lost, err := Repair(o.Dir, o.Logger)
			if err != nil || lost <= 0 {
				t.Fatalf("repair: lost %d, %v", lost, err)
			}
			w2 := mustOpen(t, o)
			got, _ := readAll(t, w2, 1<<20)
			// Every record before the bad one survives; none after it.
			before := 0
			for _, i := range idx {
				if i < seg {
					f, _ := os.ReadFile(segmentPath(o.Dir, i))
					before += len(recordOffsets(f))
				}
			}
			equalRecords(t, got, want[:before+1])
			if again, err := Repair(o.Dir, o.Logger); again != 0 || err != nil {
				t.Errorf("a second repair: lost %d, %v", again, err)
			}
		})
	}
}

func TestReadBlocksUntilDataAndHonoursContext(t *testing.T) {
	w := mustOpen(t, testOptions(t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if recs, err := w.Read(ctx, 100); !errors.Is(err, context.DeadlineExceeded) || len(recs) != 0 {
		t.Fatalf("read from an empty spool: %d records, %v; want a deadline error", len(recs), err)
	}
	got := make(chan string, 1)
	go func() {
		recs, err := w.Read(context.Background(), 100)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(recs[0].Data)
	}()
	select {
	case s := <-got:
		t.Fatalf("read returned %q before anything was appended", s)
	case <-time.After(20 * time.Millisecond):
	}
	mustAppend(t, w, []byte("hello"))
	if s := <-got; s != "hello" {
		t.Fatalf("blocked read returned %q", s)
	}

	blocked := make(chan error, 1)
	go func() {
		_, err := w.Read(context.Background(), 100)
		blocked <- err
	}()
	time.Sleep(10 * time.Millisecond)
	w.Close()
	if err := <-blocked; !errors.Is(err, ErrClosed) {
		t.Errorf("read blocked across Close: %v, want ErrClosed", err)
	}
	if err := w.Append(context.Background(), []byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("append after Close: %v", err)
	}
	if err := w.Commit(Position{}); !errors.Is(err, ErrClosed) {
		t.Errorf("commit after Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{Dir: "x"}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	err := Options{SegmentBytes: 10, MaxBytes: 5}.Validate()
	for _, want := range []string{"dir must be specified", "segment_bytes must be at least", "max_bytes must be at least"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
	if _, err := Open(context.Background(), Options{}); err == nil {
		t.Error("Open without a dir succeeded")
	}
}

func TestCheckpointIsRobust(t *testing.T) {
	o := testOptions(t.TempDir())
	w := mustOpen(t, o)
	for i := range 10 {
		mustAppend(t, w, rec(i, 1000))
	}
	_, ends := readAll(t, w, 1<<20)
	if err := w.Commit(ends[4]); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// A stale temporary file from a crash mid-commit is ignored.
	os.WriteFile(filepath.Join(o.Dir, "checkpoint.tmp"), []byte("junk"), 0o644)
	w2 := mustOpen(t, o)
	got, _ := readAll(t, w2, 1<<20)
	if len(got) != 5 || !bytes.HasPrefix(got[0], []byte("record-000005")) {
		t.Fatalf("after reopen read %d records starting %q", len(got), head(got[0]))
	}
	w2.Close()
	b, _ := os.ReadFile(filepath.Join(o.Dir, checkpointName))
	b[10] ^= 1
	os.WriteFile(filepath.Join(o.Dir, checkpointName), b, 0o644)
	if _, err := Open(context.Background(), o); err == nil || !strings.Contains(err.Error(), "checkpoint") {
		t.Errorf("a damaged checkpoint: %v", err)
	}
}

func TestPreallocate(t *testing.T) {
	o := testOptions(t.TempDir())
	o.Preallocate = true
	w := mustOpen(t, o)
	var want [][]byte
	for i := range 12 {
		want = append(want, rec(i, 1000))
		mustAppend(t, w, want[i])
	}
	w.Close()
	_, b := lastSegment(t, o.Dir)
	if len(recordOffsets(b)) == 0 {
		t.Fatal("the last segment holds no record")
	}
	w2 := mustOpen(t, o)
	got, _ := readAll(t, w2, 1<<20)
	equalRecords(t, got, want)
}
