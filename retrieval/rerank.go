package retrieval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
)

// Candidate is a document offered to a reranker, with the features the
// service computed for it against the query.
type Candidate struct {
	Doc      Document
	Features []float64
}

// Reranker scores candidates for a query; a higher score ranks higher. It
// returns one score per candidate, in order.
type Reranker interface {
	Rerank(ctx context.Context, query string, cands []Candidate) ([]float64, error)
}

// FeatureNames lists the reranker features in the order of
// Candidate.Features. BM25 scores are divided by the best candidate's score
// for the same query, so they are comparable across queries.
var FeatureNames = []string{
	"bm25",             // all-field BM25 (normalised)
	"bm25_title",       // BM25 on the page title
	"bm25_headings",    // BM25 on the heading trail
	"bm25_body",        // BM25 on the body
	"bm25_path",        // BM25 on the URL path words
	"dense_cosine",     // cosine between query and document embeddings
	"rrf",              // RRF score of bm25 and dense (× k, so 1 at rank 1 of one list)
	"bm25_rr",          // 1/rank in the bm25 list (0 if absent)
	"dense_rr",         // 1/rank in the dense list (0 if absent)
	"proximity",        // most distinct query terms inside one 16-term window, / min(#terms, 16)
	"identifier_match", // share of the query's identifiers (config keys, file names) found verbatim
	"path_overlap",     // share of the page's path words that occur in the query
	"is_issue",         // 1 for an issue document
	"is_page_intro",    // 1 for a page's first section
	"log_length",       // log(1 + terms in the document)
}

// LogisticModel is a learned feature reranker: logistic regression over
// standardised features. It is saved as JSON.
type LogisticModel struct {
	Version  int       `json:"version"`
	Features []string  `json:"features"`
	Mean     []float64 `json:"mean"`
	Std      []float64 `json:"std"`
	Weights  []float64 `json:"weights"`
	Bias     float64   `json:"bias"`
	// Training provenance: which judged queries (and so which issues) the
	// model has seen. An evaluation must never score one of these.
	TrainedOnQueries []string `json:"trained_on_queries"`
	TrainedOnIssues  []int    `json:"trained_on_issues"`
	Examples         int      `json:"examples"`
	Positives        int      `json:"positives"`
	Epochs           int      `json:"epochs"`
	L2               float64  `json:"l2"`
	LearningRate     float64  `json:"learning_rate"`
	FinalLoss        float64  `json:"final_loss"`
}

var _ Reranker = (*LogisticModel)(nil)

// Example is one (query, candidate) pair with its label.
type Example struct {
	QueryID  string
	Issue    int
	Features []float64
	Label    bool
}

// TrainConfig tunes TrainLogistic.
type TrainConfig struct {
	Epochs       int     // full-batch gradient steps (default 3000)
	LearningRate float64 // default 0.2
	L2           float64 // ridge penalty (default 1e-3)
}

