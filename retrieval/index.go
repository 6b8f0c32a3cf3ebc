package retrieval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/index/scorch/mergeplan"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
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

func toBleveDoc(d Document) bleveDoc {
	return bleveDoc{Title: d.Title, Headings: d.Headings, Body: d.Body, Path: d.PathText, Kind: string(d.Kind)}
}

// field is the text of one of bm25Fields.
func (b bleveDoc) field(name string) string {
	switch name {
	case "title":
		return b.Title
	case "headings":
		return b.Headings
	case "body":
		return b.Body
	case "path":
		return b.Path
	}
	return ""
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
	// tmpDir is removed on close (the "in-memory" index's files).
	tmpDir string
	// stats, when set, replace the corpus statistics bleve would read from
	// the index (document count, field cardinalities): a held-out view's
	// index has documents deleted and restored in extra segments, whose
	// statistics bleve would sum per segment (see HeldOut).
	stats *search.BM25Stats
	// check, when set, is called before every search; a held-out view
	// uses it to refuse searching once the index has moved on.
	check func() error
	// borrowed indexes are closed by their owner, not by close.
	borrowed bool
}

// request adds the index's statistics to a search request.
func (b *bm25Index) request(req *bleve.SearchRequest) (*bleve.SearchRequest, error) {
	if b.check != nil {
		if err := b.check(); err != nil {
			return nil, err
		}
	}
	if b.stats != nil {
		req.PreSearchData = map[string]interface{}{search.BM25PreSearchDataKey: b.stats}
	}
	return req, nil
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

// newMemBM25 builds a throwaway index (tests, corpora without a cache
// dir). It is an on-disk scorch index in a temporary directory removed on
// close, not scorch without a path or bleve.NewMemOnly: both of those rank
// differently from the persisted index (unmerged in-memory segments score
// BM25 from per-segment statistics; NewMemOnly is the older upsidedown
// engine), and a query must return the same list whichever is used
// (TestBM25RankingIsTheSameInMemoryFreshAndReopened).
func newMemBM25(ctx context.Context, c *Corpus) (*bm25Index, error) {
	return newTempBM25(ctx, c, nil)
}

// newTempBM25 is newMemBM25 with scorch settings (kvconfig, nil for the
// defaults).
func newTempBM25(ctx context.Context, c *Corpus, kvconfig map[string]interface{}) (*bm25Index, error) {
	dir, err := os.MkdirTemp("", "loomwork-bm25-")
	if err != nil {
		return nil, fmt.Errorf("create temporary bm25 index dir: %w", err)
	}
	idx, err := bleve.NewUsing(filepath.Join(dir, "bm25"), newIndexMapping(), bleve.Config.DefaultIndexType, bleve.Config.DefaultKVStore, kvconfig)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("create temporary bm25 index: %w", err)
	}
	if err := indexAll(ctx, idx, c); err != nil {
		_ = idx.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return &bm25Index{idx: idx, rebuilt: true, tmpDir: dir}, nil
}

func indexAll(ctx context.Context, idx bleve.Index, c *Corpus) error {
	const batchSize = 256
	b := idx.NewBatch()
	for i, d := range c.Docs() {
		if i%batchSize == 0 && ctx.Err() != nil {
			return fmt.Errorf("index corpus: %w", ctx.Err())
		}
		if err := b.Index(d.ID, toBleveDoc(d)); err != nil {
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
	return mergeToOneSegment(ctx, idx)
}

// mergeToOneSegment merges the index into a single segment before it is
// used. Scores were seen to depend on how background merging had left the
// segments at query time (one ranking in six runs differed), and the
// research agent's committed journals need the same list every time.
func mergeToOneSegment(ctx context.Context, idx bleve.Index) error {
	adv, err := idx.Advanced()
	if err != nil {
		return fmt.Errorf("merge bm25 index: %w", err)
	}
	sc, ok := adv.(*scorch.Scorch)
	if !ok {
		return nil
	}
	if err := sc.ForceMerge(ctx, &mergeplan.SingleSegmentMergePlanOptions); err != nil {
		return fmt.Errorf("merge bm25 index to one segment: %w", err)
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
	// The same query must return the same list from any index of the same
	// corpus, so that journaled runs replay. bleve breaks ties by internal
	// document number, and sums per-field scores in an order that can move
	// the last bits; so fetch a margin beyond size, round scores to 9
	// significant digits, order by (score, id) and cut.
	const margin = 20
	req, err := b.request(bleve.NewSearchRequestOptions(q, size+margin, 0, false))
	if err != nil {
		return nil, fmt.Errorf("bm25 search: %w", err)
	}
	res, err := b.idx.SearchInContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("bm25 search: %w", err)
	}
	out := make([]Ranked, 0, len(res.Hits))
	for _, h := range res.Hits {
		out = append(out, Ranked{ID: h.ID, Score: roundSig(h.Score, 9)})
	}
	sortRanked(out)
	if len(out) > size {
		out = out[:size]
	}
	return out, nil
}

// roundSig rounds x to n significant digits.
func roundSig(x float64, n int) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	p := math.Pow(10, float64(n-1)-math.Floor(math.Log10(math.Abs(x))))
	return math.Round(x*p) / p
}

func (b *bm25Index) close() error {
	if b == nil || b.idx == nil || b.borrowed {
		return nil
	}
	err := b.idx.Close()
	if b.tmpDir != "" {
		err = errors.Join(err, os.RemoveAll(b.tmpDir))
	}
	return err
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
