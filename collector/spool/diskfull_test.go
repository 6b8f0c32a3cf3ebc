package spool

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/loomwork/loomwork/internal/testtier"
)

// noSpace reports whether err is what a full disk makes Append return.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, io.ErrShortWrite)
}

// fillSpool appends records of size bytes (numbered from first) until the
// disk refuses one, and returns the acknowledged ones.
func fillSpool(t *testing.T, w *WAL, first, size int) [][]byte {
	t.Helper()
	var acked [][]byte
	for i := first; ; i++ {
		r := rec(i, size)
		err := w.Append(context.Background(), r)
		if err == nil {
			acked = append(acked, r)
			continue
		}
		if !noSpace(err) {
			t.Fatalf("append %d on a filling disk: %v, want ENOSPC or a short write", i, err)
		}
		return acked
	}
}

// fill writes a file of zeros into dir until the disk is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill the disk: %v", err)
			}
			return path
		}
	}
}

// consumed checks that every acknowledged record came back at least once
// (in got, in order among themselves) and that nothing else did.
func consumed(t *testing.T, acked [][]byte, got ...[][]byte) {
	t.Helper()
	seen := map[string]int{}
	for _, g := range got {
		for _, r := range g {
			seen[string(r)]++
		}
	}
	want := map[string]bool{}
	for _, r := range acked {
		want[string(r)] = true
		if seen[string(r)] == 0 {
			t.Fatalf("acknowledged record %q… was never read back", head(r))
		}
	}
	for r := range seen {
		if !want[r] {
			t.Fatalf("read back %q…, which was never acknowledged", head([]byte(r)))
		}
	}
}

// TestFullDiskRecoversOnceConsumed is issue 36's wedge, on a real full
// file system: the spool's one segment filled the disk (its segment size
// is larger than the disk), the consumer stored everything and committed —
// and the spool must take records again. It used not to: the checkpoint's
// temporary file could not be created (ENOSPC), and even with a
// checkpoint the active segment was never freed, so every later append
// failed for ever, across restarts.
func TestFullDiskRecoversOnceConsumed(t *testing.T) {
	o := quietOptions(filepath.Join(testtier.Tmpfs(t, 1<<20), "spool"))
	o.SegmentBytes, o.MaxBytes = 64<<20, 1<<30
	w, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { w.Close() }()
	acked := fillSpool(t, w, 0, 8<<10)
	if len(acked) < 50 {
		t.Fatalf("only %d 8 KiB records fit on a 1 MiB disk", len(acked))
	}
	if st := w.Stats(); !st.DiskFull || st.DiskFreeBytes < 0 {
		t.Errorf("stats on the full disk: %+v, want DiskFull", st)
	}
	got, ends := readAll(t, w, 1<<20)
	consumed(t, acked, got)
	commitErr := w.Commit(ends[len(ends)-1])
	t.Logf("commit of everything on the full disk: %v", commitErr)
	if st := w.Stats(); st.DiskFull || st.Bytes != 0 {
		t.Errorf("stats once everything was consumed: %+v, want the disk no longer full", st)
	}

	// Everything is consumed: the disk must take new records.
	more := rec(len(acked), 8<<10)
	if err := w.Append(context.Background(), more); err != nil {
		t.Fatalf("append after every record was consumed: %v (the spool stays wedged on its full disk)", err)
	}
	acked = append(acked, more)
	again := fillSpool(t, w, len(acked), 8<<10)
	if len(again) < 50 {
		t.Fatalf("after the recovery only %d records fit again", len(again))
	}
	acked = append(acked, again...)

	// A restart on the full disk replays only what was not committed.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err = Open(context.Background(), o)
	if err != nil {
		t.Fatalf("reopen on a full disk: %v", err)
	}
	after, _ := readAll(t, w, 1<<20)
	consumed(t, acked, got, after)
	if len(after) != len(acked)-len(got) {
		t.Errorf("after the restart %d records were replayed, want the %d not committed", len(after), len(acked)-len(got))
	}
}

// TestFullDiskOfSegmentsRecovers: the same with many small segments, the
// disk filling as a new segment is created or written.
func TestFullDiskOfSegmentsRecovers(t *testing.T) {
	o := quietOptions(filepath.Join(testtier.Tmpfs(t, 1<<20), "spool"))
	o.SegmentBytes, o.MaxBytes = 64<<10, 1<<30
	w := mustOpen(t, o)
	acked := fillSpool(t, w, 0, 3000)
	got, ends := readAll(t, w, 1<<20)
	consumed(t, acked, got)
	t.Logf("commit on the full disk: %v", w.Commit(ends[len(ends)-1]))
	again := fillSpool(t, w, len(acked), 3000)
	if len(again) < len(acked)/2 {
		t.Fatalf("after consuming all %d records only %d fit again", len(acked), len(again))
	}
}

