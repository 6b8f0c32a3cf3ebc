package retrieval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"gonum.org/v1/gonum/mat"
)

// Embedder turns texts into vectors; cosine similarity between them is the
// dense score. Implementations must return one vector per text, in order,
// all of the same dimension.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// LSAConfig configures latent semantic analysis.
type LSAConfig struct {
	// Dims is the number of latent dimensions kept (default 128).
	Dims int
	// MinDF drops terms found in fewer documents (default 2).
	MinDF int
	// MaxDFRatio drops terms found in more than this share of documents
	// (default 0.5).
	MaxDFRatio float64
	// MaxVocab keeps at most this many terms, the most frequent by document
	// frequency (default 30000).
	MaxVocab int
	// Oversample and PowerIters tune the randomized SVD (Halko, Martinsson
	// and Tropp 2011); defaults 10 and 3.
	Oversample int
	PowerIters int
	// Seed makes the random projection, and so the model, reproducible.
	Seed uint64
}

func (c LSAConfig) withDefaults() LSAConfig {
	if c.Dims <= 0 {
		c.Dims = 128
	}
	if c.MinDF <= 0 {
		c.MinDF = 2
	}
	if c.MaxDFRatio <= 0 || c.MaxDFRatio > 1 {
		c.MaxDFRatio = 0.5
	}
	if c.MaxVocab <= 0 {
		c.MaxVocab = 30000
	}
	if c.Oversample <= 0 {
		c.Oversample = 10
	}
	if c.PowerIters < 0 {
		c.PowerIters = 0
	} else if c.PowerIters == 0 {
		c.PowerIters = 3
	}
	return c
}

// LSA is a fitted latent semantic model: TF-IDF (sublinear tf, smoothed idf)
// projected on the top right singular vectors of the corpus matrix.
type LSA struct {
	an    analyzer
	vocab map[string]int
	idf   []float64
	proj  *mat.Dense // vocab × dims
	dims  int
}

var _ Embedder = (*LSA)(nil)

// Dims is the embedding dimension.
func (l *LSA) Dims() int { return l.dims }

// VocabSize is the number of terms kept.
func (l *LSA) VocabSize() int { return len(l.vocab) }

// csr is a sparse row-major matrix.
type csr struct {
	rows, cols int
	ptr        []int
	col        []int
	val        []float64
}

// FitLSA fits an LSA model on texts. It is deterministic for a given seed.
func FitLSA(ctx context.Context, texts []string, cfg LSAConfig) (*LSA, error) {
	if len(texts) < 2 {
		return nil, errors.New("fit lsa: need at least 2 documents")
	}
	an, err := newAnalyzer()
	if err != nil {
		return nil, err
	}
	docTerms := make([]map[string]int, len(texts))
	for i, t := range texts {
		docTerms[i] = an.termCounts(t)
	}
	return fitLSACounts(ctx, an, docTerms, cfg)
}

// termCounts is the analysed term → count map of s, what the LSA model
// reads of a text.
func (a analyzer) termCounts(s string) map[string]int {
	tf := map[string]int{}
	for _, w := range a.terms(s) {
		tf[w]++
	}
	return tf
}

