package spool

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"testing"
)

// refFrames is an independent reading of a segment: the good records from
// the header on, and where the first bad one starts (len(b) when none).
func refFrames(b []byte) (recs [][]byte, stop int) {
	if len(b) < headerLen || !bytes.Equal(b[:headerLen], segmentHeader()) {
		return nil, 0
	}
	p := headerLen
	for p < len(b) {
		if len(b)-p < frameHeaderLen {
			return recs, p
		}
		n := int(binary.LittleEndian.Uint32(b[p:]))
		if n == 0 || n > len(b)-p-frameHeaderLen {
			return recs, p
		}
		data := b[p+frameHeaderLen : p+frameHeaderLen+n]
		if crc32.Checksum(data, castagnoli) != binary.LittleEndian.Uint32(b[p+4:]) {
			return recs, p
		}
		recs = append(recs, data)
		p += frameHeaderLen + n
	}
	return recs, p
}

func quietOptions(dir string) Options {
	return Options{Dir: dir, SegmentBytes: 1 << 10, MaxBytes: 1 << 20,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// FuzzOpen writes arbitrary bytes as the only segment (after a valid header
// when withHeader) and opens it. Open never panics; it either refuses with
// a *CorruptionError at the offset where the first bad record starts, or
// serves exactly the good records before it (none lost, none invented,
// each with a valid CRC at the position its End names) and goes on
// appending after them.
func FuzzOpen(f *testing.F) {
	valid := segmentHeader()
	for i := range 4 {
		valid = appendFrame(valid, rec(i, 10+i*7))
	}
	f.Add(valid[headerLen:], true)
	f.Add(valid[headerLen:len(valid)-3], true)
	f.Add(append(bytes.Clone(valid[headerLen:]), make([]byte, 30)...), true)
	bad := bytes.Clone(valid)
	bad[headerLen+frameHeaderLen+2] ^= 1
	f.Add(bad[headerLen:], true)
	f.Add(valid, false)
	f.Add([]byte("LW"), false)
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, body []byte, withHeader bool) {
		file := body
		if withHeader {
			file = append(segmentHeader(), body...)
		}
		dir := t.TempDir()
		if err := os.WriteFile(segmentPath(dir, 0), file, 0o644); err != nil {
			t.Fatal(err)
		}
		want, stop := refFrames(file)
		o := quietOptions(dir)
		w, err := Open(context.Background(), o)
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("open: %v, want nil or *CorruptionError", err)
			}
			if ce.Offset != int64(stop) && !(errors.Is(err, errBadHeader) && ce.Offset == 0) {
				t.Fatalf("corruption reported at %d, the first bad record is at %d", ce.Offset, stop)
			}
			return
		}
		defer w.Close()
		got, ends := readAll(t, w, 1<<20)
		equalRecords(t, got, want)
		for i, e := range ends {
			n := len(got[i])
			start := e.Offset - frameLen(n)
			if e.Segment != 0 || start < headerLen || e.Offset > int64(len(file)) {
				t.Fatalf("record %d ends at %v, outside the file", i, e)
			}
			h := file[start : start+frameHeaderLen]
			if int(binary.LittleEndian.Uint32(h)) != n || binary.LittleEndian.Uint32(h[4:]) != crc32.Checksum(got[i], castagnoli) {
				t.Fatalf("record %d at %d: its frame does not match its data", i, start)
			}
		}
		mustAppend(t, w, []byte("next"))
		more, _ := readAll(t, w, 1<<20)
		if len(more) != 1 || string(more[0]) != "next" {
			t.Fatalf("after the repaired tail, read %q", more)
		}
	})
}

// FuzzRoundTrip appends records cut from data at the lengths in sizes
// (over 1 KiB segments, so records cross segments and get their own), and
// reads them back: before and after a reopen, and after a commit in the
// middle, the records read are exactly those appended after the commit.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("hello world, a spool"), []byte{3, 0, 5, 200})
	f.Add(bytes.Repeat([]byte{0xab}, 5000), []byte{255, 255, 255, 255, 10, 1})
	f.Fuzz(func(t *testing.T, data, sizes []byte) {
		var want [][]byte
		for i, s := range sizes {
			n := int(s)*int(s)/16 + 1 // up to ~4 KiB: some larger than a segment
			if i%2 == 1 {
				n = int(s) + 1
			}
			if n > len(data) {
				break
			}
			want = append(want, data[:n])
			data = data[n:]
		}
		o := quietOptions(t.TempDir())
		w, err := Open(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range want {
			mustAppend(t, w, r)
		}
		got, ends := readAll(t, w, 1500)
		equalRecords(t, got, want)
		w.Close()

		w2, err := Open(context.Background(), o)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		got, _ = readAll(t, w2, 1<<20)
		equalRecords(t, got, want)
		half := len(want) / 2
		if half > 0 {
			if err := w2.Commit(ends[half-1]); err != nil {
				t.Fatal(err)
			}
		}
		w2.Close()
		w3, err := Open(context.Background(), o)
		if err != nil {
			t.Fatalf("reopen after commit: %v", err)
		}
		defer w3.Close()
		got, _ = readAll(t, w3, 1<<20)
		equalRecords(t, got, want[half:])
	})
}
