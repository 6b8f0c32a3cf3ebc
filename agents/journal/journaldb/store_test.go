package journaldb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loomwork/loomwork/agents/journal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stepClock is an injected clock that advances one millisecond per reading.
func stepClock() func() time.Time {
	t := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Millisecond); return t }
}

func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{Path: filepath.Join(t.TempDir(), "journal.db"), Clock: stepClock()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

func TestAppendAllocatesGapFreeSeqAndChainsHashes(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	for i := 0; i < 3; i++ {
		if _, err := s.Append(ctx, "r1", journal.Record{Kind: journal.KindToolCall, Step: i, Payload: map[string]int{"i": i}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Append(ctx, "r2", journal.Record{Kind: journal.KindRunStarted}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || evs[0].Seq != 1 || evs[2].Seq != 3 || evs[1].Prev != evs[0].Hash {
		t.Fatalf("events = %+v", evs)
	}
	if err := journal.VerifyChain(evs); err != nil {
		t.Fatal(err)
	}
	r2, _ := s.Events(ctx, "r2")
	if len(r2) != 1 || r2[0].Seq != 1 || r2[0].Prev != "" {
		t.Fatalf("second run does not start its own chain: %+v", r2)
	}
}

func TestSeqContinuesAfterReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(ctx, Config{Path: path, Clock: stepClock()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "r", journal.Record{Kind: journal.KindRunStarted}, journal.Record{Kind: journal.KindModelRequest}); err != nil {
		t.Fatal(err)
	}
	s.Shutdown(ctx)
	s, err = Open(ctx, Config{Path: path, Clock: stepClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	evs, err := s.Append(ctx, "r", journal.Record{Kind: journal.KindModelResponse})
	if err != nil {
		t.Fatal(err)
	}
	if evs[0].Seq != 3 {
		t.Fatalf("seq after reopen = %d, want 3", evs[0].Seq)
	}
	if err := s.Verify(ctx, "r"); err != nil {
		t.Fatal(err)
	}
}

func TestJournalRowsCannotBeUpdatedOrDeleted(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	if _, err := s.Append(ctx, "r", journal.Record{Kind: journal.KindRunStarted}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, `UPDATE journal_events SET payload='{}'`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("update: %v", err)
	}
	if _, err := s.DB().ExecContext(ctx, `DELETE FROM journal_events`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("delete: %v", err)
	}
}

const ledgerDDL = `CREATE TABLE IF NOT EXISTS ledger (key TEXT PRIMARY KEY, amount INTEGER NOT NULL)`

func TestAppendEffectCommitsEffectWithItsEvents(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	if err := s.EnsureSchema(ctx, ledgerDDL); err != nil {
		t.Fatal(err)
	}
	call := EffectCall{Step: 1, Tool: "ledger", CallID: "c1", Key: "k1"}
	evs, err := s.AppendEffect(ctx, "r", call, func(ctx context.Context, tx *EffectTx) (journal.Record, error) {
		if _, err := tx.Exec(ctx, `INSERT INTO ledger(key, amount) VALUES (?, ?)`, tx.Key(), 42); err != nil {
			return journal.Record{}, err
		}
		return journal.Record{Kind: journal.KindToolResult, Step: 1, Tool: "ledger", CallID: "c1", Payload: journal.ToolResult{Content: "ok"}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Kind != journal.KindEffect || evs[0].Tool != "ledger" || evs[0].CallID != "c1" || evs[1].Kind != journal.KindToolResult {
		t.Fatalf("events = %+v", evs)
	}
	var eff journal.Effect
	json.Unmarshal(evs[0].Payload, &eff)
	if eff.Key != "k1" || !strings.Contains(eff.Statement, "INSERT INTO ledger") || string(eff.Args) != `["k1",42]` {
		t.Fatalf("effect payload = %+v", eff)
	}
	var n int
	s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM ledger`).Scan(&n)
	if n != 1 {
		t.Fatalf("ledger rows = %d", n)
	}
}

func TestFailedOrPanickingEffectLeavesNoTrace(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	if err := s.EnsureSchema(ctx, ledgerDDL); err != nil {
		t.Fatal(err)
	}
	for name, fn := range map[string]EffectFunc{
		"error": func(ctx context.Context, tx *EffectTx) (journal.Record, error) {
			tx.Exec(ctx, `INSERT INTO ledger(key, amount) VALUES ('e', 1)`)
			return journal.Record{}, errors.New("downstream refused")
		},
		"panic": func(ctx context.Context, tx *EffectTx) (journal.Record, error) {
			tx.Exec(ctx, `INSERT INTO ledger(key, amount) VALUES ('p', 1)`)
			panic("boom")
		},
	} {
		_, err := s.AppendEffect(ctx, "r", EffectCall{Step: 1, Tool: "t", CallID: name, Key: name}, fn)
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		var pe *PanicError
		if name == "panic" && !errors.As(err, &pe) {
			t.Fatalf("panic not converted: %v", err)
		}
	}
	var n int
	s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM ledger`).Scan(&n)
	evs, _ := s.Events(ctx, "r")
	if n != 0 || len(evs) != 0 {
		t.Fatalf("rolled-back effects left %d rows and %d events", n, len(evs))
	}
}

func TestSameEffectKeyCannotBeJournaledTwice(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	s.EnsureSchema(ctx, `CREATE TABLE IF NOT EXISTS notes (v TEXT)`)
	fn := func(ctx context.Context, tx *EffectTx) (journal.Record, error) {
		if _, err := tx.Exec(ctx, `INSERT INTO notes(v) VALUES ('x')`); err != nil {
			return journal.Record{}, err
		}
		return journal.Record{Kind: journal.KindToolResult}, nil
	}
	call := EffectCall{Step: 1, Tool: "t", CallID: "c", Key: "same"}
	if _, err := s.AppendEffect(ctx, "r", call, fn); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEffect(ctx, "r", call, fn); err == nil {
		t.Fatal("second application of the same idempotency key was accepted")
	}
	var n int
	s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM notes`).Scan(&n)
	if n != 1 {
		t.Fatalf("notes rows = %d, want 1", n)
	}
}

func TestExportImportRoundTripKeepsHashes(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	for _, k := range []journal.Kind{journal.KindRunStarted, journal.KindModelRequest, journal.KindModelResponse, journal.KindRunFinished} {
		if _, err := s.Append(ctx, "r", journal.Record{Kind: k, Label: "scripted", Payload: map[string]string{"k": string(k), "html": "<&>"}}); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := s.Export(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	runs, err := journal.ReadJSONL(bytes.NewReader(buf.Bytes()), "x.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || len(runs[0].Events) != 4 || runs[0].LineOf(4) != 4 {
		t.Fatalf("runs = %+v", runs)
	}
	s2 := openTemp(t)
	if err := s2.Import(ctx, runs); err != nil {
		t.Fatal(err)
	}
	if err := s2.Import(ctx, runs); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second import: %v", err)
	}
	var again bytes.Buffer
	if err := s2.Export(ctx, &again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Fatalf("export after import differs:\n%s\n%s", buf.Bytes(), again.Bytes())
	}
}