// fitLSACounts fits on already analysed texts (read, not modified), so
// that several fits over subsets of one corpus analyse it once.
func fitLSACounts(ctx context.Context, an analyzer, docTerms []map[string]int, cfg LSAConfig) (*LSA, error) {
	cfg = cfg.withDefaults()
	if len(docTerms) < 2 {
		return nil, errors.New("fit lsa: need at least 2 documents")
	}
	df := map[string]int{}
	for _, tf := range docTerms {
		for w := range tf {
			df[w]++
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fit lsa: %w", err)
	}
	type termDF struct {
		t  string
		df int
	}
	var cand []termDF
	maxDF := int(cfg.MaxDFRatio * float64(len(docTerms)))
	for t, n := range df {
		if n >= cfg.MinDF && n <= maxDF {
			cand = append(cand, termDF{t, n})
		}
	}
	sort.Slice(cand, func(i, j int) bool {
		if cand[i].df != cand[j].df {
			return cand[i].df > cand[j].df
		}
		return cand[i].t < cand[j].t
	})
	if len(cand) > cfg.MaxVocab {
		cand = cand[:cfg.MaxVocab]
	}
	if len(cand) == 0 {
		return nil, errors.New("fit lsa: no term passes the document-frequency limits")
	}
	// Terms in lexical order so the column order does not depend on map order.
	sort.Slice(cand, func(i, j int) bool { return cand[i].t < cand[j].t })
	l := &LSA{an: an, vocab: make(map[string]int, len(cand)), idf: make([]float64, len(cand))}
	n := float64(len(docTerms))
	for i, c := range cand {
		l.vocab[c.t] = i
		l.idf[i] = math.Log((1+n)/(1+float64(c.df))) + 1
	}
	a := csr{rows: len(docTerms), cols: len(cand), ptr: make([]int, 1, len(docTerms)+1)}
	for _, tf := range docTerms {
		row := l.weights(tf)
		for _, e := range row {
			a.col = append(a.col, e.j)
			a.val = append(a.val, e.v)
		}
		a.ptr = append(a.ptr, len(a.col))
	}
	dims := cfg.Dims
	if m := min(a.rows, a.cols) - 1; dims > m {
		dims = m
	}
	if dims < 1 {
		return nil, errors.New("fit lsa: corpus too small for one latent dimension")
	}
	v, err := randomizedRightSV(ctx, a, dims, cfg.Oversample, cfg.PowerIters, cfg.Seed)
	if err != nil {
		return nil, err
	}
	l.proj = v
	l.dims = dims
	return l, nil
}

type entry struct {
	j int
	v float64
}

// weights is the L2-normalised sublinear TF-IDF row of a term-count map.
func (l *LSA) weights(tf map[string]int) []entry {
	row := make([]entry, 0, len(tf))
	for w, c := range tf {
		j, ok := l.vocab[w]
		if !ok {
			continue
		}
		row = append(row, entry{j, (1 + math.Log(float64(c))) * l.idf[j]})
	}
	sort.Slice(row, func(i, k int) bool { return row[i].j < row[k].j })
	// The norm is summed in column order, not map order: summed in map
	// order its last bits, and so every vector's, differed between runs.
	norm := 0.0
	for _, e := range row {
		norm += e.v * e.v
	}
	if norm > 0 {
		norm = math.Sqrt(norm)
		for i := range row {
			row[i].v /= norm
		}
	}
	return row
}

// Embed projects each text into the latent space (unit length; the zero
// vector for a text with no known term).
func (l *LSA) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	acc := make([]float64, l.dims)
	for i, t := range texts {
		if i%64 == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("lsa embed: %w", ctx.Err())
		}
		out[i] = l.embedCounts(l.an.termCounts(t), acc)
	}
	return out, nil
}

// embedCounts projects one analysed text; acc is scratch space of l.dims.
func (l *LSA) embedCounts(tf map[string]int, acc []float64) []float32 {
	clear(acc)
	for _, e := range l.weights(tf) {
		row := l.proj.RawRowView(e.j)
		for k, p := range row {
			acc[k] += e.v * p
		}
	}
	return normalized(acc)
}

func normalized(x []float64) []float32 {
	n := 0.0
	for _, v := range x {
		n += v * v
	}
	out := make([]float32, len(x))
	if n == 0 {
		return out
	}
	n = math.Sqrt(n)
	for i, v := range x {
		out[i] = float32(v / n)
	}
	return out
}

