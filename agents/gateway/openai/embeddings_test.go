package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/gateway/openai"
)

// embeddingsServer speaks OpenAI's /v1/embeddings shape: it wants testKey
// as the bearer token (and answers a wrong one as OpenAI does, echoing the
// key it got), answers in reverse index order (clients must sort by
// "index"), and with OpenAI's error object for an unknown model.
func embeddingsServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		if got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "); got != testKey {
			w.Header().Set("x-request-id", "req_401")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, got)
			return
		}
		var req struct {
			Model          string   `json:"model"`
			Input          []string `json:"input"`
			EncodingFormat string   `json:"encoding_format"`
			Dimensions     *int     `json:"dimensions"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("request is not JSON: %v", err)
		}
		if req.Model != "text-embedding-3-small" {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":{"message":"The model `+"`"+req.Model+"`"+` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)
			return
		}
		if req.EncodingFormat != "float" {
			t.Errorf("encoding_format = %q, want float", req.EncodingFormat)
		}
		dims := 3
		if req.Dimensions != nil {
			dims = *req.Dimensions
		}
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var data []item
		for i := len(req.Input) - 1; i >= 0; i-- {
			v := make([]float32, dims)
			v[0], v[1] = float32(len(req.Input[i])), float32(i)
			data = append(data, item{"embedding", i, v})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model,
			"usage": map[string]int{"prompt_tokens": 5, "total_tokens": 5}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newEmbeddings(t *testing.T, baseURL, key, model string, dims int) *openai.Embeddings {
	t.Helper()
	e, err := openai.NewEmbeddings(openai.EmbeddingsConfig{BaseURL: baseURL, APIKey: gateway.NewSecret(key), Model: model, Dimensions: dims})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestEmbeddingsReturnVectorsInInputOrder(t *testing.T) {
	srv := embeddingsServer(t)
	vs, err := newEmbeddings(t, srv.URL+"/v1", testKey, "text-embedding-3-small", 0).Embed(context.Background(), []string{"a", "bbb", "cc"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float32{1, 3, 2} {
		if len(vs[i]) != 3 || vs[i][0] != want || vs[i][1] != float32(i) {
			t.Errorf("vector %d = %v, want length %v at index %d", i, vs[i], want, i)
		}
	}
	vs, err = newEmbeddings(t, srv.URL+"/v1/", testKey, "text-embedding-3-small", 5).Embed(context.Background(), []string{"a"})
	if err != nil || len(vs[0]) != 5 {
		t.Errorf("dimensions 5 not sent: %v, %v", vs, err)
	}
	if vs, err := newEmbeddings(t, srv.URL+"/v1", testKey, "text-embedding-3-small", 0).Embed(context.Background(), nil); vs != nil || err != nil {
		t.Errorf("no texts: %v, %v (want no request)", vs, err)
	}
}

func TestEmbeddingsSurfaceTheAPIErrorMessage(t *testing.T) {
	srv := embeddingsServer(t)
	for _, c := range []struct {
		key, model  string
		status      int
		typ, code   string
		want, reqID string
	}{
		{"sk-wrong-1234", "text-embedding-3-small", 401, "invalid_request_error", "invalid_api_key",
			"status 401 (invalid_request_error): Incorrect API key provided: [REDACTED].", "req_401"},
		{testKey, "nope", 404, "invalid_request_error", "model_not_found",
			"status 404 (invalid_request_error): The model `nope` does not exist", ""},
	} {
		_, err := newEmbeddings(t, srv.URL+"/v1", c.key, c.model, 0).Embed(context.Background(), []string{"x"})
		var ae *gateway.APIError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("error = %v, want a *gateway.APIError containing %q", err, c.want)
		}
		if ae.Status != c.status || ae.Type != c.typ || ae.Code != c.code || ae.Retryable || ae.Provider != "openai" || ae.Model != c.model || ae.RequestID != c.reqID {
			t.Errorf("APIError = %+v", ae)
		}
		if !strings.HasPrefix(err.Error(), "embed 1 texts: openai "+c.model+": ") {
			t.Errorf("error %q does not say what failed", err)
		}
	}
}

// replyServer answers every request with the given status, headers and body.
func replyServer(t *testing.T, status int, header map[string]string, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestEmbeddingsClassifyFailuresAsTheGatewayDoes(t *testing.T) {
	for _, c := range []struct {
		name      string
		status    int
		header    map[string]string
		body      string
		retryable bool
		typ, msg  string
		after     time.Duration
	}{
		{"rate limited", 429, map[string]string{"retry-after": "2", "x-request-id": "req_9"},
			`{"error":{"message":"Rate limit reached for text-embedding-3-small","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			true, "requests", "Rate limit reached", 2 * time.Second},
		{"out of credit", 429, nil,
			`{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			false, "insufficient_quota", "exceeded your current quota", 0},
		{"proxy page", 503, nil, "<html><body>503 Service Unavailable</body></html>\n", true, "", "<html><body>503 Service Unavailable</body></html>", 0},
		{"error inside a 200", 200, nil, `{"error":{"message":"model overloaded","type":"server_error","param":null,"code":null}}`,
			true, "server_error", "model overloaded", 0},
		{"not JSON", 200, nil, `{"object":"list","data":[`, false, gateway.ErrTypeDecode, "decode answer", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := replyServer(t, c.status, c.header, c.body)
			_, err := newEmbeddings(t, srv.URL+"/v1", testKey, "m", 0).Embed(context.Background(), []string{"x"})
			var ae *gateway.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error = %v, want a *gateway.APIError", err)
			}
			if ae.Retryable != c.retryable || gateway.IsRetryable(err) != c.retryable || ae.Type != c.typ || !strings.Contains(ae.Message, c.msg) || ae.RetryAfter != c.after {
				t.Errorf("APIError = %+v", ae)
			}
		})
	}
}

func TestEmbeddingsRejectAnAnswerThatDoesNotMatchTheInput(t *testing.T) {
	for body, want := range map[string]string{
		`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1,2]}],"model":"m"}`:                                                    "lacks index 1",
		`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1,2]},{"object":"embedding","index":0,"embedding":[1,2]}],"model":"m"}`: "repeats index 0",
		`{"object":"list","data":[{"object":"embedding","index":2,"embedding":[1,2]}],"model":"m"}`:                                                    "index 2 out of range",
		`{"object":"list","data":[{"object":"embedding","index":1,"embedding":[]}],"model":"m"}`:                                                       "empty embedding at index 1",
	} {
		srv := replyServer(t, 200, map[string]string{"Content-Type": "application/json"}, body)
		if _, err := newEmbeddings(t, srv.URL+"/v1", "", "m", 0).Embed(context.Background(), []string{"a", "b"}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error = %v, want %q", body, err, want)
		}
	}
}

func TestEmbeddingsConfigNamesTheBadField(t *testing.T) {
	_, err := openai.NewEmbeddings(openai.EmbeddingsConfig{BaseURL: "ftp://x", Dimensions: -1})
	for _, want := range []string{"base_url", "model: must be set", "dimensions"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	if _, err := openai.NewEmbeddings(openai.EmbeddingsConfig{Model: "text-embedding-3-small"}); err == nil || !strings.Contains(err.Error(), "api_key") {
		t.Errorf("OpenAI's own endpoint without a key: err = %v", err)
	}
	if _, err := openai.NewEmbeddings(openai.EmbeddingsConfig{BaseURL: "http://127.0.0.1:8000/v1", Model: "m"}); err != nil {
		t.Errorf("a local server without a key: %v", err)
	}
}

// The key goes in the Authorization header and nowhere else: not in an
// error (even when the server echoes it, in JSON or in a bare body), not in
// the client or its config however they are printed or logged.
func TestEmbeddingsKeepTheKeyOutOfErrorsAndLogs(t *testing.T) {
	const key = "sk-proj-Zq81hV0cLw3nX5tR9yB2"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		if got != "Bearer "+key {
			t.Errorf("Authorization = %q", got)
		}
		switch {
		case strings.HasPrefix(r.URL.Path, "/text/"):
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, "forbidden: %s\n", got)
		default:
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":"key %s revoked","type":"invalid_request_error","param":%q,"code":"invalid_api_key"}}`, key, key)
		}
	}))
	t.Cleanup(echo.Close)
	var logs bytes.Buffer
	jsonLog := slog.New(slog.NewJSONHandler(&logs, nil))
	textLog := slog.New(slog.NewTextHandler(&logs, nil))
	for _, base := range []string{echo.URL + "/json/v1", echo.URL + "/text/v1"} {
		cfg := openai.EmbeddingsConfig{BaseURL: base, APIKey: gateway.NewSecret(key), Model: "m"}
		e, err := openai.NewEmbeddings(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.Embed(context.Background(), []string{"x"})
		if err == nil {
			t.Fatal("no error")
		}
		var ae *gateway.APIError
		errors.As(err, &ae)
		jsonLog.Error("embed failed", "err", err, "config", cfg, "api_error", ae)
		textLog.Error("embed failed", "err", err, "config", cfg, "client", e)
		for _, s := range []string{err.Error(), fmt.Sprintf("%+v %#v %v %#v %s", err, cfg, e, e, e), fmt.Sprintf("%+v", ae), logs.String()} {
			if strings.Contains(s, key) || strings.Contains(s, key[8:]) {
				t.Errorf("the key leaked: %s", s)
			}
		}
		if !strings.Contains(err.Error(), "[REDACTED]") {
			t.Errorf("error %q does not show where the echoed key was", err)
		}
	}
}
