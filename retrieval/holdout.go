package retrieval

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/search"
)

// ErrStaleView is returned by a search on a held-out view after the
// HeldOut it came from has moved on to other issues (or was closed).
var ErrStaleView = errors.New("held-out view is stale: its HeldOut has since held out other issues")

// HoldOutConfig configures (*Service).HoldOut.
type HoldOutConfig struct {
	// Issues are the issues that will be held out: the issues the judged
	// questions come from. They are grouped with their duplicates, and the
	// groups split into folds; Without refuses a corpus issue not covered,
	// since no LSA fit leaves it out.
	Issues []int
	// Folds is how many LSA fits there are, one per fold of Issues'
	// groups (default 5). A fit leaves out its fold's issues only; at the
	// number of groups or more, every group gets its own fit: leave one
	// out.
	Folds int
	// Seed shuffles the issue groups into folds.
	Seed uint64
	// Parallel bounds how many fold fits run at once (default 2).
	Parallel int
}

// HoldOutInfo tells what HoldOut built and how long it took.
type HoldOutInfo struct {
	// Folds is the number of LSA models fitted; 0 when the service's
	// embedder is not fitted on the corpus (a hosted model), so there is
	// nothing to refit. Groups is the number of issue groups they split.
	Folds  int `json:"lsa_folds"`
	Groups int `json:"issue_groups"`
	// FoldIssues is how many issue documents each fold's fit left out.
	FoldIssues []int `json:"lsa_fold_issues,omitempty"`
	// FoldsCached is how many of the Folds models were read from the
	// service's model cache instead of fitted.
	FoldsCached int `json:"lsa_folds_cached,omitempty"`
	// IndexTime is the time to build the private BM25 index, FitTime the
	// wall clock of all fold fits and their corpus embeddings.
	IndexTime time.Duration `json:"index_ns"`
	FitTime   time.Duration `json:"fit_ns"`
}

// HeldOut serves searches whose fitted corpus statistics leave out given
// issues, so that evaluating a question drawn from an issue does not use
// statistics that include that issue's own text.
//
//   - BM25: a private copy of the index over the whole corpus, from which
//     the held-out issue documents (and their duplicates) are deleted before
//     the search and restored after. bleve reads document frequencies and
//     the document count from live documents only, but the field
//     cardinalities it derives the average length from are summed over
//     segments and would count the terms of deleted documents (and of
//     restored ones twice); the view supplies the live documents' count and
//     cardinalities, so a held-out search scores exactly as a fresh index
//     built without those documents would
//     (TestHeldOutBM25IsAFreshIndexWithoutTheIssue).
//   - LSA: refitting per question costs a full fit (about a second here),
//     so the questions' issues are split into folds (duplicates together)
//     and one model is fitted per fold on the corpus without that fold's
//     issues; a question is answered with the model of its issue's fold.
//     Every document, the left-out issues included, is embedded by that
//     model, so the other issues of the fold remain retrievable. A fit
//     without a fold is also a fit on fewer documents, which moves the
//     rankings by itself; the fewer issues a fold holds, the less (with
//     one fit per question, not at all).
//
// A question whose issue is not in the corpus has no statistics to hold
// out and is answered with the service's own model.
//
// A HeldOut is not safe for concurrent use: a view returned by Without is
// valid until the next Without or Close, and searching it after that
// returns ErrStaleView.
type HeldOut struct {
	base *Service
	st   *state // the base service's started state (feats, pos, analyzer, dense)
	idx  *bm25Index
	fan  analysis.Analyzer         // the index mapping's text analyzer
	df   map[string]map[string]int // field → term → documents containing it (whole corpus)
	card map[string]int            // field → distinct terms (whole corpus)

	refit  bool // the service fits LSA on the corpus, so views refit it
	folds  []*denseIndex
	embeds []Embedder
	foldOf map[int]int // issue → fold

	mu      sync.Mutex
	deleted map[string]bool
	gen     atomic.Uint64
	closed  bool
	info    HoldOutInfo
}