// randomizedRightSV returns the top k right singular vectors (cols × k) of
// the sparse matrix a by randomized range finding with power iterations.
func randomizedRightSV(ctx context.Context, a csr, k, oversample, powerIters int, seed uint64) (*mat.Dense, error) {
	l := k + oversample
	if l > a.rows {
		l = a.rows
	}
	if l > a.cols {
		l = a.cols
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	omega := mat.NewDense(a.cols, l, nil)
	raw := omega.RawMatrix().Data
	for i := range raw {
		raw[i] = rng.NormFloat64()
	}
	y := a.mulDense(omega) // rows × l
	orthonormalize(y)
	for it := 0; it < powerIters; it++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("fit lsa: %w", err)
		}
		z := a.tMulDense(y) // cols × l
		orthonormalize(z)
		y = a.mulDense(z)
		orthonormalize(y)
	}
	bt := a.tMulDense(y) // cols × l = (Qᵀ A)ᵀ
	var svd mat.SVD
	if ok := svd.Factorize(bt, mat.SVDThin); !ok {
		return nil, errors.New("fit lsa: svd did not converge")
	}
	var u mat.Dense
	svd.UTo(&u) // cols × l, columns ordered by singular value, descending
	v := mat.NewDense(a.cols, k, nil)
	v.Copy(u.Slice(0, a.cols, 0, k))
	// Fix each vector's sign (largest-magnitude entry positive) so the model
	// does not depend on the LAPACK routine's sign choices.
	for c := 0; c < k; c++ {
		best, sign := 0.0, 1.0
		for r := 0; r < a.cols; r++ {
			if x := v.At(r, c); math.Abs(x) > best {
				best, sign = math.Abs(x), math.Copysign(1, x)
			}
		}
		if sign < 0 {
			for r := 0; r < a.cols; r++ {
				v.Set(r, c, -v.At(r, c))
			}
		}
	}
	return v, nil
}

// mulDense returns a·d.
func (a csr) mulDense(d *mat.Dense) *mat.Dense {
	_, l := d.Dims()
	out := mat.NewDense(a.rows, l, nil)
	for i := 0; i < a.rows; i++ {
		orow := out.RawRowView(i)
		for p := a.ptr[i]; p < a.ptr[i+1]; p++ {
			drow := d.RawRowView(a.col[p])
			v := a.val[p]
			for c := range orow {
				orow[c] += v * drow[c]
			}
		}
	}
	return out
}

// tMulDense returns aᵀ·d.
func (a csr) tMulDense(d *mat.Dense) *mat.Dense {
	_, l := d.Dims()
	out := mat.NewDense(a.cols, l, nil)
	for i := 0; i < a.rows; i++ {
		drow := d.RawRowView(i)
		for p := a.ptr[i]; p < a.ptr[i+1]; p++ {
			orow := out.RawRowView(a.col[p])
			v := a.val[p]
			for c := range orow {
				orow[c] += v * drow[c]
			}
		}
	}
	return out
}

// orthonormalize replaces the columns of m by an orthonormal basis of their
// span (modified Gram–Schmidt, run twice for numerical stability). A column
// that becomes numerically zero is left as zero.
func orthonormalize(m *mat.Dense) {
	r, c := m.Dims()
	col := make([][]float64, c)
	for j := 0; j < c; j++ {
		col[j] = make([]float64, r)
		mat.Col(col[j], j, m)
	}
	// The loops keep the textbook order of every addition (the model, and
	// so every committed ranking, depends on the exact bits); cj and ci
	// are resliced to one length only so the compiler drops the bounds
	// checks, which made this the most expensive step of a fit.
	for pass := 0; pass < 2; pass++ {
		for j := 0; j < c; j++ {
			cj := col[j][:r]
			for i := 0; i < j; i++ {
				ci := col[i][:r]
				dot := 0.0
				for k, x := range ci {
					dot += x * cj[k]
				}
				for k, x := range ci {
					cj[k] -= dot * x
				}
			}
			n := 0.0
			for _, x := range cj {
				n += x * x
			}
			n = math.Sqrt(n)
			if n < 1e-12 {
				clear(cj)
				continue
			}
			for k := range cj {
				cj[k] /= n
			}
		}
	}
	for j := 0; j < c; j++ {
		m.SetCol(j, col[j])
	}
}
