package rerank_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/gateway/rerank"
	"github.com/loomwork/loomwork/retrieval"
)

const testKey = "rk-test-4c1d8e2a9b7f"

// rerankServer speaks the Cohere/Jina /v1/rerank shape: results best first
// with the documents' indexes, Cohere's {"message"} and Jina's (FastAPI's)
// {"detail"} error bodies, and an OpenAI-style {"error":{…}} for a bad key.
func rerankServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/rerank" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Model           string   `json:"model"`
			Query           string   `json:"query"`
			Documents       []string `json:"documents"`
			TopN            int      `json:"top_n"`
			ReturnDocuments *bool    `json:"return_documents"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("request is not JSON: %v", err)
		}
		if got := r.Header.Get("Authorization"); got != "" && got != "Bearer "+testKey {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":"invalid api token %s","type":"authentication_error","code":401}}`, strings.TrimPrefix(got, "Bearer "))
			return
		}
		switch req.Model {
		case "cohere-bad":
			w.WriteHeader(400)
			io.WriteString(w, `{"message":"invalid request: list of documents must not be empty"}`)
			return
		case "jina-bad":
			w.WriteHeader(422)
			io.WriteString(w, `{"detail":"Model jina-bad not found"}`)
			return
		case "jina-list":
			w.WriteHeader(422)
			io.WriteString(w, `{"detail":[{"loc":["body","top_n"],"msg":"ensure this value is greater than 0","type":"value_error"}]}`)
			return
		case "overloaded":
			w.Header().Set("retry-after", "1")
			w.WriteHeader(503)
			io.WriteString(w, "upstream connect error\n")
			return
		}
		if req.TopN != len(req.Documents) || req.ReturnDocuments == nil || *req.ReturnDocuments {
			t.Errorf("top_n = %d for %d documents, return_documents %v", req.TopN, len(req.Documents), req.ReturnDocuments)
		}
		// Score = number of query words in the document; answer best first;
		// "partial" leaves the last document out.
		type res struct {
			Index int     `json:"index"`
			Score float64 `json:"relevance_score"`
		}
		var out []res
		for i, d := range req.Documents {
			if req.Model == "partial" && i == len(req.Documents)-1 {
				continue
			}
			s := 0.0
			for _, w := range strings.Fields(req.Query) {
				if strings.Contains(d, w) {
					s++
				}
			}
			out = append(out, res{i, s})
		}
		for i := range out {
			for j := i + 1; j < len(out); j++ {
				if out[j].Score > out[i].Score {
					out[i], out[j] = out[j], out[i]
				}
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"id": "r1", "results": out, "meta": map[string]any{"billed_units": map[string]int{"search_units": 1}}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newClient(t *testing.T, baseURL, key, model string) *rerank.Client {
	t.Helper()
	c, err := rerank.New(rerank.Config{BaseURL: baseURL, APIKey: gateway.NewSecret(key), Model: model})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRerankMapsScoresBackToDocuments(t *testing.T) {
	srv := rerankServer(t)
	scores, err := newClient(t, srv.URL+"/v1", testKey, "rerank-v3.5").RerankTexts(context.Background(), "dark toggle", []string{"nothing", "dark toggle", "dark"})
	if err != nil {
		t.Fatal(err)
	}
	if len(scores) != 3 || scores[0] != 0 || scores[1] != 2 || scores[2] != 1 {
		t.Errorf("scores = %v, want [0 2 1]", scores)
	}
	scores, err = newClient(t, srv.URL+"/v1/", "", "partial").RerankTexts(context.Background(), "dark", []string{"dark", "x", "dark mode"})
	if err != nil || scores[0] != 1 || !math.IsInf(scores[2], -1) {
		t.Errorf("a document the endpoint left out: scores %v, err %v; want it at -Inf", scores, err)
	}
}

func TestRerankSurfacesCohereJinaAndOpenAIStyleErrors(t *testing.T) {
	srv := rerankServer(t)
	for _, c := range []struct {
		model, want string
		retryable   bool
	}{
		{"cohere-bad", "status 400: invalid request: list of documents must not be empty", false},
		{"jina-bad", "status 422: Model jina-bad not found", false},
		{"jina-list", `status 422: [{"loc":["body","top_n"],"msg":"ensure this value is greater than 0","type":"value_error"}]`, false},
		{"overloaded", "status 503: upstream connect error", true},
	} {
		_, err := newClient(t, srv.URL+"/v1", "", c.model).RerankTexts(context.Background(), "q", []string{"a"})
		var ae *gateway.APIError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), c.want) || ae.Retryable != c.retryable {
			t.Errorf("%s: error %v (%+v), want a *gateway.APIError with %q, retryable %v", c.model, err, ae, c.want, c.retryable)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "rerank 1 documents: "+strings.TrimPrefix(srv.URL, "http://")+" "+c.model+": ") {
			t.Errorf("error %q does not name the endpoint and model", err)
		}
	}
}

func TestRerankRejectsAnAnswerThatDoesNotMatchTheDocuments(t *testing.T) {
	for body, want := range map[string]string{
		`{"results":[{"index":3,"relevance_score":0.5}]}`:                                   "index 3 out of range",
		`{"results":[{"index":0,"relevance_score":0.5},{"index":0,"relevance_score":0.1}]}`: "repeats index 0",
		`{"results":[{"index":1}]}`:                                                         "result 1 has no relevance_score",
		`{"results":[{"index":1,"relevance_score":"high"}]}`:                                "decode answer",
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
		_, err := newClient(t, srv.URL+"/v1", "", "m").RerankTexts(context.Background(), "q", []string{"a", "b"})
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", body, err, want)
		}
	}
}

