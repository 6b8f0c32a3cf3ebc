package retrieval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"
)

// indexSchema is folded into the stored hash: changing the mapping or the
// document fields must force a rebuild even if the corpus is unchanged.
const indexSchema = "loomwork-bm25-v1"

// Fields indexed for BM25, with the boosts the bm25 mode applies.
var bm25Fields = []struct {
	Name  string
	Boost float64
}{
	{"title", 1.5},
	{"headings", 2.0},
	{"body", 1.0},
	{"path", 1.0},
}

// bleveDoc is what is handed to bleve for each document.
type bleveDoc struct {
	Title    string `json:"title"`
	Headings string `json:"headings"`
	Body     string `json:"body"`
	Path     string `json:"path"`
	Kind     string `json:"kind"`
}

func newIndexMapping() *mapping.IndexMappingImpl {
	text := func() *mapping.FieldMapping {
		f := bleve.NewTextFieldMapping()
		f.Analyzer = en.AnalyzerName
		f.Store = false
		f.IncludeInAll = false
		f.IncludeTermVectors = false
		f.DocValues = false
		return f
	}
	dm := bleve.NewDocumentStaticMapping()
	for _, f := range bm25Fields {
		dm.AddFieldMappingsAt(f.Name, text())
	}
	kind := bleve.NewKeywordFieldMapping()
	kind.Store = false
	kind.IncludeInAll = false
	dm.AddFieldMappingsAt("kind", kind)

	im := bleve.NewIndexMapping()
	im.ScoringModel = "bm25"
	im.DefaultMapping = dm
	im.DefaultAnalyzer = en.AnalyzerName
	im.StoreDynamic = false
	im.IndexDynamic = false
	im.DocValuesDynamic = false
	return im
}

// bm25Index is a persisted bleve index over a corpus.
type bm25Index struct {
	idx bleve.Index
	// Rebuilt reports whether Open had to (re)build the index.
	rebuilt bool
}

// openBM25 opens the index under dir if it was built from a corpus with the
// same hash, and otherwise builds it there. The hash file is written last,
// so an interrupted build is detected and redone.
func openBM25(ctx context.Context, dir string, c *Corpus, log *slog.Logger) (*bm25Index, error) {
	want := indexSchema + " " + c.Hash()
	idxDir := filepath.Join(dir, "bm25")
	hashFile := filepath.Join(dir, "bm25.hash")
	if got, err := os.ReadFile(hashFile); err == nil && strings.TrimSpace(string(got)) == want {
		idx, err := bleve.Open(idxDir)
		if err == nil {
			if n, err := idx.DocCount(); err == nil && int(n) == c.Len() {
				return &bm25Index{idx: idx}, nil
			}
			_ = idx.Close()
		}
		log.Warn("bm25 index unreadable, rebuilding", "dir", idxDir, "err", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create index dir: %w", err)
	}
	_ = os.Remove(hashFile)
	if err := os.RemoveAll(idxDir); err != nil {
		return nil, fmt.Errorf("remove stale index: %w", err)
	}
	idx, err := bleve.New(idxDir, newIndexMapping())
	if err != nil {
		return nil, fmt.Errorf("create bm25 index %s: %w", idxDir, err)
	}
	if err := indexAll(ctx, idx, c); err != nil {
		_ = idx.Close()
		return nil, err
	}
	if err := writeFileAtomic(hashFile, []byte(want+"\n")); err != nil {
		_ = idx.Close()
		return nil, err
	}
	log.Info("built bm25 index", "dir", idxDir, "docs", c.Len())
	return &bm25Index{idx: idx, rebuilt: true}, nil
}

// newMemBM25 builds an in-memory index (tests, throwaway corpora). It uses
// scorch without a path rather than bleve.NewMemOnly: the latter is the
// older upsidedown engine on a treap, several times slower to query.
func newMemBM25(ctx context.Context, c *Corpus) (*bm25Index, error) {
	idx, err := bleve.NewUsing("", newIndexMapping(), scorch.Name, scorch.Name, nil)
	if err != nil {
		return nil, fmt.Errorf("create in-memory bm25 index: %w", err)
	}
	if err := indexAll(ctx, idx, c); err != nil {
		_ = idx.Close()
		return nil, err
	}
	return &bm25Index{idx: idx, rebuilt: true}, nil
}

func indexAll(ctx context.Context, idx bleve.Index, c *Corpus) error {
	const batchSize = 256
	b := idx.NewBatch()
	for i, d := range c.Docs() {
		if i%batchSize == 0 && ctx.Err() != nil {
			return fmt.Errorf("index corpus: %w", ctx.Err())
		}
		if err := b.Index(d.ID, bleveDoc{Title: d.Title, Headings: d.Headings, Body: d.Body, Path: d.PathText, Kind: string(d.Kind)}); err != nil {
			return fmt.Errorf("index document %s: %w", d.ID, err)
		}
		if b.Size() >= batchSize {
			if err := idx.Batch(b); err != nil {
				return fmt.Errorf("index batch: %w", err)
			}
			b.Reset()
		}
	}
	if b.Size() > 0 {
		if err := idx.Batch(b); err != nil {
			return fmt.Errorf("index batch: %w", err)
		}
	}
	return nil
}

func writeFileAtomic(name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename %s: %w", name, err)
	}
	return nil
}

// search runs a BM25 query over the given fields (all fields when fields is
// nil) and returns up to size hits, never any id in exclude.
func (b *bm25Index) search(ctx context.Context, text string, fields []string, size int, exclude []string) ([]Ranked, error) {
	var disj []query.Query
	for _, f := range bm25Fields {
		if fields != nil && !contains(fields, f.Name) {
			continue
		}
		mq := bleve.NewMatchQuery(text)
		mq.SetField(f.Name)
		mq.SetBoost(f.Boost)
		disj = append(disj, mq)
	}
	if len(disj) == 0 {
		return nil, errors.New("bm25 search: no fields")
	}
	var q query.Query = bleve.NewDisjunctionQuery(disj...)
	if len(exclude) > 0 {
		bq := bleve.NewBooleanQuery()
		bq.AddMust(q)
		bq.AddMustNot(bleve.NewDocIDQuery(exclude))
		q = bq
	}
	req := bleve.NewSearchRequestOptions(q, size, 0, false)
	res, err := b.idx.SearchInContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("bm25 search: %w", err)
	}
	out := make([]Ranked, 0, len(res.Hits))
	for _, h := range res.Hits {
		out = append(out, Ranked{ID: h.ID, Score: h.Score})
	}
	return out, nil
}

func (b *bm25Index) close() error {
	if b == nil || b.idx == nil {
		return nil
	}
	return b.idx.Close()
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
