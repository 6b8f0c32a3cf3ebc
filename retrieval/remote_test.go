package retrieval_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/retrieval"
)

// fakeRemote records what it was sent and answers with scores.
type fakeRemote struct {
	query  string
	docs   []string
	scores []float64
	err    error
}

func (f *fakeRemote) RerankTexts(_ context.Context, query string, docs []string) ([]float64, error) {
	f.query, f.docs = query, docs
	return f.scores, f.err
}

func TestRemoteSendsCappedTextsAndKeepsCandidateOrder(t *testing.T) {
	f := &fakeRemote{scores: []float64{0.1, 0.9, math.Inf(-1)}}
	cands := []retrieval.Candidate{
		{Doc: retrieval.Document{ID: "a", Title: "Dark mode", Body: "Toggle the palette with a switch."}},
		{Doc: retrieval.Document{ID: "b", Title: "Colors", Body: "primary: indigo"}},
		{Doc: retrieval.Document{ID: "c", Title: "Ünïcode", Body: "ééé"}},
	}
	scores, err := retrieval.Remote(f, 8).Rerank(context.Background(), "dark toggle", cands)
	if err != nil {
		t.Fatal(err)
	}
	if f.query != "dark toggle" || len(f.docs) != 3 || f.docs[0] != "Dark mod" || f.docs[1] != "Colors\np" {
		t.Errorf("sent query %q docs %q", f.query, f.docs)
	}
	for i, d := range f.docs {
		if len(d) > 8 || !strings.HasPrefix(cands[i].Doc.Text(), d) || strings.ToValidUTF8(d, "?") != d {
			t.Errorf("doc %d sent as %q: not a whole-rune prefix of at most 8 bytes", i, d)
		}
	}
	if scores[0] != 0.1 || scores[1] != 0.9 || !math.IsInf(scores[2], -1) {
		t.Errorf("scores = %v", scores)
	}

	long := retrieval.Candidate{Doc: retrieval.Document{ID: "l", Body: strings.Repeat("x", 10000)}}
	f.scores = []float64{1}
	if _, err := retrieval.Remote(f, 0).Rerank(context.Background(), "q", []retrieval.Candidate{long}); err != nil || len(f.docs[0]) != retrieval.DefaultRemoteDocChars {
		t.Errorf("default cap: sent %d bytes, err %v", len(f.docs[0]), err)
	}
}

func TestRemoteRefusesAScoreCountThatDoesNotMatch(t *testing.T) {
	f := &fakeRemote{scores: []float64{1}}
	two := []retrieval.Candidate{{Doc: retrieval.Document{ID: "a"}}, {Doc: retrieval.Document{ID: "b"}}}
	if _, err := retrieval.Remote(f, 0).Rerank(context.Background(), "q", two); err == nil || !strings.Contains(err.Error(), "returned 1 scores") {
		t.Errorf("err = %v", err)
	}
	f.err = errors.New("boom")
	if _, err := retrieval.Remote(f, 0).Rerank(context.Background(), "q", two); !errors.Is(err, f.err) {
		t.Errorf("the remote's error is lost: %v", err)
	}
	if s, err := retrieval.Remote(f, 0).Rerank(context.Background(), "q", nil); s != nil || err != nil {
		t.Errorf("no candidates: %v, %v", s, err)
	}
}