func TestRerankConfigNamesTheBadField(t *testing.T) {
	_, err := rerank.New(rerank.Config{BaseURL: "ftp://x", Timeout: -1})
	for _, want := range []string{"base_url", "model: must be set", "timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	if _, err := rerank.New(rerank.Config{Model: "m"}); err == nil || !strings.Contains(err.Error(), "base_url: must be set") {
		t.Errorf("no base_url: err = %v", err)
	}
}

// The key goes in the Authorization header only: an endpoint that echoes
// it back does not put it in the error, and neither the client nor its
// config prints or logs it.
func TestRerankKeepsTheKeyOutOfErrorsAndLogs(t *testing.T) {
	const key = "jina_8e61f0c2d94b4a7fa1c3"
	srv := rerankServer(t)
	cfg := rerank.Config{BaseURL: srv.URL + "/v1", APIKey: gateway.NewSecret(key), Model: "jina-reranker-v2-base-multilingual"}
	c, err := rerank.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.RerankTexts(context.Background(), "q", []string{"a"})
	var ae *gateway.APIError
	if !errors.As(err, &ae) || ae.Status != 401 || ae.Type != "authentication_error" || !strings.Contains(err.Error(), "invalid api token [REDACTED]") {
		t.Fatalf("error = %v, want the 401 with the echoed key redacted", err)
	}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Error("rerank failed", "err", err, "api_error", ae, "client", c)
	slog.New(slog.NewTextHandler(&logs, nil)).Error("rerank failed", "err", err, "config", cfg, "client", c)
	for _, s := range []string{err.Error(), fmt.Sprintf("%+v %#v %v %#v %s %+v", err, cfg, c, c, c, ae), logs.String()} {
		if strings.Contains(s, key) || strings.Contains(s, key[5:]) {
			t.Errorf("the key leaked: %s", s)
		}
	}
}

var _ retrieval.RemoteReranker = (*rerank.Client)(nil)

// Wired as retrieval's hosted reranker, the client scores candidates in
// their order.
func TestClientServesAsRetrievalsRemoteReranker(t *testing.T) {
	srv := rerankServer(t)
	rr := retrieval.Remote(newClient(t, srv.URL+"/v1", testKey, "rerank-v3.5"), 0)
	cands := []retrieval.Candidate{{Doc: retrieval.Document{ID: "a", Body: "nothing"}}, {Doc: retrieval.Document{ID: "b", Body: "dark toggle"}}, {Doc: retrieval.Document{ID: "c", Body: "dark"}}}
	scores, err := rr.Rerank(context.Background(), "dark toggle", cands)
	if err != nil {
		t.Fatal(err)
	}
	if scores[0] != 0 || scores[1] != 2 || scores[2] != 1 {
		t.Errorf("scores = %v, want [0 2 1]", scores)
	}
}
