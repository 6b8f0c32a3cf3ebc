package retrieval

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"
)

// cacheTexts is a small corpus with enough shared vocabulary for a model
// of a few dozen dimensions.
func cacheTexts(n int) []string {
	words := []string{"navigation", "tabs", "header", "palette", "color", "search", "index", "language",
		"code", "block", "annotation", "admonition", "instant", "loading", "dark", "light", "scheme",
		"footer", "social", "blog", "plugin", "privacy", "offline", "tags", "versioning", "icons", "emoji"}
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for j := 0; j < 12; j++ {
			b.WriteString(words[(i*7+j*j*3+j)%len(words)])
			b.WriteByte(' ')
		}
		out[i] = b.String()
	}
	return out
}

var cacheQueries = []string{"dark color palette", "search index language", "blog plugin tags", "nothing known here"}

func embedAll(t testing.TB, l *LSA) [][]float32 {
	t.Helper()
	v, err := l.Embed(context.Background(), cacheQueries)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// warnings is a slog handler that records what it is given.
type warnings struct {
	mu   sync.Mutex
	recs []string
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	w.mu.Lock()
	w.recs = append(w.recs, b.String())
	w.mu.Unlock()
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.recs...)
}

func newTestCache(t *testing.T) (lsaCache, *warnings) {
	w := &warnings{}
	return lsaCache{dir: t.TempDir(), maxFiles: DefaultModelCacheFiles, log: slog.New(w)}, w
}

// cachedFit runs the cache for texts and cfg and reports whether it fitted.
func cachedFit(t *testing.T, c lsaCache, texts []string, cfg LSAConfig) (*LSA, lsaResult) {
	t.Helper()
	l, res, err := c.get(context.Background(), textsKey(texts, cfg), func() (*LSA, error) {
		return FitLSA(context.Background(), texts, cfg)
	})
	if err != nil {
		t.Fatal(err)
	}
	return l, res
}

func TestLSACacheHitEmbedsBitForBitAsAFreshFit(t *testing.T) {
	texts, cfg := cacheTexts(60), LSAConfig{Dims: 16, Seed: 7}
	fresh, err := FitLSA(context.Background(), texts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, w := newTestCache(t)
	first, res := cachedFit(t, c, texts, cfg)
	if res.source != EmbedderFitted || res.file == "" {
		t.Fatalf("first get: %+v, want a fit written to a file", res)
	}
	second, res2 := cachedFit(t, c, texts, cfg)
	if res2.source != EmbedderCached || res2.file != res.file {
		t.Fatalf("second get: %+v, want a hit on %s", res2, res.file)
	}
	if first == second {
		t.Fatal("the hit returned the fitted model itself, not the file's")
	}
	want := embedAll(t, fresh)
	for name, l := range map[string]*LSA{"fitted through the cache": first, "read from the cache": second} {
		if got := embedAll(t, l); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: embeddings differ from a fresh fit", name)
		}
		if l.Dims() != fresh.Dims() || l.VocabSize() != fresh.VocabSize() || !reflect.DeepEqual(l.idf, fresh.idf) ||
			!reflect.DeepEqual(l.proj.RawMatrix().Data, fresh.proj.RawMatrix().Data) {
			t.Errorf("%s: model differs from a fresh fit", name)
		}
	}
	// Every document too, not just the queries.
	a, _ := fresh.Embed(context.Background(), texts)
	b, _ := second.Embed(context.Background(), texts)
	if !reflect.DeepEqual(a, b) {
		t.Error("corpus embeddings differ between a fresh fit and the cached model")
	}
	if ws := w.list(); len(ws) != 0 {
		t.Errorf("warnings on a clean cache: %v", ws)
	}
}

