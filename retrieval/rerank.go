package retrieval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
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

// ModelVersion is the version of the reranker model file this build
// writes and reads. Version 1 files did not say what the model was trained
// on (dataset, corpus, judgements, statistics, embedder), so a saved model
// could not be checked against the set it is scored on; they are refused.
const ModelVersion = 2

// LogisticModel is a learned feature reranker: logistic regression over
// standardised features. It is saved as JSON (reranker.json).
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
	// TrainedOn is the rest of the provenance: the set and the feature
	// settings the model was trained with. TrainLogistic leaves it empty;
	// its caller (the ablation) fills it, and Save refuses a model without.
	TrainedOn    TrainingProvenance `json:"trained_on"`
	Examples     int                `json:"examples"`
	Positives    int                `json:"positives"`
	Epochs       int                `json:"epochs"`
	L2           float64            `json:"l2"`
	LearningRate float64            `json:"learning_rate"`
	FinalLoss    float64            `json:"final_loss"`
}

// TrainingProvenance says what a model was trained on. It is an alias of
// an unnamed struct type so that the ablation's result format, which
// imports nothing of retrieval, can declare the identical type and its
// report's copy of the model converts to a LogisticModel.
type TrainingProvenance = struct {
	// Dataset is the judged set's name; CorpusSHA256 the hash of the corpus
	// the features were computed on (Corpus.Hash); QrelsSHA256 the SHA-256
	// of the judgements file.
	Dataset      string `json:"dataset"`
	CorpusSHA256 string `json:"corpus_sha256"`
	QrelsSHA256  string `json:"qrels_sha256"`
	// Judgements is the kind of judgement used as labels ("silver"), Fold
	// the ablation fold the model is ("gold": trained on every silver-only
	// query), Seed the ablation's seed.
	Judgements string `json:"judgements"`
	Fold       string `json:"fold"`
	Seed       uint64 `json:"seed"`
	// Embedder names what made the dense_cosine feature (e.g. "lsa
	// dims=128"); Statistics how the training candidates' corpus
	// statistics were fitted ("held-out": without the training query's
	// issue; "full": on the whole corpus).
	Embedder   string `json:"embedder"`
	Statistics string `json:"statistics"`
	// The candidate settings the features depend on (Service defaults).
	CandidateDepth int     `json:"candidate_depth"`
	RerankDepth    int     `json:"rerank_depth"`
	RRFK           float64 `json:"rrf_k"`
}

