package retrieval

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/gonum/mat"
)

// The LSA model cache: a fitted model is written to a directory under a
// digest of everything the fit depends on, and read back instead of
// refitting when the same digest comes again (a serve or ablate restart,
// every command a test runs on the same corpus).
//
// Key (SHA-256): lsaModelFormat; the Go version and architecture; the
// bleve and gonum module versions and a digest of the analyzer's output on
// a fixed probe text (what a term is); the LSAConfig after defaults; and
// the input — the texts in order (Start), or each document's analysed term
// counts in order (HeldOut's fold fits).
//
// File (<dir>/<first 32 hex digits of the key>.lsa), little-endian:
//
//	magic "LOOMLSA\n" | format uint32 | key [32] | dims uint32 | terms uint32
//	| per term: length uint32, bytes (strictly increasing: the term's index
//	is its rank) | idf float64 × terms | projection float64 × terms × dims
//	(row-major) | SHA-256 of everything before it [32]
//
// A file that does not decode (short, bad checksum, other format or key,
// terms out of order, a value not finite) is logged as a warning naming it,
// the model is refitted and the file replaced. Files are written to a
// temporary file in the same directory and renamed into place, so a
// concurrent reader sees the old file or the new one, never part of one.
// A hit refreshes the file's modification time; after each write the
// directory keeps its ModelCacheFiles most recently used models and
// removes the rest (and temporary files left an hour or more by a killed
// writer).

// lsaModelFormat is the cache format version. Bump it whenever the model's
// encoding or anything the fit computes changes (the analyzer's use, the
// TF-IDF weighting, the randomized SVD, sign fixing): a cached model must
// be the model a fresh fit would make, bit for bit.
// TestLSACacheFormatIsBumpedWhenTheFitChanges pins a fit's digest to it.
const lsaModelFormat = 1

// DefaultModelCacheFiles is how many models a cache directory keeps when
// Config.ModelCacheFiles is 0.
const DefaultModelCacheFiles = 16

const lsaMagic = "LOOMLSA\n"

// DefaultModelCacheDir is where commands keep fitted LSA models, read from
// the process environment: $LOOMWORK_LSA_CACHE when set ("off" turns the
// cache off and returns ""), else $LOOMWORK_CACHE/lsa, else the user's
// cache folder (os.UserCacheDir: $XDG_CACHE_HOME or ~/.cache on Linux) +
// "/loomwork/lsa"; "" when there is none.
func DefaultModelCacheDir() string {
	switch d := os.Getenv("LOOMWORK_LSA_CACHE"); d {
	case "off":
		return ""
	case "":
	default:
		return d
	}
	if d := os.Getenv("LOOMWORK_CACHE"); d != "" {
		return filepath.Join(d, "lsa")
	}
	if d, err := os.UserCacheDir(); err == nil && d != "" {
		return filepath.Join(d, "loomwork", "lsa")
	}
	return ""
}

// Model sources reported in BuildInfo.EmbedderSource.
const (
	EmbedderFitted = "fitted"
	EmbedderCached = "cache"
	EmbedderGiven  = "given"
)

// lsaCache is a model cache directory; the zero dir disables it.
type lsaCache struct {
	dir      string
	maxFiles int
	log      *slog.Logger // warnings: unreadable files, failed writes
}

// lsaResult tells where a model came from.
type lsaResult struct {
	source string // EmbedderFitted or EmbedderCached
	file   string // the cache file read or written ("" without a cache, or when the write failed)
}

// fills serialises, within a process, the fills of one cache file, so that
// concurrent starts on the same corpus fit once and the others read the
// file. Processes do not wait for each other: two may fit the same model,
// and the second rename replaces the first file with identical bytes.
var fills sync.Map // file path → chan struct{} (a one-slot lock)

func lockFill(ctx context.Context, path string) (func(), error) {
	v, _ := fills.LoadOrStore(path, make(chan struct{}, 1))
	ch := v.(chan struct{})
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("fit lsa: %w", ctx.Err())
	}
}

// get returns the model stored under key, or fits it with fit and stores
// it. Without a directory it only fits.
func (c lsaCache) get(ctx context.Context, key [32]byte, fit func() (*LSA, error)) (*LSA, lsaResult, error) {
	if c.dir == "" {
		l, err := fit()
		return l, lsaResult{source: EmbedderFitted}, err
	}
	path := filepath.Join(c.dir, hex.EncodeToString(key[:16])+".lsa")
	unlock, err := lockFill(ctx, path)
	if err != nil {
		return nil, lsaResult{}, err
	}
	defer unlock()
	if l, ok := c.load(path, key); ok {
		return l, lsaResult{source: EmbedderCached, file: path}, nil
	}
	l, err := fit()
	if err != nil {
		return nil, lsaResult{}, err
	}
	res := lsaResult{source: EmbedderFitted}
	if err := c.store(path, key, l); err != nil {
		c.log.Warn("lsa model cache: could not write the fitted model; the next start fits again", "file", path, "err", err)
	} else {
		res.file = path
		c.prune()
	}
	return l, res, nil
}

