package retrieval

import (
	"context"
	"fmt"
)

// RemoteReranker is a rerank model behind an API: it scores document texts
// against a query, one score per document in order (higher ranks higher; a
// document the model leaves out scores -Inf).
type RemoteReranker interface {
	RerankTexts(ctx context.Context, query string, docs []string) ([]float64, error)
}

// DefaultRemoteDocChars caps each document's text sent to a RemoteReranker.
const DefaultRemoteDocChars = 4000

// Remote makes a Reranker of a RemoteReranker: it sends each candidate's
// text (Document.Text), capped at maxDocChars bytes (0: DefaultRemoteDocChars)
// without cutting a UTF-8 sequence.
func Remote(r RemoteReranker, maxDocChars int) Reranker {
	if maxDocChars <= 0 {
		maxDocChars = DefaultRemoteDocChars
	}
	return remoteReranker{r: r, maxChars: maxDocChars}
}

type remoteReranker struct {
	r        RemoteReranker
	maxChars int
}

func (h remoteReranker) Rerank(ctx context.Context, query string, cands []Candidate) ([]float64, error) {
	if len(cands) == 0 {
		return nil, nil
	}
	docs := make([]string, len(cands))
	for i, c := range cands {
		docs[i] = truncate(c.Doc.Text(), h.maxChars)
	}
	scores, err := h.r.RerankTexts(ctx, query, docs)
	if err != nil {
		return nil, err
	}
	if len(scores) != len(cands) {
		return nil, fmt.Errorf("rerank %d candidates: the remote reranker returned %d scores", len(cands), len(scores))
	}
	return scores, nil
}
