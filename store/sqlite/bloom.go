package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Search blooms (migration 0008). search_terms is keyed (key, trace,
// value) for cheap writes (see 0003), so the traces holding a value are
// found by reading every trace's terms of that key: fine for a common
// value (a walk of the list finds a page of matches among its first
// traces), slow for a rare one (the walk reads every trace). A bloom
// filter per chunk of bloomChunk consecutive traces (by seq) says which
// chunks may hold a term: a search for a rare value reads the blooms,
// then the terms of the few chunks they name. A term is a key with a
// value, or a key alone (the key is set, for "exists"). Each chunk's
// filter is blocked: bloomBlocks blocks of bloomBlockBits bits, a term
// setting bloomHashes bits of one block, so a search reads one block per
// chunk (a range of the primary key (block, chunk)), not whole filters.
// About 32 KiB per chunk, 12 bytes a span of 10-span traces; a false
// positive rate near 1% at ~25,000 distinct terms a chunk. A chunk with
// far more (a very large trace) only ever answers "maybe": it is read.
// Filters only gain bits: a deleted trace's terms stay until its chunk's
// traces are all gone (dropBlooms).

const (
	bloomChunkShift = 8 // 256 traces a chunk
	bloomBlocks     = 64
	bloomBlockBits  = 4096
	bloomHashes     = 4
)

// Term tags: what kind of value a term hash covers.
const (
	tagText   = 's'
	tagInt    = 'i' // a number that is an integer up to 2^53 in magnitude
	tagFloat  = 'f' // any other number
	tagKeySet = 'k' // the key alone
)

// termHash is FNV-1a (64 bits) of the key id, the tag and the value bytes.
func termHash(key int64, tag byte, val []byte) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	var kb [9]byte
	binary.LittleEndian.PutUint64(kb[:8], uint64(key))
	kb[8] = tag
	for _, b := range kb {
		h = (h ^ uint64(b)) * prime
	}
	for _, b := range val {
		h = (h ^ uint64(b)) * prime
	}
	return h
}

// numHash is the hash of a number, equal for every stored form SQLite
// compares equal (42 and 42.0; -0 and 0).
func numHash(key int64, v float64) uint64 {
	var b [8]byte
	if v == math.Trunc(v) && math.Abs(v) <= exactInt {
		binary.LittleEndian.PutUint64(b[:], uint64(int64(v)))
		return termHash(key, tagInt, b[:])
	}
	binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
	return termHash(key, tagFloat, b[:])
}

// valueHash is the hash of a stored term value (termValues' forms); ok is
// false for the set-only blob, which no equality matches.
func valueHash(key int64, v any) (uint64, bool) {
	switch t := v.(type) {
	case string:
		return termHash(key, tagText, []byte(t)), true
	case int64:
		return numHash(key, float64(t)), true
	case float64:
		return numHash(key, t), true
	}
	return 0, false
}

func keySetHash(key int64) uint64 { return termHash(key, tagKeySet, nil) }

// bloomBlock is the block a hash sets bits in, and bitsOf those bits.
func bloomBlock(h uint64) int { return int(h >> 58) }

func bloomBits(h uint64, each func(bit uint32)) {
	h1, h2 := uint32(h), uint32(h>>32)|1
	for i := uint32(0); i < bloomHashes; i++ {
		each((h1 + i*h2) % bloomBlockBits)
	}
}

// bloomAdds collects the hashes a write adds, per chunk.
type bloomAdds map[int64][]uint64

func (a bloomAdds) add(seq int64, h uint64) {
	c := seq >> bloomChunkShift
	a[c] = append(a[c], h)
}