// load reads the model at path; a missing file is a quiet miss, any other
// failure a warning.
func (c lsaCache) load(path string, key [32]byte) (*LSA, bool) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		c.log.Warn("lsa model cache: cannot read the cached model; fitting again", "file", path, "err", err)
		return nil, false
	}
	l, gotKey, err := decodeLSA(b)
	if err == nil && gotKey != key {
		err = errors.New("the file holds the model of other inputs (key mismatch)")
	}
	if err != nil {
		c.log.Warn("lsa model cache: ignoring a cached model that does not decode; fitting again and replacing it", "file", path, "err", err)
		return nil, false
	}
	now := time.Now()
	_ = os.Chtimes(path, now, now) // most recently used; pruning reads it
	return l, true
}

// store writes the model atomically: a temporary file in the same
// directory, renamed over path.
func (c lsaCache) store(path string, key [32]byte, l *LSA) error {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	b := encodeLSA(l, key)
	f, err := os.CreateTemp(c.dir, ".lsa-*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// prune keeps the maxFiles most recently used models and removes
// temporary files an hour old or more (a writer killed mid-write).
func (c lsaCache) prune() {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	type model struct {
		path string
		mod  time.Time
	}
	var models []model
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		p := filepath.Join(c.dir, e.Name())
		switch {
		case strings.HasSuffix(e.Name(), ".lsa"):
			models = append(models, model{p, info.ModTime()})
		case strings.HasPrefix(e.Name(), ".lsa-") && strings.HasSuffix(e.Name(), ".tmp") && time.Since(info.ModTime()) > time.Hour:
			_ = os.Remove(p)
		}
	}
	if len(models) <= c.maxFiles {
		return
	}
	sort.Slice(models, func(i, j int) bool {
		if !models[i].mod.Equal(models[j].mod) {
			return models[i].mod.After(models[j].mod)
		}
		return models[i].path < models[j].path
	})
	for _, m := range models[c.maxFiles:] {
		if err := os.Remove(m.path); err == nil {
			c.log.Debug("lsa model cache: removed the least recently used model", "file", m.path)
		}
	}
}

// keyHasher builds a cache key; every field is length- or size-prefixed so
// that no two inputs hash the same bytes.
type keyHasher struct {
	h   hash.Hash
	buf [8]byte
}

func newKeyHasher(kind string, cfg LSAConfig) *keyHasher {
	cfg = cfg.withDefaults()
	k := &keyHasher{h: sha256.New()}
	k.str("loomwork lsa model")
	k.u64(lsaModelFormat)
	k.str(lsaEnvironment())
	k.str(kind)
	for _, v := range []uint64{uint64(cfg.Dims), uint64(cfg.MinDF), math.Float64bits(cfg.MaxDFRatio),
		uint64(cfg.MaxVocab), uint64(cfg.Oversample), uint64(cfg.PowerIters), cfg.Seed} {
		k.u64(v)
	}
	return k
}

func (k *keyHasher) u64(v uint64) {
	binary.LittleEndian.PutUint64(k.buf[:], v)
	k.h.Write(k.buf[:])
}

func (k *keyHasher) str(s string) {
	k.u64(uint64(len(s)))
	io.WriteString(k.h, s)
}

func (k *keyHasher) sum() (out [32]byte) {
	k.h.Sum(out[:0])
	return out
}

// textsKey is the cache key of FitLSA(texts, cfg).
func textsKey(texts []string, cfg LSAConfig) [32]byte {
	k := newKeyHasher("texts", cfg)
	k.u64(uint64(len(texts)))
	for _, t := range texts {
		k.str(t)
	}
	return k.sum()
}

// countsKey is the cache key of fitLSACounts(docTerms, cfg).
func countsKey(docTerms []map[string]int, cfg LSAConfig) [32]byte {
	k := newKeyHasher("term counts", cfg)
	k.u64(uint64(len(docTerms)))
	var terms []string
	for _, tf := range docTerms {
		terms = terms[:0]
		for t := range tf {
			terms = append(terms, t)
		}
		sort.Strings(terms)
		k.u64(uint64(len(terms)))
		for _, t := range terms {
			k.str(t)
			k.u64(uint64(tf[t]))
		}
	}
	return k.sum()
}

var (
	lsaEnvOnce sync.Once
	lsaEnv     string
)

// lsaEnvironment names what, besides the format and the inputs, decides a
// fit's bits: the toolchain, the analyzer and the linear algebra.
func lsaEnvironment() string {
	lsaEnvOnce.Do(func() {
		mods := map[string]string{"github.com/blevesearch/bleve/v2": "unknown", "gonum.org/v1/gonum": "unknown"}
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, d := range bi.Deps {
				if _, want := mods[d.Path]; want {
					if d.Replace != nil {
						d = d.Replace
					}
					mods[d.Path] = d.Version + " " + d.Sum
				}
			}
		}
		probe := "unknown analyzer"
		if an, err := newAnalyzer(); err == nil {
			h := sha256.New()
			for _, t := range an.terms("The maintainers' Navigation.tabs weren't rendering: running, runs, ran; " +
				"mkdocs-material's search_index.json and CAFÉ façade Ünïcode 42 x86_64 HTTP/2 — 日本語 tokens") {
				fmt.Fprintf(h, "%d:%s,", len(t), t)
			}
			probe = hex.EncodeToString(h.Sum(nil))
		}
		lsaEnv = fmt.Sprintf("%s %s/%s; bleve %s; gonum %s; english analyzer probe %s",
			runtime.Version(), runtime.GOOS, runtime.GOARCH,
			mods["github.com/blevesearch/bleve/v2"], mods["gonum.org/v1/gonum"], probe)
	})
	return lsaEnv
}

