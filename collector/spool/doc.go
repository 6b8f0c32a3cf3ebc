// Package spool owns Loomwork's ingest spool: a segmented, checksummed
// write-ahead log on local disk, in the style of the Prometheus TSDB WAL
// (tsdb/wlog/wlog.go). `loom-eval serve` acknowledges an OTLP request once
// its encoded spans are appended here (Append returns only after the record
// is fsynced), and a feeder reads the records back in order, writes them to
// the store and commits its position. After a crash, the records after the
// last committed position are read again; the store is idempotent, so a
// record read twice is harmless.
//
// # On-disk format
//
// A spool directory holds segment files named by their index as 20 decimal
// digits (00000000000000000001), so that names sort in log order, and a
// checkpoint file.
//
// A segment starts with an 8-byte header: the magic "LWSP", the format
// version (1) and three zero bytes. Records follow back to back, each
//
//	length  uint32, little endian, > 0   (of data)
//	crc     uint32, little endian        CRC-32C (Castagnoli) of data
//	data    length bytes
//
// A record never spans segments: when a record does not fit in the active
// segment a new one is started, and a record larger than a segment gets a
// segment of its own. Before a new segment is created the previous one is
// fsynced, so only the last segment can ever hold a torn write.
//
// The checkpoint file ("checkpoint") holds the committed position: the
// magic "LWCK", version 1, three zero bytes, the segment index (uint64),
// the offset (int64) and a CRC-32C of the preceding 24 bytes. It is
// replaced atomically: written to checkpoint.tmp, fsynced, renamed, and the
// directory fsynced (as Prometheus writes its checkpoints).
//
// # A full disk
//
// A full disk must never wedge the spool (issue 36: the feeder stored the
// data but could not write its 28-byte checkpoint, so no segment was ever
// freed, and a restart did not help). So: a Commit whose checkpoint cannot
// be written still consumes — the segments before the position are
// removed, and the checkpoint is written by a later Commit or by Close (a
// restart before then replays from the previous checkpoint, which the
// store absorbs); a wholly consumed active segment, after an append failed
// for lack of space, is emptied by renaming it to the next index and
// truncating it, which frees its blocks without needing any; an append
// that fails for lack of space does that itself before it gives up; and
// Open never needs new space for a spool that has a segment. Stats says
// whether the disk is full (DiskFull, from statfs), so readiness can.
//
// # Torn writes and corruption
//
// Open scans every segment from the checkpoint on. In the last segment, a
// bad record that reaches the end of the file (a length past EOF, a bad CRC
// on the final record, a zero length followed only by zeros, a short or
// zeroed header) is a torn write: the file is truncated before it and the
// cut is logged. Any other bad record — in a sealed segment, or in the last
// segment with intact records after it — is corruption: Open returns a
// *CorruptionError naming the segment file and offset, and Repair truncates
// the log there (losing everything after it) so that Open succeeds.
package spool
