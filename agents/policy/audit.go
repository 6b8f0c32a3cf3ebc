package policy

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/internal/filelock"
)

// AuditEntry is one line of the audit log. Hash is SHA-256 over the
// canonical JSON array ["loomwork.audit/1", seq, time, actor, action,
// data, prev]; Prev is the previous entry's hash ("" for seq 1), so an
// edited, dropped or reordered entry breaks the chain where it happened.
// A log kept with an AuditKey also signs each entry: Key is the key's
// fingerprint and MAC its HMAC over Hash, which a writer without the key
// cannot recompute after rewriting the chain.
type AuditEntry struct {
	Seq    int64           `json:"seq"`
	Time   time.Time       `json:"time"`
	Actor  string          `json:"actor"`
	Action string          `json:"action"`
	Data   json.RawMessage `json:"data"`
	Prev   string          `json:"prev"`
	Hash   string          `json:"hash"`
	Key    string          `json:"key,omitempty"`
	MAC    string          `json:"mac,omitempty"`
}

func entryHash(e AuditEntry) (string, error) {
	data := e.Data
	if len(bytes.TrimSpace(data)) == 0 {
		data = json.RawMessage("null")
	}
	cd, err := journal.Canonical(data)
	if err != nil {
		return "", fmt.Errorf("entry %d data: %w", e.Seq, err)
	}
	rest, err := json.Marshal([]any{e.Seq, e.Time.UTC().Format(time.RFC3339Nano), e.Actor, e.Action})
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	buf.WriteString(`["loomwork.audit/1",`) // the domain tag, as the journal's hash has its own
	buf.Write(rest[1 : len(rest)-1])
	buf.WriteByte(',')
	buf.Write(cd)
	buf.WriteByte(',')
	p, _ := json.Marshal(e.Prev)
	buf.Write(p)
	buf.WriteByte(']')
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:]), nil
}

// AuditLog is the append-only, hash-chained log of decisions and
// approvals. With a path it appends JSON lines to that file (O_APPEND,
// fsync per entry); without one it is in memory.
type AuditLog struct {
	mu      sync.Mutex
	path    string
	clock   func() time.Time
	entries []AuditEntry
	// size is the file's length after this log last read or wrote it: a
	// different length at the next append means another process appended,
	// and the chain is read again before extending it.
	size int64
	// key, when set, signs each entry appended and is required of every
	// entry read.
	key *AuditKey
}

// AuditOption adjusts OpenAudit.
type AuditOption func(*AuditLog)

// SignedWith keeps the log with key: every entry it appends is signed, and
// every entry it reads (at open, and before extending a chain another
// process extended) must carry a valid signature of this key.
func SignedWith(key *AuditKey) AuditOption { return func(l *AuditLog) { l.key = key } }

// OpenAudit opens (or creates) the audit log at file, verifying the chain
// it finds (and, signed, every entry's signature): a log that does not
// verify is not appended to. file "" is an in-memory log. clock nil is
// time.Now.
func OpenAudit(file string, clock func() time.Time, opts ...AuditOption) (*AuditLog, error) {
	if clock == nil {
		clock = time.Now
	}
	l := &AuditLog{path: file, clock: clock}
	for _, o := range opts {
		o(l)
	}
	if file == "" {
		return l, nil
	}
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	entries, err := ReadAudit(f, file)
	if err != nil {
		return nil, err
	}
	if err := l.verify(entries); err != nil {
		return nil, fmt.Errorf("audit log %s: %w", file, err)
	}
	l.entries = entries
	if fi, err := f.Stat(); err == nil {
		l.size = fi.Size()
	}
	return l, nil
}

// Append adds an entry chained to the last one and, for a file log,
// writes and syncs it before returning.
func (l *AuditLog) Append(actor, action string, data any) (AuditEntry, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return AuditEntry{}, fmt.Errorf("audit append %s: %w", action, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.path == "" {
		return l.appendEntry(nil, actor, action, raw)
	}
	// A file log may have other writers (another command on the same
	// log: run, serve's approvals, a2a serve): under an exclusive lock,
	// catch up with what they appended, then extend that chain. (Where
	// there is no flock(2), filelock does not lock: one process per log.)
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600) // decisions name tools, scopes and approvers: owner only
	if err != nil {
		return AuditEntry{}, fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	unlock, err := filelock.Lock(f)
	if err != nil {
		return AuditEntry{}, fmt.Errorf("audit log %s: lock: %w", l.path, err)
	}
	defer unlock()
	if err := l.catchUp(f); err != nil {
		return AuditEntry{}, err
	}
	return l.appendEntry(f, actor, action, raw)
}

// catchUp rereads the log when another writer changed its length, and
// refuses to extend a chain that no longer verifies.
func (l *AuditLog) catchUp(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	if fi.Size() == l.size {
		return nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	entries, err := ReadAudit(f, l.path)
	if err != nil {
		return err
	}
	if err := l.verify(entries); err != nil {
		return fmt.Errorf("audit log %s: not appending to a chain that does not verify: %w", l.path, err)
	}
	l.entries, l.size = entries, fi.Size()
	return nil
}

// appendEntry chains an entry to the last one and, with f, writes and
// syncs it. l.mu is held (and, with f, the file's lock).
func (l *AuditLog) appendEntry(f *os.File, actor, action string, raw []byte) (AuditEntry, error) {
	var err error
	e := AuditEntry{Seq: int64(len(l.entries)) + 1, Time: l.clock().UTC(), Actor: actor, Action: action}
	if e.Data, err = journal.Canonical(raw); err != nil {
		return AuditEntry{}, err
	}
	if n := len(l.entries); n > 0 {
		e.Prev = l.entries[n-1].Hash
	}
	if e.Hash, err = entryHash(e); err != nil {
		return AuditEntry{}, err
	}
	if l.key != nil {
		e.Key, e.MAC = l.key.ID(), l.key.mac(e.Hash)
	}
	if f != nil {
		line, err := json.Marshal(e)
		if err != nil {
			return AuditEntry{}, err
		}
		line = append(line, '\n')
		_, werr := f.Write(line)
		if err := errors.Join(werr, f.Sync()); err != nil {
			return AuditEntry{}, fmt.Errorf("audit log %s: %w", l.path, err)
		}
		l.size += int64(len(line))
	}
	l.entries = append(l.entries, e)
	return e, nil
}

// Entries returns a copy of the entries.
func (l *AuditLog) Entries() []AuditEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]AuditEntry(nil), l.entries...)
}