// Statistics values of TrainingProvenance.
const (
	StatisticsHeldOut = "held-out"
	StatisticsFull    = "full"
)

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
	m := &LogisticModel{Version: ModelVersion, Features: append([]string(nil), FeatureNames...),
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
			x = x[:nf] // one length for grad, x and the weights: no bounds checks
			p := sigmoid(m.Bias + dotF(m.Weights, x))
			d := ws[i] * (p - ys[i])
			for j, xj := range x {
				grad[j] += d * xj
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
	m.TrainedOnIssues = []int{} // written as [], never null
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

// Validate checks the model is complete and usable with this build's
// features; errors name the JSON field.
func (m *LogisticModel) Validate() error {
	switch {
	case m.Version == 1:
		return errors.New(`field "version": 1 is the format before training provenance (trained_on); retrain with loom-eval ablate --out to write version 2`)
	case m.Version != ModelVersion:
		return fmt.Errorf(`field "version": %d is not supported (want %d)`, m.Version, ModelVersion)
	}
	n := len(FeatureNames)
	if len(m.Features) != n {
		return fmt.Errorf(`field "features": %d features, this build computes %d (%s)`, len(m.Features), n, strings.Join(FeatureNames, ", "))
	}
	for j, f := range m.Features {
		if f != FeatureNames[j] {
			return fmt.Errorf(`field "features[%d]": %q, this build's feature %d is %q (the features do not match)`, j, f, j, FeatureNames[j])
		}
	}
	for _, v := range []struct {
		name string
		xs   []float64
	}{{"mean", m.Mean}, {"std", m.Std}, {"weights", m.Weights}} {
		if len(v.xs) != n {
			return fmt.Errorf(`field %q: %d entries, want %d (one per feature)`, v.name, len(v.xs), n)
		}
		for j, x := range v.xs {
			if math.IsNaN(x) || math.IsInf(x, 0) || (v.name == "std" && x <= 0) {
				return fmt.Errorf(`field "%s[%d]" (%s): %g is not a usable value`, v.name, j, FeatureNames[j], x)
			}
		}
	}
	if len(m.TrainedOnQueries) == 0 {
		return errors.New(`field "trained_on_queries": empty (a model is trained on some queries)`)
	}
	for i, q := range m.TrainedOnQueries {
		if q == "" {
			return fmt.Errorf(`field "trained_on_queries[%d]": empty query id`, i)
		}
	}
	for i, is := range m.TrainedOnIssues {
		if is <= 0 {
			return fmt.Errorf(`field "trained_on_issues[%d]": issue numbers are positive (got %d)`, i, is)
		}
	}
	if !sort.IntsAreSorted(m.TrainedOnIssues) {
		return errors.New(`field "trained_on_issues": must be sorted`)
	}
	p := m.TrainedOn
	for _, f := range []struct{ name, v string }{{"dataset", p.Dataset}, {"judgements", p.Judgements}, {"fold", p.Fold}, {"embedder", p.Embedder}} {
		if strings.TrimSpace(f.v) == "" {
			return fmt.Errorf(`field "trained_on.%s": empty`, f.name)
		}
	}
	for _, f := range []struct{ name, v string }{{"corpus_sha256", p.CorpusSHA256}, {"qrels_sha256", p.QrelsSHA256}} {
		if !isSHA256(f.v) {
			return fmt.Errorf(`field "trained_on.%s": %q is not a SHA-256 in hex`, f.name, f.v)
		}
	}
	if p.Statistics != StatisticsHeldOut && p.Statistics != StatisticsFull {
		return fmt.Errorf(`field "trained_on.statistics": %q is neither %q nor %q`, p.Statistics, StatisticsHeldOut, StatisticsFull)
	}
	if p.CandidateDepth <= 0 || p.RerankDepth <= 0 || !(p.RRFK > 0) {
		return fmt.Errorf(`fields "trained_on.candidate_depth", "rerank_depth", "rrf_k": must be positive (got %d, %d, %g)`, p.CandidateDepth, p.RerankDepth, p.RRFK)
	}
	if m.Examples <= 0 || m.Positives <= 0 || m.Positives >= m.Examples || m.Epochs <= 0 {
		return fmt.Errorf(`fields "examples", "positives", "epochs": need 0 < positives < examples and epochs > 0 (got %d, %d, %d)`, m.Examples, m.Positives, m.Epochs)
	}
	return nil
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// Save writes the model as indented JSON. A model that does not validate
// (one without its provenance) is refused: the file would not load.
func (m *LogisticModel) Save(path string) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("save reranker model %s: %w", path, err)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode reranker model: %w", err)
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// LoadLogisticModel reads a model saved by Save; see DecodeLogisticModel.
func LoadLogisticModel(path string) (*LogisticModel, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read reranker model: %w", err)
	}
	return DecodeLogisticModel(path, data)
}

// DecodeLogisticModel decodes and validates a saved model strictly: every
// field must be present and of its type, no other field may be, and the
// model must validate. Errors name the file (name) and the field.
func DecodeLogisticModel(name string, data []byte) (*LogisticModel, error) {
	fail := func(err error) (*LogisticModel, error) {
		return nil, fmt.Errorf("reranker model %s: %w", name, err)
	}
	var raw json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return fail(jsonError(data, err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return fail(fmt.Errorf("line %d: trailing data after the JSON object", 1+bytes.Count(data[:dec.InputOffset()], []byte("\n"))))
	}
	var top map[string]json.RawMessage
	if !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) || json.Unmarshal(raw, &top) != nil {
		return fail(errors.New("not a JSON object (a reranker model is one object, as loom-eval ablate --out writes reranker.json)"))
	}
	if err := checkKeys("", top, reflect.TypeOf(LogisticModel{})); err != nil {
		return fail(err)
	}
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(top["trained_on"], &inner); err != nil || inner == nil {
		return fail(errors.New(`field "trained_on": not a JSON object`))
	}
	if err := checkKeys("trained_on.", inner, reflect.TypeOf(TrainingProvenance{})); err != nil {
		return fail(err)
	}
	var m LogisticModel
	dec = json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return fail(jsonError(raw, err))
	}
	if err := m.Validate(); err != nil {
		return fail(err)
	}
	return &m, nil
}

// checkKeys reports a key of obj that t has no field for, or a field of t
// that obj lacks, naming it with prefix.
func checkKeys(prefix string, obj map[string]json.RawMessage, t reflect.Type) error {
	known := map[string]bool{}
	var missing []string
	for i := 0; i < t.NumField(); i++ {
		k, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		known[k] = true
		if raw, ok := obj[k]; !ok || string(bytes.TrimSpace(raw)) == "null" {
			missing = append(missing, fmt.Sprintf("%q", prefix+k))
		}
	}
	var unknown []string
	for k := range obj {
		if !known[k] {
			unknown = append(unknown, fmt.Sprintf("%q", prefix+k))
		}
	}
	sort.Strings(unknown)
	switch {
	case len(unknown) > 0:
		return fmt.Errorf("unknown field %s", strings.Join(unknown, ", "))
	case len(missing) > 0:
		return fmt.Errorf("missing field %s", strings.Join(missing, ", "))
	}
	return nil
}

// jsonError names the field of a type error and the line of a syntax
// error.
func jsonError(data []byte, err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return fmt.Errorf("field %q: a JSON %s is not a %s", te.Field, te.Value, te.Type)
	case errors.As(err, &se):
		off := min(int(se.Offset), len(data))
		return fmt.Errorf("line %d: %w", 1+bytes.Count(data[:off], []byte("\n")), err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("line %d: the JSON ends early (truncated file?): %w", 1+bytes.Count(data, []byte("\n")), err)
	}
	return err
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func dotF(a, b []float64) float64 {
	s := 0.0
	b = b[:len(a)]
	for i, x := range a {
		s += x * b[i]
	}
	return s
}