// encodeLSA is the cache file of l under key.
func encodeLSA(l *LSA, key [32]byte) []byte {
	terms := make([]string, len(l.vocab))
	for t, i := range l.vocab {
		terms[i] = t
	}
	n := 8 + 4 + 32 + 4 + 4 + 32
	for _, t := range terms {
		n += 4 + len(t)
	}
	n += 8*len(terms) + 8*len(terms)*l.dims
	b := make([]byte, 0, n)
	b = append(b, lsaMagic...)
	b = binary.LittleEndian.AppendUint32(b, lsaModelFormat)
	b = append(b, key[:]...)
	b = binary.LittleEndian.AppendUint32(b, uint32(l.dims))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(terms)))
	for _, t := range terms {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(t)))
		b = append(b, t...)
	}
	for _, v := range l.idf {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	for i := range terms {
		for _, v := range l.proj.RawRowView(i) {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// decodeLSA reads a cache file. It accepts exactly what encodeLSA writes:
// whatever it returns encodes back to b.
func decodeLSA(b []byte) (*LSA, [32]byte, error) {
	var key [32]byte
	const head = 8 + 4 + 32 + 4 + 4
	if len(b) < head+32 {
		return nil, key, fmt.Errorf("truncated: %d bytes", len(b))
	}
	body, sum := b[:len(b)-32], b[len(b)-32:]
	if s := sha256.Sum256(body); !bytes.Equal(s[:], sum) {
		return nil, key, errors.New("checksum mismatch (truncated or corrupted)")
	}
	if string(body[:8]) != lsaMagic {
		return nil, key, errors.New("not an LSA model file")
	}
	if v := binary.LittleEndian.Uint32(body[8:]); v != lsaModelFormat {
		return nil, key, fmt.Errorf("format %d, want %d", v, lsaModelFormat)
	}
	copy(key[:], body[12:44])
	dims := uint64(binary.LittleEndian.Uint32(body[44:]))
	nt := uint64(binary.LittleEndian.Uint32(body[48:]))
	p := body[head:]
	if dims == 0 || nt == 0 {
		return nil, key, fmt.Errorf("empty model: %d dims, %d terms", dims, nt)
	}
	// Each term takes at least 4 + 8 + 8·dims bytes: refuse counts the
	// file cannot hold before allocating for them (divisions: no overflow).
	if dims > uint64(len(p))/8 || nt > uint64(len(p))/(12+8*dims) {
		return nil, key, fmt.Errorf("%d terms × %d dims do not fit in %d bytes", nt, dims, len(p))
	}
	an, err := newAnalyzer()
	if err != nil {
		return nil, key, err
	}
	l := &LSA{an: an, vocab: make(map[string]int, nt), idf: make([]float64, nt), dims: int(dims)}
	prev := ""
	for i := 0; i < int(nt); i++ {
		if len(p) < 4 {
			return nil, key, errors.New("truncated term list")
		}
		n := uint64(binary.LittleEndian.Uint32(p))
		p = p[4:]
		if n > uint64(len(p)) {
			return nil, key, errors.New("truncated term list")
		}
		t := string(p[:n])
		p = p[n:]
		if i > 0 && t <= prev {
			return nil, key, fmt.Errorf("terms out of order at %d (%q after %q)", i, t, prev)
		}
		prev = t
		l.vocab[t] = i
	}
	if uint64(len(p)) != 8*nt*(1+dims) {
		return nil, key, fmt.Errorf("%d bytes of weights, want %d", len(p), 8*nt*(1+dims))
	}
	float := func() (float64, error) {
		v := math.Float64frombits(binary.LittleEndian.Uint64(p))
		p = p[8:]
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, errors.New("a weight is not finite")
		}
		return v, nil
	}
	for i := range l.idf {
		if l.idf[i], err = float(); err != nil {
			return nil, key, err
		}
	}
	data := make([]float64, nt*dims)
	for i := range data {
		if data[i], err = float(); err != nil {
			return nil, key, err
		}
	}
	l.proj = mat.NewDense(int(nt), int(dims), data)
	return l, key, nil
}