// TestDiskFilledByAnotherFileRecoversWhenSpaceReturns: another file
// fills the disk while the spool holds records; the consumer commits half
// of them (the checkpoint cannot be written, and no segment can be freed).
// Nothing acknowledged is lost, and once the other file is gone the spool
// takes records again and its checkpoint is written.
func TestDiskFilledByAnotherFileRecoversWhenSpaceReturns(t *testing.T) {
	disk := testtier.Tmpfs(t, 1<<20)
	o := quietOptions(filepath.Join(disk, "spool"))
	o.SegmentBytes, o.MaxBytes = 64<<20, 1<<30
	w, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { w.Close() }()
	var acked [][]byte
	for i := range 20 {
		r := rec(i, 8<<10)
		mustAppend(t, w, r)
		acked = append(acked, r)
	}
	filler := fill(t, disk)
	if err := w.Append(context.Background(), rec(20, 8<<10)); !noSpace(err) {
		t.Fatalf("append on a disk another file filled: %v, want ENOSPC", err)
	}
	got, ends := readAll(t, w, 1<<20)
	consumed(t, acked, got)
	if err := w.Commit(ends[9]); !errors.Is(err, ErrCheckpointDeferred) {
		t.Errorf("commit of half on the full disk: %v, want ErrCheckpointDeferred", err)
	}
	if st := w.Stats(); !st.DiskFull {
		t.Errorf("stats with the disk still full: %+v, want DiskFull", st)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.DiskFull {
		t.Errorf("stats once the other file is gone: %+v, want the disk no longer full", st)
	}
	r := rec(21, 8<<10)
	if err := w.Append(context.Background(), r); err != nil {
		t.Fatalf("append once the disk has room again: %v", err)
	}
	acked = append(acked, r)
	more, ends2 := readAll(t, w, 1<<20)
	if err := w.Commit(ends2[len(ends2)-1]); err != nil {
		t.Fatalf("commit once the disk has room again: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err = Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := readAll(t, w, 1<<20)
	consumed(t, acked, got, more)
	if len(after) != 0 {
		t.Errorf("after the checkpoint was written, a restart replayed %d records", len(after))
	}
}

// TestOpenOnAFullDisk: a spool whose last segment reached its size is
// reopened on a full disk. Open used to start a new segment at once, and
// failed with ENOSPC: a restart could not even start.
func TestOpenOnAFullDisk(t *testing.T) {
	disk := testtier.Tmpfs(t, 1<<20)
	o := quietOptions(filepath.Join(disk, "spool"))
	o.SegmentBytes = 16 << 10
	w := mustOpen(t, o)
	var acked [][]byte
	for i := range 3 {
		r := rec(i, 20<<10) // larger than a segment: each fills its own
		mustAppend(t, w, r)
		acked = append(acked, r)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fill(t, disk)
	w2, err := Open(context.Background(), o)
	if err != nil {
		t.Fatalf("reopen on a full disk: %v", err)
	}
	defer w2.Close()
	got, _ := readAll(t, w2, 1<<20)
	consumed(t, acked, got)
}

// TestConsumedSegmentIsFreedWhenTheDiskFills: the spool had consumed
// everything when another file filled the disk. The consumer has nothing
// left to commit, so the next append itself frees the consumed segment
// and goes through.
func TestConsumedSegmentIsFreedWhenTheDiskFills(t *testing.T) {
	disk := testtier.Tmpfs(t, 1<<20)
	o := quietOptions(filepath.Join(disk, "spool"))
	o.SegmentBytes, o.MaxBytes = 64<<20, 1<<30
	w := mustOpen(t, o)
	for i := range 40 {
		mustAppend(t, w, rec(i, 8<<10))
	}
	got, ends := readAll(t, w, 1<<20)
	if err := w.Commit(ends[len(ends)-1]); err != nil {
		t.Fatal(err)
	}
	fill(t, disk)
	// The first append meets the full disk; the spool frees its consumed
	// segment and retries.
	r := rec(40, 8<<10)
	if err := w.Append(context.Background(), r); err != nil {
		t.Fatalf("append on a full disk whose spool segment is all consumed: %v", err)
	}
	more, _ := readAll(t, w, 1<<20)
	consumed(t, [][]byte{r}, more)
	if len(got) != 40 {
		t.Fatalf("read %d of 40", len(got))
	}
}

// TestFullDiskAfterARotationRecovers: the disk fills just as a segment is
// sealed — the new segment is created (a page) but the record does not fit
// in it — so the spool's whole content is in the sealed segment. Once that
// is consumed and removed its space must come back. (The reliability
// suite's disk-full row found it did not: the sealed segment's file stayed
// open, unlinked, until a sync that no failing append ever started.)
func TestFullDiskAfterARotationRecovers(t *testing.T) {
	o := quietOptions(filepath.Join(testtier.Tmpfs(t, 1<<20), "spool"))
	o.SegmentBytes, o.MaxBytes = 1<<20-64<<10, 1<<30
	w := mustOpen(t, o)
	acked := fillSpool(t, w, 0, 300<<10)
	if st := w.Stats(); st.Segments != 2 || len(acked) != 3 {
		t.Fatalf("after filling: %d records in %d segments; want 3 records and a second, empty segment", len(acked), st.Segments)
	}
	got, ends := readAll(t, w, 16<<20)
	consumed(t, acked, got)
	t.Logf("commit of everything on the full disk: %v", w.Commit(ends[len(ends)-1]))
	again := fillSpool(t, w, len(acked), 300<<10)
	if len(again) < 2 {
		t.Fatalf("after consuming the sealed segment only %d records fit again", len(again))
	}
}