func TestLSACacheMissesWhenAnInputChanges(t *testing.T) {
	texts, cfg := cacheTexts(60), LSAConfig{Dims: 16, Seed: 7}
	c, _ := newTestCache(t)
	cachedFit(t, c, texts, cfg)
	changed := append([]string(nil), texts...)
	changed[10] += " footer"
	reordered := append([]string(nil), texts...)
	reordered[0], reordered[1] = reordered[1], reordered[0]
	with := func(f func(*LSAConfig)) LSAConfig { c := cfg; f(&c); return c }
	cases := map[string]struct {
		texts []string
		cfg   LSAConfig
	}{
		"a document's text":     {changed, cfg},
		"the documents' order":  {reordered, cfg},
		"one document fewer":    {texts[:59], cfg},
		"seed":                  {texts, with(func(c *LSAConfig) { c.Seed = 8 })},
		"dims":                  {texts, with(func(c *LSAConfig) { c.Dims = 15 })},
		"min df":                {texts, with(func(c *LSAConfig) { c.MinDF = 3 })},
		"max df ratio":          {texts, with(func(c *LSAConfig) { c.MaxDFRatio = 0.8 })},
		"max vocab":             {texts, with(func(c *LSAConfig) { c.MaxVocab = 20 })},
		"oversample":            {texts, with(func(c *LSAConfig) { c.Oversample = 5 })},
		"power iterations":      {texts, with(func(c *LSAConfig) { c.PowerIters = 1 })},
		"no power iterations":   {texts, with(func(c *LSAConfig) { c.PowerIters = -1 })},
		"the text split in two": {append([]string{texts[0][:5], texts[0][5:]}, texts[1:]...), cfg},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l, res := cachedFit(t, c, tc.texts, tc.cfg)
			if res.source != EmbedderFitted {
				t.Fatalf("got %+v, want a miss", res)
			}
			fresh, err := FitLSA(context.Background(), tc.texts, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(embedAll(t, l), embedAll(t, fresh)) {
				t.Fatal("the model is not the fresh fit of the changed inputs")
			}
		})
	}
	// Settings equal after defaults are the same key.
	if textsKey(texts, LSAConfig{}) != textsKey(texts, LSAConfig{Dims: 128, MinDF: 2, MaxDFRatio: 0.5, MaxVocab: 30000, Oversample: 10, PowerIters: 3}) {
		t.Error("the key depends on whether defaults were spelled out")
	}
	// The two kinds of input never share a key.
	an, _ := newAnalyzer()
	counts := make([]map[string]int, len(texts))
	for i, s := range texts {
		counts[i] = an.termCounts(s)
	}
	if countsKey(counts, cfg) == textsKey(texts, cfg) {
		t.Error("term counts and texts share a key")
	}
}

func TestLSACacheRefitsAndReplacesAFileItCannotTrust(t *testing.T) {
	texts, cfg := cacheTexts(60), LSAConfig{Dims: 16, Seed: 7}
	key := textsKey(texts, cfg)
	fresh, err := FitLSA(context.Background(), texts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	good := encodeLSA(fresh, key)
	other := encodeLSA(fresh, textsKey(texts, LSAConfig{Dims: 16, Seed: 8}))
	reseal := func(body []byte) []byte { s := sha256.Sum256(body); return append(body, s[:]...) }
	wrongVersion := append([]byte(nil), good[:len(good)-32]...)
	binary.LittleEndian.PutUint32(wrongVersion[8:], lsaModelFormat+1)
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 1
	cases := map[string][]byte{
		"empty":                   {},
		"truncated":               good[:len(good)/2],
		"truncated by one byte":   good[:len(good)-1],
		"one bit flipped":         flipped,
		"other format version":    reseal(wrongVersion),
		"another input's model":   other,
		"not a model":             []byte("hello, this is not a model file at all, but long enough to look like one......"),
		"good with trailing byte": append(append([]byte(nil), good...), 0),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			c, w := newTestCache(t)
			path := filepath.Join(c.dir, hex.EncodeToString(key[:16])+".lsa")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			var fits atomic.Int32
			l, res, err := c.get(context.Background(), key, func() (*LSA, error) {
				fits.Add(1)
				return FitLSA(context.Background(), texts, cfg)
			})
			if err != nil {
				t.Fatal(err)
			}
			if fits.Load() != 1 || res.source != EmbedderFitted {
				t.Fatalf("fits %d, result %+v: want one refit", fits.Load(), res)
			}
			if !reflect.DeepEqual(embedAll(t, l), embedAll(t, fresh)) {
				t.Fatal("the model is not a fresh fit")
			}
			ws := w.list()
			if len(ws) != 1 || !strings.HasPrefix(ws[0], "WARN ") || !strings.Contains(ws[0], path) {
				t.Fatalf("warnings %q, want one naming %s", ws, path)
			}
			if b, _ := os.ReadFile(path); !bytes.Equal(b, good) {
				t.Fatal("the untrusted file was not replaced by the good model")
			}
		})
	}
}

func TestLSACacheConcurrentFillsFitOnceAndNeverReadPartFiles(t *testing.T) {
	texts, cfg := cacheTexts(60), LSAConfig{Dims: 16, Seed: 7}
	want := func() [][]float32 {
		l, err := FitLSA(context.Background(), texts, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return embedAll(t, l)
	}()
	// Within a process, concurrent gets of one key fit once.
	c, w := newTestCache(t)
	var fits atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, _, err := c.get(context.Background(), textsKey(texts, cfg), func() (*LSA, error) {
				fits.Add(1)
				return FitLSA(context.Background(), texts, cfg)
			})
			if err != nil {
				t.Error(err)
				return
			}
			if !reflect.DeepEqual(embedAll(t, l), want) {
				t.Error("a concurrent get returned another model")
			}
		}()
	}
	wg.Wait()
	if fits.Load() != 1 {
		t.Errorf("%d fits for 8 concurrent gets, want 1", fits.Load())
	}
	// Across processes nothing is locked: writers replace the file while
	// readers read it. A reader sees no file or a whole one, never part.
	c2, w2 := newTestCache(t)
	key := textsKey(texts, cfg)
	path := filepath.Join(c2.dir, hex.EncodeToString(key[:16])+".lsa")
	model, err := FitLSA(context.Background(), texts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				if err := c2.store(path, key, model); err != nil {
					t.Error(err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				if l, ok := c2.load(path, key); ok && !reflect.DeepEqual(embedAll(t, l), want) {
					t.Error("a reader got another model")
				}
			}
		}()
	}
	wg.Wait()
	if ws := append(w.list(), w2.list()...); len(ws) != 0 {
		t.Errorf("warnings: %q", ws)
	}
	ents, _ := os.ReadDir(c2.dir)
	if len(ents) != 1 {
		t.Errorf("cache holds %d entries after the writers, want the one model", len(ents))
	}
}

