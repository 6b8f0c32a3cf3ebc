package journaldb

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/loomwork/loomwork/agents/journal"
)

// BenchmarkAppend measures one durable append (one transaction, fsync'd WAL).
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(b.TempDir(), "j.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown(ctx)
	payload := map[string]any{"content": "recorded 2500 cents on meals; balance 2500 cents", "documents": []string{"policy/meals"}}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := s.Append(ctx, "r", journal.Record{Kind: journal.KindToolResult, Step: i, Tool: "t", CallID: fmt.Sprint(i), Payload: payload}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendEffect measures a side-effecting call: one INSERT, its
// effect event and its tool_result in one transaction.
func BenchmarkAppendEffect(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(b.TempDir(), "j.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown(ctx)
	if err := s.EnsureSchema(ctx, `CREATE TABLE IF NOT EXISTS ledger (k TEXT PRIMARY KEY, v INTEGER)`); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		key := fmt.Sprint("k", i)
		_, err := s.AppendEffect(ctx, "r", journal.EffectCall{Step: i, Tool: "ledger", CallID: key, Key: key}, withSQL(func(ctx context.Context, tx journal.SQLTx) (journal.Record, error) {
			if err := tx.Exec(ctx, `INSERT INTO ledger (k, v) VALUES (?, ?)`, key, i); err != nil {
				return journal.Record{}, err
			}
			return journal.Record{Kind: journal.KindToolResult, Step: i, Tool: "ledger", CallID: key, Payload: journal.ToolResult{Content: "ok"}}, nil
		}))
		if err != nil {
			b.Fatal(err)
		}
	}
}
