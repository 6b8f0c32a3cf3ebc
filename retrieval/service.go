package retrieval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/loomwork/loomwork/semconv"
)

// Mode is a ranking method.
type Mode string

// The modes a Service offers.
const (
	ModeBM25     Mode = "bm25"
	ModeDense    Mode = "dense"
	ModeRRF      Mode = "rrf"
	ModeWeighted Mode = "weighted"
	ModeRerank   Mode = "rerank"
)

// AllModes lists every mode in report order.
var AllModes = []Mode{ModeBM25, ModeDense, ModeRRF, ModeWeighted, ModeRerank}

// ParseMode checks a mode name.
func ParseMode(s string) (Mode, error) {
	for _, m := range AllModes {
		if string(m) == s {
			return m, nil
		}
	}
	names := make([]string, len(AllModes))
	for i, m := range AllModes {
		names[i] = string(m)
	}
	return "", fmt.Errorf("unknown mode %q (want one of %s)", s, strings.Join(names, ", "))
}

// MaxK bounds Query.K.
const MaxK = 1000

// ErrNoReranker is returned for ModeRerank when the service has no reranker.
var ErrNoReranker = errors.New("rerank mode needs a reranker (none configured)")

// ErrNotStarted is returned by Search before Start succeeded.
var ErrNotStarted = errors.New("retrieval service not started")

// Query is one search. Exclusion is part of the query so that no caller can
// forget it: the listed issues, and every issue marked as a duplicate of one
// of them (either direction), never appear in the result of any mode.
type Query struct {
	Text string `json:"query"`
	Mode Mode   `json:"mode"`
	// K is the number of hits wanted (default 10, at most MaxK).
	K int `json:"k"`
	// ExcludeIssues are issue numbers to leave out, typically the issue the
	// question came from.
	ExcludeIssues []int `json:"exclude_issues,omitempty"`
	// RRFK overrides the service's RRF k for rrf and rerank (0: default).
	RRFK float64 `json:"rrf_k,omitempty"`
	// DenseWeight overrides the service's dense weight in weighted mode
	// (nil: default); the bm25 weight is 1 - DenseWeight.
	DenseWeight *float64 `json:"dense_weight,omitempty"`
}

// Validate reports a query the service cannot run.
func (q Query) Validate() error {
	var errs []error
	if strings.TrimSpace(q.Text) == "" {
		errs = append(errs, errors.New("query: must not be empty"))
	}
	if q.Mode != "" {
		if _, err := ParseMode(string(q.Mode)); err != nil {
			errs = append(errs, fmt.Errorf("mode: %w", err))
		}
	}
	if q.K < 0 || q.K > MaxK {
		errs = append(errs, fmt.Errorf("k: must be between 1 and %d (got %d)", MaxK, q.K))
	}
	if q.RRFK < 0 || math.IsNaN(q.RRFK) || math.IsInf(q.RRFK, 0) {
		errs = append(errs, fmt.Errorf("rrf_k: must be > 0 (got %g)", q.RRFK))
	}
	if q.DenseWeight != nil && (*q.DenseWeight < 0 || *q.DenseWeight > 1 || math.IsNaN(*q.DenseWeight)) {
		errs = append(errs, fmt.Errorf("dense_weight: must be in [0,1] (got %g)", *q.DenseWeight))
	}
	for i, n := range q.ExcludeIssues {
		if n <= 0 {
			errs = append(errs, fmt.Errorf("exclude_issues[%d]: issue numbers are positive (got %d)", i, n))
		}
	}
	return errors.Join(errs...)
}

// Hit is one result.
type Hit struct {
	Rank     int     `json:"rank"`
	ID       string  `json:"id"`
	Kind     Kind    `json:"kind"`
	Page     string  `json:"page,omitempty"`
	Anchor   string  `json:"anchor,omitempty"`
	Issue    int     `json:"issue,omitempty"`
	Title    string  `json:"title"`
	Headings string  `json:"headings,omitempty"`
	Score    float64 `json:"score"`
}

// Result is a search's answer.
type Result struct {
	Mode Mode  `json:"mode"`
	Hits []Hit `json:"hits"`
	// Excluded lists the document ids the query's exclusion removed from
	// consideration (whether or not they would have matched).
	Excluded []string      `json:"excluded,omitempty"`
	Took     time.Duration `json:"-"`
}