// HoldOut builds a HeldOut for a started service: a private BM25 index and,
// when the service fitted its own LSA model, one LSA model per fold.
func (s *Service) HoldOut(ctx context.Context, cfg HoldOutConfig) (*HeldOut, error) {
	st, err := s.ready()
	if err != nil {
		return nil, fmt.Errorf("hold out: %w", err)
	}
	if cfg.Folds < 0 || cfg.Parallel < 0 {
		return nil, fmt.Errorf("hold out: folds and parallel must be >= 0 (got %d, %d)", cfg.Folds, cfg.Parallel)
	}
	if cfg.Folds == 0 {
		cfg.Folds = 5
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = 2
	}
	c := s.cfg.Corpus
	t0 := time.Now()
	// A throwaway index: a batch need not wait for its segment to be
	// persisted (that wait was most of a hold-out's cost), and the merger
	// leaves the big segment alone (its one deleted document is no reason
	// to rewrite it) while keeping the restored documents' small segments
	// few. Scores depend on neither: the view passes its own statistics,
	// and TestHeldOutBM25IsAFreshIndexWithoutTheIssue compares with
	// freshly built indexes.
	idx, err := newTempBM25(ctx, c, map[string]interface{}{"unsafe_batch": true,
		"scorchMergePlanOptions": map[string]interface{}{"FloorSegmentSize": 1, "ReclaimDeletesWeight": 0, "MaxSegmentsPerTier": 1}})
	if err != nil {
		return nil, fmt.Errorf("hold out: %w", err)
	}
	h := &HeldOut{base: s, st: st, idx: idx, df: map[string]map[string]int{}, card: map[string]int{},
		foldOf: map[int]int{}, deleted: map[string]bool{}}
	if err := h.readDictionaries(); err != nil {
		_ = idx.close()
		return nil, fmt.Errorf("hold out: %w", err)
	}
	h.info.IndexTime = time.Since(t0)
	if s.cfg.Embedder == nil {
		h.refit = true
		t1 := time.Now()
		if err := h.fitFolds(ctx, cfg); err != nil {
			_ = idx.close()
			return nil, fmt.Errorf("hold out: %w", err)
		}
		h.info.FitTime = time.Since(t1)
	}
	return h, nil
}

// readDictionaries records each field's document frequencies in the
// freshly built (single-segment) private index: what a held-out view
// subtracts from.
func (h *HeldOut) readDictionaries() error {
	h.fan = h.idx.idx.Mapping().AnalyzerNamed(en.AnalyzerName)
	if h.fan == nil {
		return errors.New("index mapping has no english analyzer")
	}
	for _, f := range bm25Fields {
		fd, err := h.idx.idx.FieldDict(f.Name)
		if err != nil {
			return fmt.Errorf("read %s dictionary: %w", f.Name, err)
		}
		m := map[string]int{}
		for {
			e, err := fd.Next()
			if err != nil {
				fd.Close()
				return fmt.Errorf("read %s dictionary: %w", f.Name, err)
			}
			if e == nil {
				break
			}
			m[e.Term] = int(e.Count)
		}
		if err := fd.Close(); err != nil {
			return fmt.Errorf("read %s dictionary: %w", f.Name, err)
		}
		h.df[f.Name] = m
		h.card[f.Name] = len(m)
	}
	return nil
}

// issueGroups returns the corpus issues connected by the duplicate
// relation to any of issues, one group per connected set, each group
// sorted and the groups ordered by their smallest issue.
func (s *Service) issueGroups(issues []int) [][]int {
	in := map[int]bool{}
	for _, d := range s.cfg.Corpus.Docs() {
		if d.Kind == KindIssue {
			in[d.Issue] = true
		}
	}
	seen := map[int]bool{}
	var groups [][]int
	start := append([]int(nil), issues...)
	sort.Ints(start)
	for _, n := range start {
		if seen[n] {
			continue
		}
		var g []int
		stack := []int{n}
		seen[n] = true
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if in[x] {
				g = append(g, x)
			}
			for _, y := range s.dups[x] {
				if !seen[y] {
					seen[y] = true
					stack = append(stack, y)
				}
			}
		}
		if len(g) > 0 {
			sort.Ints(g)
			groups = append(groups, g)
		}
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i][0] < groups[j][0] })
	return groups
}

