package sqlite

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/loomwork/loomwork/store"
)

// A page token is the keyset position after the last trace of a page: the
// sort key's value and the trace id there, plus the sort order and a hash
// of the filters it was issued for, so a token cannot silently be applied
// to a different query. Encoding (then base64url, no padding):
//
//	byte    version (1)
//	byte    sort key index (position in sortKeys)
//	byte    1 when ascending
//	int64   last sort value (big-endian)
//	[16]    last trace id
//	uint64  filter hash (big-endian)
type pageToken struct {
	sortKey   byte
	ascending bool
	lastValue int64
	lastTrace [16]byte
	filters   uint64
}

const (
	pageTokenVersion = 1
	pageTokenLen     = 3 + 8 + 16 + 8
)

var errBadPageToken = errors.New("malformed page token (pass back next_page_token unchanged, with the same filters and sort)")

func (p pageToken) encode() string {
	b := make([]byte, 0, pageTokenLen)
	b = append(b, pageTokenVersion, p.sortKey, 0)
	if p.ascending {
		b[2] = 1
	}
	b = binary.BigEndian.AppendUint64(b, uint64(p.lastValue))
	b = append(b, p.lastTrace[:]...)
	b = binary.BigEndian.AppendUint64(b, p.filters)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePageToken(s string) (pageToken, error) {
	var p pageToken
	if len(s) > 2*pageTokenLen {
		return p, fmt.Errorf("%w: too long", errBadPageToken)
	}
	// Strict: reject non-zero trailing bits, so one token has one spelling.
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return p, fmt.Errorf("%w: %v", errBadPageToken, err)
	}
	if len(b) != pageTokenLen {
		return p, fmt.Errorf("%w: %d bytes, want %d", errBadPageToken, len(b), pageTokenLen)
	}
	if b[0] != pageTokenVersion {
		return p, fmt.Errorf("%w: unknown version %d", errBadPageToken, b[0])
	}
	if int(b[1]) >= len(sortKeys) {
		return p, fmt.Errorf("%w: unknown sort key %d", errBadPageToken, b[1])
	}
	if b[2] > 1 {
		return p, fmt.Errorf("%w: bad order flag %d", errBadPageToken, b[2])
	}
	p.sortKey = b[1]
	p.ascending = b[2] == 1
	p.lastValue = int64(binary.BigEndian.Uint64(b[3:11]))
	copy(p.lastTrace[:], b[11:27])
	p.filters = binary.BigEndian.Uint64(b[27:35])
	// The decoder skips newlines; accept only the one spelling encode writes.
	if p.encode() != s {
		return pageToken{}, fmt.Errorf("%w: not in canonical form", errBadPageToken)
	}
	return p, nil
}

// sortKeys maps store.Sort* names to the traces column ordering by them.
// The index in this slice is what tokens record: append only.
var sortKeys = []struct {
	name   string
	column string
}{
	{store.SortStart, "start_ns"},
	{store.SortDuration, "duration_ns"},
	{store.SortSpans, "span_count"},
	{store.SortErrors, "error_count"},
	{store.SortTokens, "tokens_total"},
}

// filterHash identifies the filters of q (not the sort, limit or token).
func filterHash(q *store.TraceQuery) uint64 {
	h := fnv.New64a()
	field := func(s string) {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	timeField := func(t time.Time) {
		if t.IsZero() {
			field("")
			return
		}
		field(strconv.FormatInt(t.UnixNano(), 10))
	}
	timeField(q.Start)
	timeField(q.End)
	field(q.Service)
	field(q.Agent)
	field(q.Model)
	field(q.Status)
	field(strconv.FormatInt(int64(q.MinDuration), 10))
	field(q.Text)
	return h.Sum64()
}

func traceIDHex(b [16]byte) string { return hex.EncodeToString(b[:]) }