// TrainLogistic fits a class-balanced logistic regression by full-batch
// gradient descent. It has no randomness: the same examples give the same
// model.
func TrainLogistic(examples []Example, cfg TrainConfig) (*LogisticModel, error) {
	if cfg.Epochs <= 0 {
		cfg.Epochs = 3000
	}
	if cfg.LearningRate <= 0 {
		cfg.LearningRate = 0.2
	}
	if cfg.L2 < 0 {
		return nil, fmt.Errorf("train reranker: l2 must be >= 0 (got %g)", cfg.L2)
	} else if cfg.L2 == 0 {
		cfg.L2 = 1e-3
	}
	if len(examples) == 0 {
		return nil, errors.New("train reranker: no examples")
	}
	nf := len(FeatureNames)
	pos := 0
	qs := map[string]bool{}
	issues := map[int]bool{}
	for i, e := range examples {
		if len(e.Features) != nf {
			return nil, fmt.Errorf("train reranker: example %d has %d features, want %d", i, len(e.Features), nf)
		}
		if e.Label {
			pos++
		}
		qs[e.QueryID] = true
		if e.Issue != 0 {
			issues[e.Issue] = true
		}
	}
	if pos == 0 || pos == len(examples) {
		return nil, fmt.Errorf("train reranker: need both labels (%d positives of %d examples)", pos, len(examples))
	}
	m := &LogisticModel{Version: 1, Features: append([]string(nil), FeatureNames...),
		Mean: make([]float64, nf), Std: make([]float64, nf), Weights: make([]float64, nf),
		Examples: len(examples), Positives: pos, Epochs: cfg.Epochs, L2: cfg.L2, LearningRate: cfg.LearningRate}
	for _, e := range examples {
		for j, x := range e.Features {
			m.Mean[j] += x
		}
	}
	for j := range m.Mean {
		m.Mean[j] /= float64(len(examples))
	}
	for _, e := range examples {
		for j, x := range e.Features {
			d := x - m.Mean[j]
			m.Std[j] += d * d
		}
	}
	for j := range m.Std {
		m.Std[j] = math.Sqrt(m.Std[j] / float64(len(examples)))
		if m.Std[j] < 1e-9 {
			m.Std[j] = 1
		}
	}
	xs := make([][]float64, len(examples))
	ys := make([]float64, len(examples))
	ws := make([]float64, len(examples))
	wPos := float64(len(examples)) / (2 * float64(pos))
	wNeg := float64(len(examples)) / (2 * float64(len(examples)-pos))
	for i, e := range examples {
		xs[i] = m.standardize(e.Features)
		if e.Label {
			ys[i], ws[i] = 1, wPos
		} else {
			ws[i] = wNeg
		}
	}
	grad := make([]float64, nf)
	n := float64(len(examples))
	for epoch := 0; epoch < cfg.Epochs; epoch++ {
		clear(grad)
		gb, loss := 0.0, 0.0
		// Only the last epoch's loss is kept, and the loss does not feed
		// the update: its two logarithms per example were a third of the
		// training time.
		last := epoch == cfg.Epochs-1
		for i, x := range xs {
			p := sigmoid(m.Bias + dotF(m.Weights, x))
			d := ws[i] * (p - ys[i])
			for j := range grad {
				grad[j] += d * x[j]
			}
			gb += d
			if last {
				loss -= ws[i] * (ys[i]*math.Log(p+1e-12) + (1-ys[i])*math.Log(1-p+1e-12))
			}
		}
		for j := range m.Weights {
			m.Weights[j] -= cfg.LearningRate * (grad[j]/n + cfg.L2*m.Weights[j])
		}
		m.Bias -= cfg.LearningRate * gb / n
		if last {
			m.FinalLoss = loss / n
		}
	}
	for q := range qs {
		m.TrainedOnQueries = append(m.TrainedOnQueries, q)
	}
	sort.Strings(m.TrainedOnQueries)
	for is := range issues {
		m.TrainedOnIssues = append(m.TrainedOnIssues, is)
	}
	sort.Ints(m.TrainedOnIssues)
	return m, nil
}

func (m *LogisticModel) standardize(f []float64) []float64 {
	out := make([]float64, len(f))
	for j, x := range f {
		out[j] = (x - m.Mean[j]) / m.Std[j]
	}
	return out
}

// Score is the model's probability that the candidate is relevant.
func (m *LogisticModel) Score(features []float64) float64 {
	return sigmoid(m.Bias + dotF(m.Weights, m.standardize(features)))
}

// Rerank scores candidates by Score.
func (m *LogisticModel) Rerank(_ context.Context, _ string, cands []Candidate) ([]float64, error) {
	out := make([]float64, len(cands))
	for i, c := range cands {
		if len(c.Features) != len(m.Weights) {
			return nil, fmt.Errorf("rerank: candidate %s has %d features, model wants %d", c.Doc.ID, len(c.Features), len(m.Weights))
		}
		out[i] = m.Score(c.Features)
	}
	return out, nil
}

// HasSeenIssue reports whether the model was trained on a query of issue n.
func (m *LogisticModel) HasSeenIssue(n int) bool {
	i := sort.SearchInts(m.TrainedOnIssues, n)
	return i < len(m.TrainedOnIssues) && m.TrainedOnIssues[i] == n
}

// Validate checks the model is usable with this build's features.
func (m *LogisticModel) Validate() error {
	if m.Version != 1 {
		return fmt.Errorf("version %d is not supported (want 1)", m.Version)
	}
	if strings.Join(m.Features, ",") != strings.Join(FeatureNames, ",") {
		return fmt.Errorf("features %v do not match this build's %v", m.Features, FeatureNames)
	}
	n := len(FeatureNames)
	if len(m.Mean) != n || len(m.Std) != n || len(m.Weights) != n {
		return fmt.Errorf("mean/std/weights must have %d entries", n)
	}
	for j := 0; j < n; j++ {
		if m.Std[j] <= 0 || math.IsNaN(m.Std[j]) || math.IsNaN(m.Weights[j]) || math.IsNaN(m.Mean[j]) {
			return fmt.Errorf("feature %s has an invalid mean/std/weight", FeatureNames[j])
		}
	}
	if !sort.IntsAreSorted(m.TrainedOnIssues) {
		return errors.New("trained_on_issues must be sorted")
	}
	return nil
}

// Save writes the model as indented JSON.
func (m *LogisticModel) Save(path string) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode reranker model: %w", err)
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// LoadLogisticModel reads and validates a model saved by Save.
func LoadLogisticModel(path string) (*LogisticModel, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read reranker model: %w", err)
	}
	var m LogisticModel
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decode reranker model %s: %w", path, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("reranker model %s: %w", path, err)
	}
	return &m, nil
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func dotF(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