func (h *HeldOut) fitFolds(ctx context.Context, cfg HoldOutConfig) error {
	groups := h.base.issueGroups(cfg.Issues)
	h.info.Groups = len(groups)
	if len(groups) == 0 {
		return nil
	}
	k := min(cfg.Folds, len(groups))
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x401d))
	rng.Shuffle(len(groups), func(i, j int) { groups[i], groups[j] = groups[j], groups[i] })
	out := make([]map[int]bool, k)
	for i := range out {
		out[i] = map[int]bool{}
	}
	for i, g := range groups {
		for _, n := range g {
			out[i%k][n] = true
			h.foldOf[n] = i % k
		}
	}
	// Analyse the corpus once for all folds: what Start fits on (the whole
	// text) and what it embeds (the text cut to maxEmbedChars).
	docs := h.base.cfg.Corpus.Docs()
	fitTerms := make([]map[string]int, len(docs))
	embedTerms := make([]map[string]int, len(docs))
	for i, d := range docs {
		t := d.Text()
		fitTerms[i] = h.st.an.termCounts(t)
		if e := truncate(t, maxEmbedChars); e != t {
			embedTerms[i] = h.st.an.termCounts(e)
		} else {
			embedTerms[i] = fitTerms[i]
		}
	}
	h.folds = make([]*denseIndex, k)
	h.embeds = make([]Embedder, k)
	h.info.Folds = k
	h.info.FoldIssues = make([]int, k)
	errs := make([]error, k)
	cached := make([]bool, k)
	// The folds' models go to the service's model cache unless there are
	// more of them than half of what it keeps (leave one out on many
	// queries): those would only push out each other and the service's
	// own model.
	cache := h.base.modelCache()
	if k > cache.maxFiles/2 {
		cache.dir = ""
	}
	sem := make(chan struct{}, cfg.Parallel)
	var wg sync.WaitGroup
	for f := 0; f < k; f++ {
		h.info.FoldIssues[f] = len(out[f])
		wg.Add(1)
		sem <- struct{}{}
		go func(f int) {
			defer wg.Done()
			defer func() { <-sem }()
			var terms []map[string]int
			for i, d := range docs {
				if d.Kind == KindIssue && out[f][d.Issue] {
					continue
				}
				terms = append(terms, fitTerms[i])
			}
			lsa, res, err := cache.get(ctx, countsKey(terms, h.base.cfg.LSA), func() (*LSA, error) {
				return fitLSACounts(ctx, h.st.an, terms, h.base.cfg.LSA)
			})
			cached[f] = res.source == EmbedderCached
			if err != nil {
				errs[f] = fmt.Errorf("fit lsa without fold %d's %d issues: %w", f+1, len(out[f]), err)
				return
			}
			d := &denseIndex{dims: lsa.dims, ids: make([]string, len(docs)), vecs: make([][]float32, len(docs))}
			acc := make([]float64, lsa.dims)
			for i, doc := range docs {
				d.ids[i] = doc.ID
				d.vecs[i] = unit(lsa.embedCounts(embedTerms[i], acc))
			}
			h.folds[f], h.embeds[f] = d, lsa
		}(f)
	}
	wg.Wait()
	for _, c := range cached {
		if c {
			h.info.FoldsCached++
		}
	}
	return errors.Join(errs...)
}

// Info reports what HoldOut built.
func (h *HeldOut) Info() HoldOutInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.info
}