func TestLSACacheKeepsTheMostRecentlyUsedModels(t *testing.T) {
	c, _ := newTestCache(t)
	c.maxFiles = 3
	texts := cacheTexts(30)
	var files []string
	for seed := uint64(1); seed <= 3; seed++ {
		_, res := cachedFit(t, c, texts, LSAConfig{Dims: 4, Seed: seed})
		files = append(files, res.file)
		// Modification times far enough apart for any file system.
		old := time.Now().Add(time.Duration(seed-10) * time.Hour)
		_ = os.Chtimes(res.file, old, old)
	}
	// Using seed 1 again makes it the most recent; a fourth model then
	// pushes out seed 2, the least recently used.
	if _, res := cachedFit(t, c, texts, LSAConfig{Dims: 4, Seed: 1}); res.source != EmbedderCached {
		t.Fatalf("seed 1 again: %+v", res)
	}
	stale := filepath.Join(c.dir, ".lsa-123.tmp")
	if err := os.WriteFile(stale, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	_ = os.Chtimes(stale, old, old)
	cachedFit(t, c, texts, LSAConfig{Dims: 4, Seed: 4})
	for i, f := range files {
		_, err := os.Stat(f)
		if gone := err != nil; gone != (i == 1) {
			t.Errorf("seed %d's model removed: %v, want %v", i+1, gone, i == 1)
		}
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("a temporary file two hours old was kept")
	}
}

func TestLSACacheWithoutADirectoryOnlyFits(t *testing.T) {
	texts, cfg := cacheTexts(30), LSAConfig{Dims: 4}
	for i := 0; i < 2; i++ {
		_, res, err := lsaCache{}.get(context.Background(), textsKey(texts, cfg), func() (*LSA, error) {
			return FitLSA(context.Background(), texts, cfg)
		})
		if err != nil || res.source != EmbedderFitted || res.file != "" {
			t.Fatalf("get %d: %+v, %v", i, res, err)
		}
	}
}

// A change to the fit that leaves lsaModelFormat alone would make cached
// models differ from fresh ones. The digest of a small model's file is
// pinned per format version: when this fails, the fit changed: bump
// lsaModelFormat and record the new digest.
func TestLSACacheFormatIsBumpedWhenTheFitChanges(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("pinned on amd64; other architectures may fuse multiply-adds")
	}
	pinned := map[int]string{1: "c873e584094e5292d19ac361a0b8cd7315964f1d660f8fd0ddfca0b2df00a235"}
	l, err := FitLSA(context.Background(), cacheTexts(60), LSAConfig{Dims: 16, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(encodeLSA(l, [32]byte{}))
	if got := hex.EncodeToString(sum[:]); got != pinned[lsaModelFormat] {
		t.Fatalf("the model file's digest is %s, pinned %s for format %d: if the fit or the encoding changed, bump lsaModelFormat and pin the new digest",
			got, pinned[lsaModelFormat], lsaModelFormat)
	}
}

func FuzzDecodeLSA(f *testing.F) {
	// A hand-made model of two terms in two dimensions: seeds stay small,
	// so minimising what the fuzzer finds is quick.
	an, err := newAnalyzer()
	if err != nil {
		f.Fatal(err)
	}
	l := &LSA{an: an, vocab: map[string]int{"dark": 0, "palett": 1}, idf: []float64{1.5, 2},
		proj: mat.NewDense(2, 2, []float64{0.6, -0.8, 0.8, 0.6}), dims: 2}
	good := encodeLSA(l, [32]byte{1, 2, 3})
	f.Add(good)
	f.Add(good[:len(good)-32])
	f.Add(good[:60])
	f.Add([]byte(lsaMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		// As given, and resealed with a valid checksum so that the parser
		// behind the checksum is explored too.
		s := sha256.Sum256(data)
		for _, b := range [][]byte{data, append(append([]byte(nil), data...), s[:]...)} {
			l, key, err := decodeLSA(b)
			if err != nil {
				continue
			}
			if re := encodeLSA(l, key); !bytes.Equal(re, b) {
				t.Fatalf("decoded, but encodes to other bytes:\n%x\n%x", b, re)
			}
			if r, c := l.proj.Dims(); r != l.VocabSize() || c != l.Dims() || len(l.idf) != r {
				t.Fatalf("decoded an inconsistent model: %d×%d projection, %d terms, %d idf, %d dims", r, c, l.VocabSize(), len(l.idf), l.Dims())
			}
		}
	})
}