// Config configures a Service.
type Config struct {
	Corpus *Corpus
	// CacheDir holds the persisted BM25 index; it is rebuilt only when the
	// corpus hash changes. Empty keeps the index in memory.
	CacheDir string
	// Embedder makes dense vectors; nil fits an LSA model on the corpus.
	Embedder Embedder
	// EmbedderName names Embedder where a saved reranker records what made
	// its dense_cosine feature (e.g. "openai-compatible model=use-lite");
	// the LSA model names itself (see Service.EmbedderName).
	EmbedderName string
	// LSA configures the default embedder.
	LSA LSAConfig
	// ModelCacheDir keeps fitted LSA models (the default embedder's and
	// HeldOut's fold fits), keyed by a digest of everything a fit depends
	// on, so a restart on the same corpus and settings reads the model
	// instead of refitting it (see lsacache.go for the key and the file
	// format). Empty: no cache, every Start fits. DefaultModelCacheDir is
	// what the commands use.
	ModelCacheDir string
	// ModelCacheFiles is how many models ModelCacheDir keeps, the most
	// recently used (default DefaultModelCacheFiles).
	ModelCacheFiles int
	// Reranker serves ModeRerank; nil makes that mode return ErrNoReranker.
	Reranker Reranker
	// Tracer receives one "retrieval" span per search (nil: no spans).
	Tracer trace.Tracer
	// DataSourceID is reported as gen_ai.data_source.id.
	DataSourceID string
	// Duplicates maps an issue to the issues marked as its duplicates; the
	// relation is used in both directions by exclusion.
	Duplicates map[int][]int
	// CandidateDepth is how deep bm25 and dense lists go before fusion
	// (default 100). RerankDepth is how many fused candidates are reranked
	// (default 50).
	CandidateDepth int
	RerankDepth    int
	// RRFK is the default RRF k (default 60). DenseWeight is the default
	// dense weight of weighted fusion (default 0.5).
	RRFK        float64
	DenseWeight *float64
	Logger      *slog.Logger
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.Corpus == nil || c.Corpus.Len() == 0 {
		errs = append(errs, errors.New("corpus: must have documents"))
	}
	if c.CandidateDepth < 0 {
		errs = append(errs, fmt.Errorf("candidate_depth: must be >= 0 (got %d)", c.CandidateDepth))
	}
	if c.RerankDepth < 0 {
		errs = append(errs, fmt.Errorf("rerank_depth: must be >= 0 (got %d)", c.RerankDepth))
	}
	if c.RRFK < 0 {
		errs = append(errs, fmt.Errorf("rrf_k: must be >= 0 (got %g)", c.RRFK))
	}
	if c.ModelCacheFiles < 0 {
		errs = append(errs, fmt.Errorf("model_cache_files: must be >= 0 (got %d)", c.ModelCacheFiles))
	}
	if c.ModelCacheDir != "" && strings.ContainsRune(c.ModelCacheDir, 0) {
		errs = append(errs, errors.New("model_cache_dir: must not contain a NUL byte"))
	}
	if c.DenseWeight != nil && (*c.DenseWeight < 0 || *c.DenseWeight > 1) {
		errs = append(errs, fmt.Errorf("dense_weight: must be in [0,1] (got %g)", *c.DenseWeight))
	}
	for is, dups := range c.Duplicates {
		for _, d := range dups {
			if d <= 0 || is <= 0 {
				errs = append(errs, fmt.Errorf("duplicates: issue numbers are positive (got %d → %d)", is, d))
			}
		}
	}
	return errors.Join(errs...)
}

// Service answers searches over one corpus. It is safe for concurrent use
// once started.
type Service struct {
	cfg    Config
	log    *slog.Logger
	tracer trace.Tracer
	dups   map[int][]int // symmetric closure of cfg.Duplicates

	shared *state
	rr     Reranker
}

// state is what Start builds; copies made by WithReranker share it.
type state struct {
	mu       sync.Mutex
	started  bool
	bm25     *bm25Index
	dense    *denseIndex
	embedder Embedder
	an       analyzer
	feats    []docFeatures // by corpus position
	pos      map[string]int
	// BuildInfo
	info BuildInfo
}

// BuildInfo tells what Start did and how long it took.
type BuildInfo struct {
	IndexRebuilt bool          `json:"index_rebuilt"`
	IndexTime    time.Duration `json:"index_ns"`
	// EmbedderFit is the time to fit the LSA model, or to read it from
	// the model cache; EmbedderSource says which (EmbedderFitted,
	// EmbedderCached, or EmbedderGiven for Config.Embedder), and
	// EmbedderCacheFile names the cache file read or written.
	EmbedderFit       time.Duration `json:"embedder_fit_ns"`
	EmbedderSource    string        `json:"embedder_source"`
	EmbedderCacheFile string        `json:"embedder_cache_file,omitempty"`
	EmbedTime         time.Duration `json:"embed_ns"`
	Docs              int           `json:"docs"`
	CorpusHash        string        `json:"corpus_hash"`
}