// Fold returns the 1-based LSA fold whose model leaves issue n out, 0 when
// no fold does (n is not a corpus issue, or the embedder is not refitted).
func (h *HeldOut) Fold(n int) int {
	if f, ok := h.foldOf[n]; ok {
		return f + 1
	}
	return 0
}

// Without returns a view of the service whose searches leave the given
// issues, and every issue marked as a duplicate of one of them, out of the
// corpus statistics (and so out of the results). The view is valid until
// the next Without or Close.
func (h *HeldOut) Without(ctx context.Context, issues []int) (*Service, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, fmt.Errorf("hold out: %w", ErrStaleView)
	}
	c := h.base.cfg.Corpus
	want := map[string]bool{}
	fold := -1
	for _, id := range h.base.excludedIDs(issues) {
		d, ok := c.Doc(id)
		if !ok {
			continue
		}
		want[id] = true
		if !h.refit {
			continue // the embedder learns nothing from the corpus
		}
		f, ok := h.foldOf[d.Issue]
		if !ok {
			return nil, fmt.Errorf("hold out %v: issue %d was not among HoldOutConfig.Issues, so no LSA fit leaves it out", issues, d.Issue)
		}
		if fold >= 0 && f != fold {
			// Folds keep duplicate groups together; reaching this is a
			// bug in fitFolds, not bad input.
			return nil, fmt.Errorf("hold out %v: internal error: issues in folds %d and %d", issues, fold+1, f+1)
		}
		fold = f
	}
	b := h.idx.idx.NewBatch()
	for _, id := range sortedKeys(h.deleted) {
		if !want[id] {
			d, _ := c.Doc(id)
			if err := b.Index(id, toBleveDoc(d)); err != nil {
				return nil, fmt.Errorf("hold out: restore %s: %w", id, err)
			}
		}
	}
	for _, id := range sortedKeys(want) {
		if !h.deleted[id] {
			b.Delete(id)
		}
	}
	if b.Size() > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("hold out: %w", err)
		}
		// The view is stale from the moment the index changes.
		h.gen.Add(1)
		if err := h.idx.idx.Batch(b); err != nil {
			return nil, fmt.Errorf("hold out %v: %w", issues, err)
		}
	}
	h.deleted = want
	gen := h.gen.Add(1)
	view := &bm25Index{idx: h.idx.idx, borrowed: true, stats: h.statsWithout(want), check: func() error {
		if h.gen.Load() != gen {
			return ErrStaleView
		}
		return nil
	}}
	st := &state{started: true, bm25: view, dense: h.st.dense, embedder: h.st.embedder, an: h.st.an,
		feats: h.st.feats, pos: h.st.pos, info: h.st.info}
	if fold >= 0 {
		st.dense, st.embedder = h.folds[fold], h.embeds[fold]
	}
	v := *h.base
	v.shared = st
	return &v, nil
}

// statsWithout is the BM25 statistics of the corpus without the given
// documents: the live document count, and per field the number of distinct
// terms still found in a live document (bleve divides the latter by the
// former, rounded up, for the average length).
func (h *HeldOut) statsWithout(ids map[string]bool) *search.BM25Stats {
	st := &search.BM25Stats{DocCount: float64(h.base.cfg.Corpus.Len() - len(ids)), FieldCardinality: map[string]int{}}
	for _, f := range bm25Fields {
		gone := map[string]int{}
		for id := range ids {
			d, _ := h.base.cfg.Corpus.Doc(id)
			seen := map[string]bool{}
			for _, tok := range h.fan.Analyze([]byte(toBleveDoc(d).field(f.Name))) {
				t := string(tok.Term)
				if !seen[t] {
					seen[t] = true
					gone[t]++
				}
			}
		}
		n := h.card[f.Name]
		for t, k := range gone {
			if k >= h.df[f.Name][t] {
				n--
			}
		}
		st.FieldCardinality[f.Name] = n
	}
	return st
}

// Close releases the private index; views become stale.
func (h *HeldOut) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	h.gen.Add(1)
	return h.idx.close()
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
