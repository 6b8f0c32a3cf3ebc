package clickhouse

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

// A page token records where the previous page ended: the sort value and
// trace id of its last trace, with the sort and a hash of the filters it
// was issued for, so it cannot be applied to a different query by mistake.
// Layout before base64url (no padding):
//
//	[0]      format version (1)
//	[1]      sort key (index in sortKeys)
//	[2]      1 if ascending
//	[3:11]   last sort value, int64 big-endian
//	[11:27]  last trace id, 16 bytes
//	[27:35]  filter hash, uint64 big-endian
type pageToken struct {
	sortKey   byte
	ascending bool
	lastValue int64
	lastTrace string // 32 hex digits
	filters   uint64
}

const (
	pageTokenVersion = 1
	pageTokenLen     = 35
)

var errBadPageToken = errors.New("malformed page token (pass next_page_token back unchanged, with the same filters and sort)")

func (p pageToken) encode() string {
	b := make([]byte, 0, pageTokenLen)
	asc := byte(0)
	if p.ascending {
		asc = 1
	}
	b = append(b, pageTokenVersion, p.sortKey, asc)
	b = binary.BigEndian.AppendUint64(b, uint64(p.lastValue))
	id, err := hex.DecodeString(p.lastTrace)
	if err != nil || len(id) != 16 {
		id = make([]byte, 16) // stored ids are validated on write; never reached
	}
	b = append(b, id...)
	b = binary.BigEndian.AppendUint64(b, p.filters)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePageToken(s string) (pageToken, error) {
	var p pageToken
	if len(s) > 2*pageTokenLen {
		return p, fmt.Errorf("%w: too long", errBadPageToken)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
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
	p.sortKey, p.ascending = b[1], b[2] == 1
	p.lastValue = int64(binary.BigEndian.Uint64(b[3:11]))
	p.lastTrace = hex.EncodeToString(b[11:27])
	p.filters = binary.BigEndian.Uint64(b[27:35])
	return p, nil
}

// filterHash identifies the filters of q (not its sort, limit or token).
func filterHash(q *store.TraceQuery) uint64 {
	h := fnv.New64a()
	field := func(s string) {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	tm := func(t time.Time) {
		if t.IsZero() {
			field("")
		} else {
			field(strconv.FormatInt(t.UnixNano(), 10))
		}
	}
	tm(q.Start)
	tm(q.End)
	field(q.Service)
	field(q.Agent)
	field(q.Model)
	field(q.Status)
	field(strconv.FormatInt(int64(q.MinDuration), 10))
	field(q.Text)
	return h.Sum64()
}
