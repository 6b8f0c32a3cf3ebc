package retrieval

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// embeddingsServer speaks OpenAI's /v1/embeddings shape: it answers in
// reverse index order (clients must sort by "index"), and with OpenAI's
// error object for a bad model.
func embeddingsServer(t *testing.T) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer sk-test" {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided: sk-wrong.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
			return
		}
		var req struct {
			Model          string   `json:"model"`
			Input          []string `json:"input"`
			EncodingFormat string   `json:"encoding_format"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("request is not JSON: %v", err)
		}
		if req.Model != "text-embedding-3-small" {
			w.WriteHeader(404)
			io.WriteString(w, `{"error":{"message":"The model `+"`"+req.Model+"`"+` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)
			return
		}
		if req.EncodingFormat != "float" {
			t.Errorf("encoding_format = %q, want float", req.EncodingFormat)
		}
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var data []item
		for i := len(req.Input) - 1; i >= 0; i-- {
			data = append(data, item{"embedding", i, []float32{float32(len(req.Input[i])), float32(i), 1}})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model,
			"usage": map[string]int{"prompt_tokens": 5, "total_tokens": 5}})
	}))
}

func TestOpenAIEmbeddingsReturnsVectorsInInputOrder(t *testing.T) {
	srv := embeddingsServer(t)
	defer srv.Close()
	e, err := NewOpenAIEmbeddings(OpenAIEmbeddingsConfig{BaseURL: srv.URL + "/v1", APIKey: "sk-test", Model: "text-embedding-3-small"})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := e.Embed(context.Background(), []string{"a", "bbb", "cc"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float32{1, 3, 2} {
		if vs[i][0] != want || vs[i][1] != float32(i) {
			t.Errorf("vector %d = %v, want length %v at index %d", i, vs[i], want, i)
		}
	}
}

func TestOpenAIEmbeddingsSurfacesTheAPIErrorMessage(t *testing.T) {
	srv := embeddingsServer(t)
	defer srv.Close()
	for _, c := range []struct{ key, model, want string }{
		{"sk-wrong", "text-embedding-3-small", "status 401 invalid_request_error (invalid_api_key): Incorrect API key provided"},
		{"sk-test", "nope", "status 404 invalid_request_error (model_not_found): The model `nope` does not exist"},
	} {
		e, _ := NewOpenAIEmbeddings(OpenAIEmbeddingsConfig{BaseURL: srv.URL + "/v1", APIKey: c.key, Model: c.model})
		_, err := e.Embed(context.Background(), []string{"x"})
		var apiErr *APIError
		if !errors.As(err, &apiErr) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error = %v, want an APIError containing %q", err, c.want)
		}
	}
}

func TestOpenAIEmbeddingsRejectsAnAnswerMissingAnIndex(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1,2]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`)
	}))
	defer srv.Close()
	e, _ := NewOpenAIEmbeddings(OpenAIEmbeddingsConfig{BaseURL: srv.URL + "/v1", Model: "m"})
	if _, err := e.Embed(context.Background(), []string{"a", "b"}); err == nil || !strings.Contains(err.Error(), "lacks index 1") {
		t.Errorf("error = %v", err)
	}
}

func TestOpenAIEmbeddingsConfigNamesTheBadField(t *testing.T) {
	_, err := NewOpenAIEmbeddings(OpenAIEmbeddingsConfig{BaseURL: "ftp://x", Dimensions: -1})
	for _, want := range []string{"base_url", "model must be set", "dimensions"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// rerankServer speaks the Cohere/Jina /v1/rerank shape.
func rerankServer(t *testing.T) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model     string   `json:"model"`
			Query     string   `json:"query"`
			Documents []string `json:"documents"`
			TopN      int      `json:"top_n"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("request is not JSON: %v", err)
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
		}
		if req.TopN != len(req.Documents) {
			t.Errorf("top_n = %d for %d documents", req.TopN, len(req.Documents))
		}
		// Score = number of query words in the document; answer best first.
		type res struct {
			Index int     `json:"index"`
			Score float64 `json:"relevance_score"`
		}
		var out []res
		for i, d := range req.Documents {
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
}

func TestHostedRerankerMapsScoresBackToCandidates(t *testing.T) {
	srv := rerankServer(t)
	defer srv.Close()
	h, err := NewHostedReranker(HostedRerankerConfig{BaseURL: srv.URL + "/v1", Model: "rerank-v3.5"})
	if err != nil {
		t.Fatal(err)
	}
	cands := []Candidate{{Doc: Document{ID: "a", Body: "nothing"}}, {Doc: Document{ID: "b", Body: "dark toggle"}}, {Doc: Document{ID: "c", Body: "dark"}}}
	scores, err := h.Rerank(context.Background(), "dark toggle", cands)
	if err != nil {
		t.Fatal(err)
	}
	if scores[0] != 0 || scores[1] != 2 || scores[2] != 1 {
		t.Errorf("scores = %v, want [0 2 1]", scores)
	}
}

func TestHostedRerankerSurfacesCohereAndJinaErrors(t *testing.T) {
	srv := rerankServer(t)
	defer srv.Close()
	for model, want := range map[string]string{
		"cohere-bad": "status 400: invalid request: list of documents must not be empty",
		"jina-bad":   "status 422: Model jina-bad not found",
	} {
		h, _ := NewHostedReranker(HostedRerankerConfig{BaseURL: srv.URL + "/v1", Model: model})
		_, err := h.Rerank(context.Background(), "q", []Candidate{{Doc: Document{ID: "a"}}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", model, err, want)
		}
	}
}
