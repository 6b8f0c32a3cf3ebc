package research

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/retrieval"
	"github.com/loomwork/loomwork/retrieval/judged"
)

// Name is the agent's registered name.
const Name = "research"

// System is the agent's system prompt.
const System = "You answer questions about the project's documentation. Use search_docs to find relevant " +
	"documentation sections and read_doc to read them before answering. Answer briefly, and cite every " +
	"section you rely on by its id in square brackets, e.g. [docs/setup/changing-the-colors.md#primary-color]. " +
	"Cite only what you read."

// Index is what the agent's tools need from the retrieval service.
type Index interface {
	Search(ctx context.Context, q retrieval.Query) (*retrieval.Result, error)
	Doc(ctx context.Context, id string) (retrieval.Document, bool, error)
	// Duplicates maps an issue to issues marked as its duplicates (used by
	// read_doc's exclusion, in both directions).
	Duplicates(ctx context.Context) (map[int][]int, error)
}

// Config configures the agent.
type Config struct {
	// Index answers searches and reads. Required.
	Index Index
	// Mode is the retrieval mode (default bm25: the best first-stage mode on
	// the shipped gold queries, see docs/retrieval.md).
	Mode retrieval.Mode
	// K is the default number of hits a search returns (default 8, max 20).
	K int
	// SnippetChars bounds each hit's snippet (default 160).
	SnippetChars int
	// MaxReadChars bounds the text read_doc returns (default 3200).
	MaxReadChars int
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Index == nil {
		errs = append(errs, errors.New("research: index must be set"))
	}
	if c.Mode != "" {
		if _, err := retrieval.ParseMode(string(c.Mode)); err != nil {
			errs = append(errs, fmt.Errorf("research: mode: %w", err))
		}
	}
	if c.K < 0 || c.K > 20 {
		errs = append(errs, fmt.Errorf("research: k must be in 1..20 (got %d)", c.K))
	}
	if c.SnippetChars < 0 || c.MaxReadChars < 0 {
		errs = append(errs, errors.New("research: snippet_chars and max_read_chars must not be negative"))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = retrieval.ModeBM25
	}
	if c.K == 0 {
		c.K = 8
	}
	if c.SnippetChars == 0 {
		c.SnippetChars = 160
	}
	if c.MaxReadChars == 0 {
		c.MaxReadChars = 3200
	}
	return c
}

// New returns the research agent.
func New(cfg Config) (runtime.Agent, error) {
	if err := cfg.Validate(); err != nil {
		return runtime.Agent{}, err
	}
	cfg = cfg.withDefaults()
	return runtime.Agent{
		Name:      Name,
		System:    System,
		Tools:     []runtime.Tool{searchDocs(cfg), readDoc(cfg)},
		Citations: Citations,
	}, nil
}

// Register adds the research agent to reg.
func Register(reg *runtime.Registry, cfg Config) error {
	a, err := New(cfg)
	if err != nil {
		return err
	}
	return reg.Register(a)
}

// DefaultContext is the context layer the research agent's runs use unless
// told otherwise: all three steps, a budget that holds a search and three
// reads of a long issue-sized question, and tool results above 900 tokens
// shrunk — a search result of 8 hits (~700 tokens) stays whole, so the model
// sees every hit retrieval returned; long, code-heavy sections are cut.
func DefaultContext() runtime.ContextSpec {
	return runtime.ContextSpec{Strategy: "shrink+summarise+pins", Budget: 8000, Tokenizer: runtime.TokenizerO200k, ToolResultMaxTokens: 900}
}

// Attributes are the per-run facts the tools honour (Task.Attributes).
type Attributes struct {
	// ExcludeIssues are issue numbers the run must never retrieve or read:
	// the issue the question came from. Their duplicates are excluded too.
	ExcludeIssues []int `json:"exclude_issues,omitempty"`
}

// TaskAttributes encodes the task attributes excluding issues.
func TaskAttributes(excludeIssues ...int) json.RawMessage {
	if len(excludeIssues) == 0 {
		return nil
	}
	b, _ := json.Marshal(Attributes{ExcludeIssues: excludeIssues})
	return b
}

