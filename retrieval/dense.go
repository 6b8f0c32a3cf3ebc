package retrieval

import (
	"context"
	"fmt"
)

// denseIndex holds one unit vector per document and ranks by cosine.
type denseIndex struct {
	ids  []string
	vecs [][]float32
	dims int
}

// embedBatch is how many documents go to the embedder per call; it keeps
// request bodies of hosted embedders reasonable.
const embedBatch = 64

// maxEmbedChars caps the text sent per document (hosted models have token
// limits; LSA does not care).
const maxEmbedChars = 6000

func buildDense(ctx context.Context, e Embedder, c *Corpus) (*denseIndex, error) {
	d := &denseIndex{}
	docs := c.Docs()
	for start := 0; start < len(docs); start += embedBatch {
		end := min(start+embedBatch, len(docs))
		texts := make([]string, 0, end-start)
		for _, doc := range docs[start:end] {
			texts = append(texts, truncate(doc.Text(), maxEmbedChars))
		}
		vs, err := e.Embed(ctx, texts)
		if err != nil {
			return nil, fmt.Errorf("embed documents %d–%d: %w", start, end-1, err)
		}
		if len(vs) != len(texts) {
			return nil, fmt.Errorf("embed documents %d–%d: got %d vectors for %d texts", start, end-1, len(vs), len(texts))
		}
		for i, v := range vs {
			if d.dims == 0 {
				d.dims = len(v)
			}
			if len(v) != d.dims || d.dims == 0 {
				return nil, fmt.Errorf("embed document %s: dimension %d, want %d", docs[start+i].ID, len(v), d.dims)
			}
			d.ids = append(d.ids, docs[start+i].ID)
			d.vecs = append(d.vecs, unit(v))
		}
	}
	return d, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Do not cut a UTF-8 sequence in half.
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

func unit(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return v
	}
	out := make([]float32, len(v))
	inv := 1 / sqrt(n)
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

func dot(a, b []float32) float64 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return float64(s)
}

// search returns the size documents most similar to q, never one in exclude.
func (d *denseIndex) search(q []float32, size int, exclude map[string]bool) ([]Ranked, error) {
	if len(q) != d.dims {
		return nil, fmt.Errorf("dense search: query dimension %d, index dimension %d", len(q), d.dims)
	}
	q = unit(q)
	all := make([]Ranked, 0, len(d.ids))
	for i, v := range d.vecs {
		if exclude[d.ids[i]] {
			continue
		}
		all = append(all, Ranked{ID: d.ids[i], Score: dot(q, v)})
	}
	sortRanked(all)
	if len(all) > size {
		all = all[:size]
	}
	return all, nil
}

// cosineMap returns the cosine of q with every document, by id.
func (d *denseIndex) cosineMap(q []float32) map[string]float64 {
	q = unit(q)
	m := make(map[string]float64, len(d.ids))
	for i, v := range d.vecs {
		m[d.ids[i]] = dot(q, v)
	}
	return m
}
