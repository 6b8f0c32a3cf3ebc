package retrieval

import (
	"context"
	"math"
	"strings"

	"github.com/blevesearch/bleve/v2"
)

// docFeatures is what the reranker's features need from a document,
// computed once at Start.
type docFeatures struct {
	terms     []string // analysed headings + body, in order
	lower     string   // lower-cased full text, for identifier matches
	pathTerms []string // analysed path words (distinct)
}

func newDocFeatures(an analyzer, d Document) docFeatures {
	f := docFeatures{terms: an.terms(d.Headings + "\n" + d.Body), lower: strings.ToLower(d.Text() + " " + d.Page + " " + d.Anchor)}
	seen := map[string]bool{}
	for _, t := range an.terms(d.PathText) {
		if !seen[t] {
			seen[t] = true
			f.pathTerms = append(f.pathTerms, t)
		}
	}
	return f
}

// proximityWindow is the window (in analysed terms) for the proximity
// feature.
const proximityWindow = 16

// proximity is the largest number of distinct query terms inside any window
// of proximityWindow consecutive document terms, divided by
// min(#query terms, window).
func proximity(doc []string, qterms map[string]bool) float64 {
	if len(qterms) == 0 || len(doc) == 0 {
		return 0
	}
	counts := map[string]int{}
	distinct, best := 0, 0
	for i, t := range doc {
		if qterms[t] {
			if counts[t] == 0 {
				distinct++
			}
			counts[t]++
		}
		if j := i - proximityWindow; j >= 0 && qterms[doc[j]] {
			counts[doc[j]]--
			if counts[doc[j]] == 0 {
				distinct--
			}
		}
		best = max(best, distinct)
	}
	return float64(best) / float64(min(len(qterms), proximityWindow))
}

// candidates fuses bm25 and dense by RRF, keeps the top n and computes each
// candidate's features.
func (s *Service) candidates(ctx context.Context, st *state, text string, excl []string, depth, n int, rrfK float64) ([]Candidate, error) {
	bm, dn, err := s.lists(ctx, st, text, depth, excl)
	if err != nil {
		return nil, err
	}
	fused := RRF(rrfK, bm, dn)
	if len(fused) > n {
		fused = fused[:n]
	}
	ids := make([]string, len(fused))
	for i, r := range fused {
		ids[i] = r.ID
	}
	bmScore, bmRank := scoreRank(bm)
	_, dnRank := scoreRank(dn)
	qv, err := s.embedQuery(ctx, st, text)
	if err != nil {
		return nil, err
	}
	cos := st.dense.cosineMap(qv)
	perField := make([]map[string]float64, len(bm25Fields))
	for i, f := range bm25Fields {
		m, err := st.bm25.scoresFor(ctx, text, f.Name, ids)
		if err != nil {
			return nil, err
		}
		perField[i] = m
	}
	qterms := map[string]bool{}
	for _, t := range st.an.terms(text) {
		qterms[t] = true
	}
	idents := identifiers(text)
	maxOf := func(m map[string]float64) float64 {
		x := 0.0
		for _, id := range ids {
			x = math.Max(x, m[id])
		}
		if x == 0 {
			return 1
		}
		return x
	}
	bmMax := maxOf(bmScore)
	fieldMax := make([]float64, len(perField))
	for i, m := range perField {
		fieldMax[i] = maxOf(m)
	}
	out := make([]Candidate, len(fused))
	for i, r := range fused {
		p := st.pos[r.ID]
		d := s.cfg.Corpus.Docs()[p]
		df := st.feats[p]
		f := make([]float64, 0, len(FeatureNames))
		f = append(f, bmScore[r.ID]/bmMax)
		for j, m := range perField {
			f = append(f, m[r.ID]/fieldMax[j])
		}
		f = append(f, cos[r.ID], r.Score*rrfK, recip(bmRank[r.ID]), recip(dnRank[r.ID]), proximity(df.terms, qterms))
		idm := 0.0
		if len(idents) > 0 {
			hit := 0
			for _, id := range idents {
				if strings.Contains(df.lower, id) {
					hit++
				}
			}
			idm = float64(hit) / float64(len(idents))
		}
		po := 0.0
		if len(df.pathTerms) > 0 {
			hit := 0
			for _, t := range df.pathTerms {
				if qterms[t] {
					hit++
				}
			}
			po = float64(hit) / float64(len(df.pathTerms))
		}
		isIssue, intro := 0.0, 0.0
		if d.Kind == KindIssue {
			isIssue = 1
		} else if d.Anchor == "" || !strings.Contains(d.Headings, " > ") {
			intro = 1
		}
		f = append(f, idm, po, isIssue, intro, math.Log1p(float64(len(df.terms))))
		out[i] = Candidate{Doc: d, Features: f}
	}
	return out, nil
}

func recip(rank int) float64 {
	if rank <= 0 {
		return 0
	}
	return 1 / float64(rank)
}

func scoreRank(rs []Ranked) (map[string]float64, map[string]int) {
	sc := make(map[string]float64, len(rs))
	rk := make(map[string]int, len(rs))
	for i, r := range rs {
		if _, ok := rk[r.ID]; !ok {
			sc[r.ID] = r.Score
			rk[r.ID] = i + 1
		}
	}
	return sc, rk
}

// scoresFor returns the BM25 score of text on one field for each of ids
// (absent ids scored 0).
func (b *bm25Index) scoresFor(ctx context.Context, text, field string, ids []string) (map[string]float64, error) {
	out := map[string]float64{}
	if len(ids) == 0 {
		return out, nil
	}
	mq := bleve.NewMatchQuery(text)
	mq.SetField(field)
	bq := bleve.NewBooleanQuery()
	bq.AddMust(mq)
	bq.AddFilter(bleve.NewDocIDQuery(ids))
	req, err := b.request(bleve.NewSearchRequestOptions(bq, len(ids), 0, false))
	if err != nil {
		return nil, err
	}
	res, err := b.idx.SearchInContext(ctx, req)
	if err != nil {
		return nil, err
	}
	// Rounded like search's scores, for the same reason: bleve sums a
	// document's per-term scores in an order that depends on the index's
	// segments, which moves the last bits (a held-out view's index is in
	// several segments; see HeldOut).
	for _, h := range res.Hits {
		out[h.ID] = roundSig(h.Score, 9)
	}
	return out, nil
}