func decodeAttributes(raw json.RawMessage) (Attributes, error) {
	var a Attributes
	if len(raw) == 0 {
		return a, nil
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, fmt.Errorf("task attributes: %w", err)
	}
	for i, n := range a.ExcludeIssues {
		if n <= 0 {
			return a, fmt.Errorf("task attributes: exclude_issues[%d]: issue numbers are positive (got %d)", i, n)
		}
	}
	return a, nil
}

// EvidenceID is the evidence unit of a document: its page for a
// documentation section (the unit the judged set judges), "issue:N" for an
// issue.
func EvidenceID(id string) string {
	if page, _, ok := strings.Cut(id, "#"); ok {
		return page
	}
	return id
}

var citationRE = regexp.MustCompile(`\[((?:docs/[^\]\s#]+?\.md)(?:#[^\]\s]*)?|issue:\d+)\]`)

// Citations extracts the bracketed document ids an answer cites, as evidence
// ids (pages and issues), in order of first citation.
func Citations(answer string) []string {
	var out []string
	for _, m := range citationRE.FindAllStringSubmatch(answer, -1) {
		if id := EvidenceID(m[1]); !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// hitView is a hit as the model sees it.
type hitView struct {
	Rank    int    `json:"rank"`
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Title   string `json:"title"`
	Section string `json:"section,omitempty"`
	Snippet string `json:"snippet"`
}

// SearchResult is search_docs's observation.
type SearchResult struct {
	Query string    `json:"query"`
	Hits  []hitView `json:"hits"`
}

// ReadResult is read_doc's observation.
type ReadResult struct {
	ID        string   `json:"id"`
	Title     string   `json:"title"`
	Section   string   `json:"section,omitempty"`
	Text      string   `json:"text"`
	Truncated bool     `json:"truncated,omitempty"`
	Pin       []string `json:"_pin"` // the id survives context compaction (contextlayer.PinKey)
}

func searchDocs(cfg Config) runtime.Tool {
	return runtime.Tool{
		Name:        "search_docs",
		Description: "Search the documentation (and closed issues). Returns the top hits with their ids, titles and snippets.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
			"query":{"type":"string","minLength":1,"maxLength":20000,"description":"what to look for"},
			"k":{"type":"integer","minimum":1,"maximum":20,"description":"number of hits (default 8)"}},
			"required":["query"],"additionalProperties":false}`),
		Run: func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
			var args struct {
				Query string `json:"query"`
				K     int    `json:"k"`
			}
			if err := json.Unmarshal(in.Arguments, &args); err != nil {
				return runtime.ToolOutput{}, err
			}
			attrs, err := decodeAttributes(in.TaskAttributes)
			if err != nil {
				return runtime.ToolOutput{}, err
			}
			k := args.K
			if k == 0 {
				k = cfg.K
			}
			// The exclusion is the query's own field: the service removes
			// the issue (and its duplicates) inside every mode.
			res, err := cfg.Index.Search(ctx, retrieval.Query{Text: args.Query, Mode: cfg.Mode, K: min(k+tieMargin, retrieval.MaxK), ExcludeIssues: attrs.ExcludeIssues})
			if err != nil {
				return runtime.ToolOutput{}, err
			}
			out := SearchResult{Query: clip(oneLine(args.Query), 200), Hits: []hitView{}}
			var evidence []string
			for _, h := range topK(res.Hits, k) {
				d, ok, err := cfg.Index.Doc(ctx, h.ID)
				if err != nil {
					return runtime.ToolOutput{}, err
				}
				snippet := ""
				if ok {
					snippet = clip(oneLine(d.Body), cfg.SnippetChars)
				}
				out.Hits = append(out.Hits, hitView{Rank: h.Rank, ID: h.ID, Kind: string(h.Kind), Title: h.Title, Section: h.Headings, Snippet: snippet})
				if e := EvidenceID(h.ID); !slices.Contains(evidence, e) {
					evidence = append(evidence, e)
				}
			}
			b, err := json.Marshal(out)
			if err != nil {
				return runtime.ToolOutput{}, err
			}
			return runtime.ToolOutput{Content: string(b), Documents: evidence}, nil
		},
	}
}

func readDoc(cfg Config) runtime.Tool {
	return runtime.Tool{
		Name:        "read_doc",
		Description: "Read one documentation section or issue by the id search_docs returned.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
			"id":{"type":"string","minLength":1,"maxLength":500,"description":"a document id from search_docs"}},
			"required":["id"],"additionalProperties":false}`),
		Run: func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
			var args struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(in.Arguments, &args); err != nil {
				return runtime.ToolOutput{}, err
			}
			attrs, err := decodeAttributes(in.TaskAttributes)
			if err != nil {
				return runtime.ToolOutput{}, err
			}
			if n, ok := issueNumber(args.ID); ok && len(attrs.ExcludeIssues) > 0 {
				dups, err := cfg.Index.Duplicates(ctx)
				if err != nil {
					return runtime.ToolOutput{}, err
				}
				if excludedClosure(attrs.ExcludeIssues, dups)[n] {
					return runtime.ToolOutput{}, fmt.Errorf("document %s is excluded from this run", args.ID)
				}
			}
			d, ok, err := cfg.Index.Doc(ctx, args.ID)
			if err != nil {
				return runtime.ToolOutput{}, err
			}
			if !ok {
				return runtime.ToolOutput{}, fmt.Errorf("no document with id %q (use an id search_docs returned)", args.ID)
			}
			text := strings.TrimSpace(d.Body)
			out := ReadResult{ID: d.ID, Title: d.Title, Section: d.Headings, Pin: []string{d.ID}}
			if r := []rune(text); len(r) > cfg.MaxReadChars {
				text, out.Truncated = string(r[:cfg.MaxReadChars]), true
			}
			out.Text = text
			b, err := json.Marshal(out)
			if err != nil {
				return runtime.ToolOutput{}, err
			}
			return runtime.ToolOutput{Content: string(b), Documents: []string{EvidenceID(d.ID)}}, nil
		},
	}
}