// write ORs the collected hashes into the stored blocks.
func (a bloomAdds) write(ctx context.Context, tx *sql.Tx) error {
	if len(a) == 0 {
		return nil
	}
	type blockKey struct {
		block int
		chunk int64
	}
	blocks := map[blockKey][]byte{}
	for chunk, hs := range a {
		for _, h := range hs {
			k := blockKey{bloomBlock(h), chunk}
			b := blocks[k]
			if b == nil {
				b = make([]byte, bloomBlockBits/8)
				blocks[k] = b
			}
			bloomBits(h, func(bit uint32) { b[bit/8] |= 1 << (bit % 8) })
		}
	}
	sel, err := tx.PrepareContext(ctx, `SELECT bits FROM search_blooms WHERE block = ? AND chunk = ?`)
	if err != nil {
		return err
	}
	defer sel.Close()
	put, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO search_blooms (block, chunk, bits) VALUES (?, ?, ?)`)
	if err != nil {
		return err
	}
	defer put.Close()
	for k, b := range blocks {
		var old []byte
		switch err := sel.QueryRowContext(ctx, k.block, k.chunk).Scan(&old); {
		case err == sql.ErrNoRows:
		case err != nil:
			return err
		}
		if len(old) == len(b) {
			same := true
			for i := range b {
				if b[i]|old[i] != old[i] {
					same = false
				}
				b[i] |= old[i]
			}
			if same {
				continue
			}
		}
		if _, err := put.ExecContext(ctx, k.block, k.chunk, b); err != nil {
			return err
		}
	}
	return nil
}

// bloomCandidates returns the chunks whose blooms may hold any of the
// hashes, and how many chunks there are.
func (s *Store) bloomCandidates(ctx context.Context, hashes []uint64) (map[int64]bool, int, error) {
	cand := map[int64]bool{}
	byBlock := map[int][]uint64{}
	for _, h := range hashes {
		byBlock[bloomBlock(h)] = append(byBlock[bloomBlock(h)], h)
	}
	chunks := 0
	for block, hs := range byBlock {
		rows, err := s.reader.QueryContext(ctx, `SELECT chunk, bits FROM search_blooms WHERE block = ?`, block)
		if err != nil {
			return nil, 0, err
		}
		n := 0
		var bits sql.RawBytes
		for rows.Next() {
			var chunk int64
			if err := rows.Scan(&chunk, &bits); err != nil {
				rows.Close()
				return nil, 0, err
			}
			n++
			for _, h := range hs {
				all := true
				bloomBits(h, func(bit uint32) {
					if int(bit/8) >= len(bits) || bits[bit/8]&(1<<(bit%8)) == 0 {
						all = false
					}
				})
				if all {
					cand[chunk] = true
					break
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, 0, err
		}
		chunks = max(chunks, n)
	}
	return cand, chunks, nil
}

// bloomDriver is the drive of a filter from its candidate chunks: the
// traces of those chunks (a rowid range each) that satisfy cond (of
// traces aliased c, with args), each probed by itself (for a trace in
// span rows, by the primary key of search_terms: a range of (key, trace)
// alone would read every term of a large trace's).
func bloomDriver(cand map[int64]bool, cond string, condArgs []any) (string, []any) {
	chunks := make([]int64, 0, len(cand))
	for c := range cand {
		chunks = append(chunks, c)
	}
	slices.Sort(chunks)
	var parts []string
	var args []any
	for _, c := range chunks {
		parts = append(parts, "SELECT c.seq FROM traces c WHERE c.seq BETWEEN ? AND ? AND "+cond)
		args = append(args, c<<bloomChunkShift, (c+1)<<bloomChunkShift-1)
		args = append(args, condArgs...)
	}
	if len(parts) == 0 {
		// No chunk may hold it: an empty set, still a lookup by rowid
		// (a constant 0 would plan as a scan, though it reads nothing).
		return "seq IN (SELECT 0 WHERE 0)", nil
	}
	return "seq IN (" + strings.Join(parts, " UNION ALL ") + ")", args
}

func andTest(test string) string {
	if test == "" {
		return ""
	}
	return " AND " + test
}

// fillBlooms writes the blooms of every stored trace from its search
// terms (migration 0008), holding one chunk's hashes at a time per key:
// the terms come in key, then trace order.
func fillBlooms(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT key_id, seq, value FROM search_terms`)
	if err != nil {
		return fmt.Errorf("fill search blooms: %w", err)
	}
	defer rows.Close()
	adds := bloomAdds{}
	n := 0
	lastKey, lastSeq := int64(-1), int64(-1)
	for rows.Next() {
		var key, seq int64
		var v any
		if err := rows.Scan(&key, &seq, &v); err != nil {
			return fmt.Errorf("fill search blooms: %w", err)
		}
		if key != lastKey || seq != lastSeq {
			adds.add(seq, keySetHash(key))
			lastKey, lastSeq = key, seq
		}
		if h, ok := valueHash(key, v); ok {
			adds.add(seq, h)
		}
		if n++; n%(1<<20) == 0 {
			if err := adds.write(ctx, tx); err != nil {
				return fmt.Errorf("fill search blooms: %w", err)
			}
			clear(adds)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("fill search blooms: %w", err)
	}
	if err := adds.write(ctx, tx); err != nil {
		return fmt.Errorf("fill search blooms: %w", err)
	}
	return nil
}

// dropBlooms deletes the blooms of chunks none of whose traces is left
// (retention deletes the oldest first).
func dropBlooms(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM search_blooms WHERE chunk < (SELECT coalesce(min(seq), 1 << 62) FROM traces) >> ?`, bloomChunkShift)
	return err
}

// rangeAdds collects the numbers a write adds, per search key and chunk
// (search_ranges, migration 0009).
type rangeAdds map[[2]int64][2]float64

func (a rangeAdds) add(key, seq int64, v float64) {
	k := [2]int64{key, seq >> bloomChunkShift}
	r, ok := a[k]
	if !ok {
		a[k] = [2]float64{v, v}
		return
	}
	a[k] = [2]float64{min(r[0], v), max(r[1], v)}
}

// write widens the stored ranges to the collected numbers.
func (a rangeAdds) write(ctx context.Context, tx *sql.Tx) error {
	if len(a) == 0 {
		return nil
	}
	put, err := tx.PrepareContext(ctx, `INSERT INTO search_ranges (key_id, chunk, lo, hi) VALUES (?, ?, ?, ?)
		ON CONFLICT (key_id, chunk) DO UPDATE SET lo = min(lo, excluded.lo), hi = max(hi, excluded.hi)`)
	if err != nil {
		return err
	}
	defer put.Close()
	for k, r := range a {
		if _, err := put.ExecContext(ctx, k[0], k[1], r[0], r[1]); err != nil {
			return err
		}
	}
	return nil
}

// rangeCandidates returns the chunks whose range of keys reaches op num
// (one of > >= < <=).
func (s *Store) rangeCandidates(ctx context.Context, keys []int64, op string, num float64) (map[int64]bool, error) {
	col, cmp := "hi", op
	if op == "<" || op == "<=" {
		col = "lo"
	}
	args := make([]any, 0, len(keys)+1)
	for _, k := range keys {
		args = append(args, k)
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT DISTINCT chunk FROM search_ranges WHERE key_id IN `+inList(len(keys))+` AND `+col+` `+cmp+` ?`, append(args, num)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cand := map[int64]bool{}
	for rows.Next() {
		var c int64
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		cand[c] = true
	}
	return cand, rows.Err()
}

// dropRanges deletes the ranges of chunks none of whose traces is left.
func dropRanges(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM search_ranges WHERE chunk < (SELECT coalesce(min(seq), 1 << 62) FROM traces) >> ?`, bloomChunkShift)
	return err
}