// Verify checks the in-memory chain (and, signed, every signature).
func (l *AuditLog) Verify() error { return l.verify(l.Entries()) }

func (l *AuditLog) verify(entries []AuditEntry) error {
	if l.key != nil {
		return VerifyAuditSigned(entries, l.key)
	}
	return VerifyAudit(entries)
}

// ReadAudit decodes an audit log's JSON lines strictly, as Append writes
// them: each line is exactly one JSON object with only AuditEntry's
// fields, and nothing before or after it — not a blank line, not trailing
// text, not a second entry joined onto the line (which a lenient reader
// would drop, hiding the log's last entries from the chain check). A line
// that breaks this is an error naming it.
func ReadAudit(r io.Reader, name string) ([]AuditEntry, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	var out []AuditEntry
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 || b[0] != '{' {
			return nil, fmt.Errorf("audit log %s line %d: %w", name, line, errNotAnEntry)
		}
		var e AuditEntry
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("audit log %s line %d: %w", name, line, err)
		}
		if rest := b[dec.InputOffset():]; len(rest) > 0 {
			return nil, fmt.Errorf("audit log %s line %d: %w (%q)", name, line, errTrailing, clipBytes(rest))
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("audit log %s: %w", name, err)
	}
	return out, nil
}

var (
	errNotAnEntry = errors.New("not a JSON object starting the line (blank lines and leading text are refused)")
	errTrailing   = errors.New("data after the entry's JSON object on the same line")
)

func clipBytes(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

// AuditError names the first entry that breaks the chain and how.
type AuditError struct {
	Line int   // 1-based position in the log
	Seq  int64 // the entry's own sequence number
	What string
}

func (e *AuditError) Error() string {
	return fmt.Sprintf("line %d (entry seq %d): %s", e.Line, e.Seq, e.What)
}

// VerifyAudit checks every entry: its hash over its content (an edit),
// its sequence number (a dropped or reordered entry) and its link to the
// previous entry's hash. It returns an *AuditError for the first break.
func VerifyAudit(entries []AuditEntry) error {
	prev := ""
	for i, e := range entries {
		line := i + 1
		want := int64(i) + 1
		h, err := entryHash(e)
		if err != nil {
			return &AuditError{Line: line, Seq: e.Seq, What: err.Error()}
		}
		switch {
		case e.Seq > want:
			for j := i + 1; j < len(entries); j++ {
				if entries[j].Seq == want {
					return &AuditError{Line: line, Seq: e.Seq, What: fmt.Sprintf("reordered: seq %d is here, seq %d comes later at line %d", e.Seq, want, j+1)}
				}
			}
			return &AuditError{Line: line, Seq: e.Seq, What: fmt.Sprintf("entries %s missing: dropped (expected seq %d here)", seqRange(want, e.Seq-1), want)}
		case e.Seq < want:
			return &AuditError{Line: line, Seq: e.Seq, What: fmt.Sprintf("out of order: seq %d appears after seq %d (reordered or duplicated)", e.Seq, want-1)}
		case h != e.Hash:
			return &AuditError{Line: line, Seq: e.Seq, What: "content does not match its hash: edited"}
		case e.Prev != prev:
			return &AuditError{Line: line, Seq: e.Seq, What: "prev hash does not match the previous entry: the chain was rewritten before this entry"}
		}
		prev = e.Hash
	}
	return nil
}

// VerifyAuditSigned is VerifyAudit and, for every entry, a signature of
// key over its hash. An entry with none, or with another key's, or whose
// signature does not match (its hash was recomputed by someone without
// the key) is an *AuditError naming it.
func VerifyAuditSigned(entries []AuditEntry, key *AuditKey) error {
	if err := VerifyAudit(entries); err != nil {
		return err
	}
	for i, e := range entries {
		line := i + 1
		switch {
		case e.MAC == "":
			return &AuditError{Line: line, Seq: e.Seq, What: "unsigned: written without an audit key (forged, or made before this log was signed; move an old log aside)"}
		case e.Key != key.ID():
			return &AuditError{Line: line, Seq: e.Seq, What: fmt.Sprintf("signed with another key (%s; this key is %s)", e.Key, key.ID())}
		case !hmac.Equal([]byte(e.MAC), []byte(key.mac(e.Hash))):
			return &AuditError{Line: line, Seq: e.Seq, What: "signature does not match: forged (the entry and its hash rewritten without the key)"}
		}
	}
	return nil
}

func seqRange(a, b int64) string {
	if a == b {
		return strconv.FormatInt(a, 10)
	}
	return fmt.Sprintf("%d-%d", a, b)
}