// EmbedderSummary says in words where the dense model came from and how
// long that took: "fitted in 4.2s", "read from the model cache in 40ms",
// or "given" for an Embedder in the config.
func (b BuildInfo) EmbedderSummary() string {
	d := b.EmbedderFit.Round(time.Millisecond)
	switch b.EmbedderSource {
	case EmbedderFitted:
		return fmt.Sprintf("fitted in %s", d)
	case EmbedderCached:
		return fmt.Sprintf("read from the model cache in %s", d)
	case EmbedderGiven:
		return "given"
	}
	return fmt.Sprintf("%s in %s", b.EmbedderSource, d)
}

// New validates cfg and returns an unstarted Service (no I/O).
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("retrieval config: %w", err)
	}
	if cfg.CandidateDepth == 0 {
		cfg.CandidateDepth = 100
	}
	if cfg.RerankDepth == 0 {
		cfg.RerankDepth = 50
	}
	if cfg.RRFK == 0 {
		cfg.RRFK = DefaultRRFK
	}
	if cfg.DenseWeight == nil {
		w := 0.5
		cfg.DenseWeight = &w
	}
	if cfg.ModelCacheFiles == 0 {
		cfg.ModelCacheFiles = DefaultModelCacheFiles
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tr := cfg.Tracer
	if tr == nil {
		tr = noop.NewTracerProvider().Tracer("loomwork/retrieval")
	}
	dups := map[int][]int{}
	for a, bs := range cfg.Duplicates {
		for _, b := range bs {
			dups[a] = append(dups[a], b)
			dups[b] = append(dups[b], a)
		}
	}
	return &Service{cfg: cfg, log: log, tracer: tr, dups: dups, shared: &state{}, rr: cfg.Reranker}, nil
}

// Start builds or opens the BM25 index, fits the embedder if needed and
// embeds the corpus.
func (s *Service) Start(ctx context.Context) error {
	st := s.shared
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.started {
		return nil
	}
	c := s.cfg.Corpus
	an, err := newAnalyzer()
	if err != nil {
		return err
	}
	st.an = an
	t0 := time.Now()
	var idx *bm25Index
	if s.cfg.CacheDir == "" {
		idx, err = newMemBM25(ctx, c)
	} else {
		idx, err = openBM25(ctx, s.cfg.CacheDir, c, s.log)
	}
	if err != nil {
		return fmt.Errorf("start retrieval: %w", err)
	}
	st.info = BuildInfo{IndexRebuilt: idx.rebuilt, IndexTime: time.Since(t0), Docs: c.Len(), CorpusHash: c.Hash()}
	emb := s.cfg.Embedder
	st.info.EmbedderSource = EmbedderGiven
	if emb == nil {
		t1 := time.Now()
		texts := make([]string, c.Len())
		for i, d := range c.Docs() {
			texts[i] = d.Text()
		}
		lsa, res, err := s.modelCache().get(ctx, textsKey(texts, s.cfg.LSA), func() (*LSA, error) {
			return FitLSA(ctx, texts, s.cfg.LSA)
		})
		if err != nil {
			_ = idx.close()
			return fmt.Errorf("start retrieval: %w", err)
		}
		emb = lsa
		st.info.EmbedderFit = time.Since(t1)
		st.info.EmbedderSource, st.info.EmbedderCacheFile = res.source, res.file
		s.log.Info("lsa model ready", "source", res.source, "took", st.info.EmbedderFit.Round(time.Millisecond),
			"cache_file", res.file, "dims", lsa.Dims(), "terms", lsa.VocabSize())
	}
	t2 := time.Now()
	dense, err := buildDense(ctx, emb, c)
	if err != nil {
		_ = idx.close()
		return fmt.Errorf("start retrieval: %w", err)
	}
	st.info.EmbedTime = time.Since(t2)
	st.feats = make([]docFeatures, c.Len())
	st.pos = make(map[string]int, c.Len())
	for i, d := range c.Docs() {
		st.feats[i] = newDocFeatures(an, d)
		st.pos[d.ID] = i
	}
	st.bm25, st.dense, st.embedder, st.started = idx, dense, emb, true
	return nil
}