// tieMargin is how many hits beyond k a search asks for, so that hits with
// equal scores are ordered by id before the cut. bleve breaks score ties by
// internal document number, which differs between two builds of the same
// corpus (measured: the 8th hit of one gold query swapped between fresh
// builds), and a replay must see the recorded ranking.
const tieMargin = 20

// topK orders hits by score, then id, and keeps k, renumbering the ranks.
func topK(hits []retrieval.Hit, k int) []retrieval.Hit {
	hs := slices.Clone(hits)
	slices.SortStableFunc(hs, func(a, b retrieval.Hit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	if len(hs) > k {
		hs = hs[:k]
	}
	for i := range hs {
		hs[i].Rank = i + 1
	}
	return hs
}

func issueNumber(id string) (int, bool) {
	s, ok := strings.CutPrefix(id, "issue:")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// excludedClosure is the issues and everything linked to them by the
// duplicate relation, either direction, transitively (as the service does).
func excludedClosure(issues []int, dups map[int][]int) map[int]bool {
	adj := map[int][]int{}
	for a, bs := range dups {
		for _, b := range bs {
			adj[a] = append(adj[a], b)
			adj[b] = append(adj[b], a)
		}
	}
	seen := map[int]bool{}
	stack := append([]int(nil), issues...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[n] {
			continue
		}
		seen[n] = true
		stack = append(stack, adj[n]...)
	}
	return seen
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// ServiceIndex adapts a started retrieval service (and the duplicate
// relation it was built with) to Index.
type ServiceIndex struct {
	Service *retrieval.Service
	Dups    map[int][]int
}

// Search implements Index.
func (s ServiceIndex) Search(ctx context.Context, q retrieval.Query) (*retrieval.Result, error) {
	return s.Service.Search(ctx, q)
}

// Doc implements Index.
func (s ServiceIndex) Doc(_ context.Context, id string) (retrieval.Document, bool, error) {
	d, ok := s.Service.Corpus().Doc(id)
	return d, ok, nil
}

// Duplicates implements Index.
func (s ServiceIndex) Duplicates(context.Context) (map[int][]int, error) { return s.Dups, nil }

// DatasetIndex opens a judged dataset folder (docs/, issues.jsonl) as an
// Index lazily: the corpus is loaded and the service started on the first
// tool call (a few seconds: BM25 index, LSA fit), so registering the agent
// — e.g. for `loom-eval replay` of other agents' journals — costs nothing.
// A failed start is retried on the next call. Close shuts the service down.
//
// The BM25 index is always persisted: bleve's in-memory index ranks some
// queries differently from a persisted one built from the same corpus
// (measured on the shipped set: 5 of 14 gold queries), and a replay must
// see the ranking the recording saw. Fresh persisted builds agree with each
// other, so recording and replay both use one. The LSA model is kept in
// retrieval.DefaultModelCacheDir() ($LOOMWORK_LSA_CACHE=off: refit on
// every start).
type DatasetIndex struct {
	Dir string
	// CacheDir holds the persisted BM25 index, reused while the corpus is
	// unchanged; "" builds it in a temporary folder that Close removes.
	CacheDir string
	Tracer   trace.Tracer

	mu  sync.Mutex
	idx *ServiceIndex
	tmp string
}

func (d *DatasetIndex) open(ctx context.Context) (*ServiceIndex, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.idx != nil {
		return d.idx, nil
	}
	ds, err := judged.Load(d.Dir, "")
	if err != nil {
		return nil, fmt.Errorf("open research dataset: %w", err)
	}
	corpus, err := ds.Corpus()
	if err != nil {
		return nil, fmt.Errorf("open research dataset: %w", err)
	}
	cache := d.CacheDir
	if cache == "" {
		if d.tmp == "" {
			if d.tmp, err = os.MkdirTemp("", "loomwork-research-index-"); err != nil {
				return nil, fmt.Errorf("open research dataset: %w", err)
			}
		}
		cache = d.tmp
	}
	svc, err := retrieval.New(retrieval.Config{Corpus: corpus, CacheDir: cache, Duplicates: ds.Duplicates(),
		ModelCacheDir: retrieval.DefaultModelCacheDir(),
		Tracer:        d.Tracer, DataSourceID: filepath.Base(filepath.Clean(d.Dir))})
	if err != nil {
		return nil, fmt.Errorf("open research dataset: %w", err)
	}
	if err := svc.Start(ctx); err != nil {
		return nil, fmt.Errorf("open research dataset: %w", err)
	}
	d.idx = &ServiceIndex{Service: svc, Dups: ds.Duplicates()}
	return d.idx, nil
}

// Search implements Index.
func (d *DatasetIndex) Search(ctx context.Context, q retrieval.Query) (*retrieval.Result, error) {
	idx, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	return idx.Search(ctx, q)
}

// Doc implements Index.
func (d *DatasetIndex) Doc(ctx context.Context, id string) (retrieval.Document, bool, error) {
	idx, err := d.open(ctx)
	if err != nil {
		return retrieval.Document{}, false, err
	}
	return idx.Doc(ctx, id)
}

// Service returns the retrieval service over the dataset, starting it on
// first use (the CI recipe's reranker check searches it in rerank mode).
func (d *DatasetIndex) Service(ctx context.Context) (*retrieval.Service, error) {
	idx, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	return idx.Service, nil
}

// Duplicates implements Index.
func (d *DatasetIndex) Duplicates(ctx context.Context) (map[int][]int, error) {
	idx, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	return idx.Dups, nil
}

// Close shuts the service down if it was started.
func (d *DatasetIndex) Close(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var err error
	if d.idx != nil {
		err = d.idx.Service.Shutdown(ctx)
		d.idx = nil
	}
	if d.tmp != "" {
		err = errors.Join(err, os.RemoveAll(d.tmp))
		d.tmp = ""
	}
	return err
}

// IssueTagPrefix marks a case tag naming the issue a research case came
// from ("issue:N"): the run must never retrieve or read issue N.
const IssueTagPrefix = "issue:"

// ExcludedIssues reads the issue:N tags of a case: the issues its runs
// exclude from retrieval (TaskAttributes encodes them for the task). A tag
// with the prefix but no positive N is an error naming the tag.
func ExcludedIssues(tags []string) ([]int, error) {
	var excl []int
	for _, tag := range tags {
		s, ok := strings.CutPrefix(tag, IssueTagPrefix)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("tag %q is not %sN with a positive N", tag, IssueTagPrefix)
		}
		excl = append(excl, n)
	}
	return excl, nil
}
