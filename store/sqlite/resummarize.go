package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"

	"github.com/loomwork/loomwork/store"
)

// afterMigration runs the migration steps SQL cannot do, in the
// migration's transaction.
func (s *Store) afterMigration(ctx context.Context, tx *sql.Tx, version int) error {
	switch version {
	case 2:
		return s.resummarize(ctx, tx)
	case versionCallGroups:
		if err := fillCallGroups(ctx, tx); err != nil {
			return err
		}
		return fillBlooms(ctx, tx)
	case versionCompact:
		return s.fillTagBlooms(ctx, tx)
	}
	return nil
}

// resummarize recomputes every trace's summary row with store.Summarize
// (schema version 2 changed the rule for model calls, tokens and duration).
// The spans are read with their payloads, which hold the model labels.
// Traces are done one at a time, so memory stays one trace's.
func (s *Store) resummarize(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT seq, trace_id, services, names_lower FROM traces ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("resummarize: %w", err)
	}
	type trace struct {
		seq             int64
		id              []byte
		services, names string
	}
	var traces []trace
	for rows.Next() {
		var t trace
		if err := rows.Scan(&t.seq, &t.id, &t.services, &t.names); err != nil {
			rows.Close()
			return fmt.Errorf("resummarize: %w", err)
		}
		traces = append(traces, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("resummarize: %w", err)
	}
	upd, err := tx.PrepareContext(ctx, updateSummaryV2SQL)
	if err != nil {
		return fmt.Errorf("resummarize: %w", err)
	}
	defer upd.Close()
	for _, t := range traces {
		id := hex.EncodeToString(t.id)
		spans, meta, err := readSpanRows(ctx, tx, t.seq, id, 0)
		if err == nil {
			err = s.readPayloads(ctx, tx, spans, meta)
		}
		if err != nil {
			return fmt.Errorf("resummarize trace %s: %w", id, err)
		}
		b := store.NewSummaryBuilder()
		calls, _ := b.Add(spans)
		if err := s.updateCalls(ctx, tx, t.seq, calls, nil); err != nil {
			return fmt.Errorf("resummarize trace %s: %w", id, err)
		}
		sum := b.Figures()
		services, err := decodeList(t.services)
		if err != nil {
			return fmt.Errorf("resummarize trace %s: services: %w", id, err)
		}
		vals := summaryValues(&sum, services, "")[:23] // the version 2 columns
		vals[5] = t.names                              // names_lower is kept as it was
		if _, err := upd.ExecContext(ctx, append(vals, t.seq)...); err != nil {
			return fmt.Errorf("resummarize trace %s: %w", id, err)
		}
	}
	return nil
}

// versionCompact is the schema version of compact blocks, summary_strings and
// tags in the search blooms (migration 0009).
const versionCompact = 9

// fillTagBlooms adds every stored trace's tags (its summary's services,
// agents and models) to the search blooms, a chunk of traces at a time.
func (s *Store) fillTagBlooms(ctx context.Context, tx *sql.Tx) error {
	keys := map[int]int64{}
	for _, tag := range []int{tagService, tagAgent, tagModel} {
		kind := tagSearchKind(tag)
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO search_keys (kind, key) VALUES (?, '')`, kind); err != nil {
			return fmt.Errorf("fill tag blooms: %w", err)
		}
		var id int64
		if err := tx.QueryRowContext(ctx, `SELECT id FROM search_keys WHERE kind = ? AND key = ''`, kind).Scan(&id); err != nil {
			return fmt.Errorf("fill tag blooms: %w", err)
		}
		keys[tag] = id
	}
	rows, err := tx.QueryContext(ctx, `SELECT seq, services, agent_names, models FROM traces ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("fill tag blooms: %w", err)
	}
	defer rows.Close()
	adds := bloomAdds{}
	n := 0
	for rows.Next() {
		var seq int64
		var services, agents, models string // version 8's JSON lists
		if err := rows.Scan(&seq, &services, &agents, &models); err != nil {
			return fmt.Errorf("fill tag blooms: %w", err)
		}
		for tag, list := range map[int]string{tagService: services, tagAgent: agents, tagModel: models} {
			vals, err := decodeList(list)
			if err != nil {
				return fmt.Errorf("fill tag blooms: trace %d: %w", seq, err)
			}
			for _, v := range vals {
				adds.add(seq, termHash(keys[tag], tagText, []byte(v)))
			}
		}
		if n++; n%(1<<16) == 0 {
			if err := adds.write(ctx, tx); err != nil {
				return fmt.Errorf("fill tag blooms: %w", err)
			}
			clear(adds)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("fill tag blooms: %w", err)
	}
	if err := adds.write(ctx, tx); err != nil {
		return fmt.Errorf("fill tag blooms: %w", err)
	}
	return nil
}