// modelCache is the service's LSA model cache (a no-op without
// Config.ModelCacheDir). Its warnings go to Config.Logger, or to
// slog.Default() when there is none: an unreadable cache file is worth
// seeing even where the service's own logs are discarded.
func (s *Service) modelCache() lsaCache {
	log := s.cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return lsaCache{dir: s.cfg.ModelCacheDir, maxFiles: s.cfg.ModelCacheFiles, log: log}
}

// Shutdown closes the index. It is safe to call without Start and more than
// once.
func (s *Service) Shutdown(context.Context) error {
	st := s.shared
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.started {
		return nil
	}
	st.started = false
	err := st.bm25.close()
	st.bm25 = nil
	if err != nil {
		return fmt.Errorf("close bm25 index: %w", err)
	}
	return nil
}

// Info reports what Start did.
func (s *Service) Info() BuildInfo {
	s.shared.mu.Lock()
	defer s.shared.mu.Unlock()
	return s.shared.info
}

// EmbedderName names what makes the dense vectors: the LSA model with the
// settings that shape it ("lsa dims=128 min_df=2 max_df_ratio=0.5
// max_vocab=30000", dims as fitted), or Config.EmbedderName for an
// Embedder given in the config ("unnamed embedder" when it has none).
func (s *Service) EmbedderName() string {
	if s.cfg.Embedder != nil {
		if s.cfg.EmbedderName != "" {
			return s.cfg.EmbedderName
		}
		return "unnamed embedder"
	}
	c := s.cfg.LSA.withDefaults()
	dims := c.Dims
	if st, err := s.ready(); err == nil {
		if l, ok := st.embedder.(*LSA); ok {
			dims = l.Dims()
		}
	}
	return fmt.Sprintf("lsa dims=%d min_df=%d max_df_ratio=%g max_vocab=%d", dims, c.MinDF, c.MaxDFRatio, c.MaxVocab)
}

// CandidateSettings are the settings rerank candidates, and so the
// reranker's features, depend on.
type CandidateSettings struct {
	CandidateDepth int
	RerankDepth    int
	RRFK           float64
}

// CandidateSettings reports the service's candidate settings.
func (s *Service) CandidateSettings() CandidateSettings {
	return CandidateSettings{CandidateDepth: s.cfg.CandidateDepth, RerankDepth: s.cfg.RerankDepth, RRFK: s.cfg.RRFK}
}

// Corpus returns the service's corpus.
func (s *Service) Corpus() *Corpus { return s.cfg.Corpus }

// WithReranker returns a view of the service that shares its index and
// embeddings but reranks with r (the ablation gives each fold its own
// model this way).
func (s *Service) WithReranker(r Reranker) *Service {
	c := *s
	c.rr = r
	return &c
}

// excludedIDs expands a query's exclusions through the duplicate relation.
func (s *Service) excludedIDs(issues []int) []string {
	seen := map[int]bool{}
	var stack []int
	stack = append(stack, issues...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[n] {
			continue
		}
		seen[n] = true
		stack = append(stack, s.dups[n]...)
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, IssueID(n))
	}
	sort.Strings(out)
	return out
}

func (s *Service) ready() (*state, error) {
	st := s.shared
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.started {
		return nil, ErrNotStarted
	}
	return st, nil
}

// Search runs one query. Each call emits a "retrieval" span.
func (s *Service) Search(ctx context.Context, q Query) (res *Result, err error) {
	if q.Mode == "" {
		q.Mode = ModeRRF
	}
	if q.K == 0 {
		q.K = 10
	}
	ctx, span := s.tracer.Start(ctx, "retrieval", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String(semconv.AttrOperationName, semconv.OpRetrieval),
			attribute.String(semconv.AttrRetrievalQueryText, q.Text),
			attribute.String(semconv.AttrDataSourceID, s.cfg.DataSourceID),
			attribute.String(semconv.AttrRetrievalMode, string(q.Mode)),
			attribute.Int(semconv.AttrRetrievalK, q.K),
		))
	defer func() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		} else {
			ids := make([]string, len(res.Hits))
			for i, h := range res.Hits {
				ids[i] = h.ID
			}
			span.SetAttributes(attribute.StringSlice(semconv.AttrRetrievalDocuments, ids))
			if len(res.Excluded) > 0 {
				span.SetAttributes(attribute.StringSlice(semconv.AttrRetrievalExcluded, res.Excluded))
			}
		}
		span.End()
	}()
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	st, err := s.ready()
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	start := time.Now()
	excl := s.excludedIDs(q.ExcludeIssues)
	ranked, err := s.rank(ctx, st, q, excl)
	if err != nil {
		return nil, fmt.Errorf("search %s: %w", q.Mode, err)
	}
	// Exclusion already happened inside every mode; this check makes a
	// regression there fail loudly instead of leaking.
	exclSet := toSet(excl)
	res = &Result{Mode: q.Mode, Excluded: excl}
	for _, r := range ranked {
		if exclSet[r.ID] {
			return nil, fmt.Errorf("search %s: internal error: excluded document %s reached the result", q.Mode, r.ID)
		}
		if len(res.Hits) == q.K {
			break
		}
		d, _ := s.cfg.Corpus.Doc(r.ID)
		res.Hits = append(res.Hits, Hit{Rank: len(res.Hits) + 1, ID: d.ID, Kind: d.Kind, Page: d.Page, Anchor: d.Anchor,
			Issue: d.Issue, Title: d.Title, Headings: d.Headings, Score: r.Score})
	}
	res.Took = time.Since(start)
	return res, nil
}

func toSet(ids []string) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func (s *Service) rank(ctx context.Context, st *state, q Query, excl []string) ([]Ranked, error) {
	depth := max(s.cfg.CandidateDepth, q.K)
	rrfK := s.cfg.RRFK
	if q.RRFK > 0 {
		rrfK = q.RRFK
	}
	switch q.Mode {
	case ModeBM25:
		return st.bm25.search(ctx, q.Text, nil, q.K, excl)
	case ModeDense:
		qv, err := s.embedQuery(ctx, st, q.Text)
		if err != nil {
			return nil, err
		}
		return st.dense.search(qv, q.K, toSet(excl))
	case ModeRRF, ModeWeighted:
		b, d, err := s.lists(ctx, st, q.Text, depth, excl)
		if err != nil {
			return nil, err
		}
		if q.Mode == ModeRRF {
			return RRF(rrfK, b, d), nil
		}
		w := *s.cfg.DenseWeight
		if q.DenseWeight != nil {
			w = *q.DenseWeight
		}
		return WeightedFusion([]float64{1 - w, w}, b, d), nil
	case ModeRerank:
		if s.rr == nil {
			return nil, ErrNoReranker
		}
		cands, err := s.candidates(ctx, st, q.Text, excl, depth, max(s.cfg.RerankDepth, q.K), rrfK)
		if err != nil {
			return nil, err
		}
		scores, err := s.rr.Rerank(ctx, q.Text, cands)
		if err != nil {
			return nil, err
		}
		if len(scores) != len(cands) {
			return nil, fmt.Errorf("reranker returned %d scores for %d candidates", len(scores), len(cands))
		}
		out := make([]Ranked, len(cands))
		for i, c := range cands {
			out[i] = Ranked{ID: c.Doc.ID, Score: scores[i]}
		}
		sortRanked(out)
		return out, nil
	}
	return nil, fmt.Errorf("unknown mode %q", q.Mode)
}

func (s *Service) embedQuery(ctx context.Context, st *state, text string) ([]float32, error) {
	vs, err := st.embedder.Embed(ctx, []string{truncate(text, maxEmbedChars)})
	if err != nil {
		return nil, fmt.Errorf("embed query: %w", err)
	}
	if len(vs) != 1 {
		return nil, fmt.Errorf("embed query: got %d vectors for 1 text", len(vs))
	}
	return vs[0], nil
}

func (s *Service) lists(ctx context.Context, st *state, text string, depth int, excl []string) (bm, dn []Ranked, err error) {
	bm, err = st.bm25.search(ctx, text, nil, depth, excl)
	if err != nil {
		return nil, nil, err
	}
	qv, err := s.embedQuery(ctx, st, text)
	if err != nil {
		return nil, nil, err
	}
	dn, err = st.dense.search(qv, depth, toSet(excl))
	return bm, dn, err
}

// Candidates returns the rerank candidates for a query with their features,
// honouring the same exclusion as Search. The ablation trains rerankers on
// these.
func (s *Service) Candidates(ctx context.Context, text string, excludeIssues []int) ([]Candidate, error) {
	st, err := s.ready()
	if err != nil {
		return nil, err
	}
	return s.candidates(ctx, st, text, s.excludedIDs(excludeIssues), s.cfg.CandidateDepth, s.cfg.RerankDepth, s.cfg.RRFK)
}
