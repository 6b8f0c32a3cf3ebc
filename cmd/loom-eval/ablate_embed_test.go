package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

const embedKey = "sk-embed-Hq27xP0aVw5mR8tL"

// hashEmbeddingsServer speaks OpenAI's /v1/embeddings wire format with a
// bag-of-hashed-words embedding (deterministic, and good enough to rank
// the tiny set); it wants embedKey as the bearer token and, as OpenAI
// does, names the key it got when it refuses one.
func hashEmbeddingsServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	calls := new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/v1/embeddings" {
			http.NotFound(w, r)
			return
		}
		if got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "); got != embedKey {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, got)
			return
		}
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "hash-16" {
			t.Errorf("request: model %q, err %v", req.Model, err)
		}
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var data []item
		for i, text := range req.Input {
			v := make([]float32, 16)
			v[15] = 0.01 // never the zero vector
			for _, w := range strings.Fields(strings.ToLower(text)) {
				h := fnv.New32a()
				h.Write([]byte(w))
				v[h.Sum32()%15]++
			}
			data = append(data, item{"embedding", i, v})
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model,
			"usage": map[string]int{"prompt_tokens": 1, "total_tokens": 1}})
	}))
	t.Cleanup(srv.Close)
	return srv, calls
}

func ablateWithKey(t *testing.T, key string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
		if k == "LOOMWORK_EMBED_API_KEY" {
			return key
		}
		return ""
	}}
	err := m.Run(context.Background(), append([]string{"ablate"}, args...))
	var ee *ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.Code
	case err != nil:
		code = ExitRuntimeErr
	}
	if err != nil {
		errb.WriteString(err.Error())
	}
	return out.String(), errb.String(), code
}

// --embed-url/--embed-model send dense mode's corpus and queries to an
// OpenAI-compatible endpoint through the gateway's client, with the key
// from $LOOMWORK_EMBED_API_KEY; a refused key is a runtime error that says
// what the endpoint said, and the key appears in no output.
func TestAblateDenseOverEmbedURLKeepsTheKeyOut(t *testing.T) {
	srv, calls := hashEmbeddingsServer(t)
	base := []string{"--dataset", tinyDataset, "--modes", "dense", "--bootstrap", "50", "--format", "json", "--out", "",
		"--embed-url", srv.URL + "/v1", "--embed-model", "hash-16"}

	stdout, stderr, code := ablateWithKey(t, embedKey, append(base, "--cache", filepath.Join(t.TempDir(), "index"))...)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Rows []struct{ Mode string } `json:"rows"`
		Env  map[string]string       `json:"environment"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v", err)
	}
	if len(rep.Rows) == 0 || rep.Rows[0].Mode != "dense" || rep.Env["embedder"] != "hash-16 at "+srv.URL+"/v1" || calls.Load() == 0 {
		t.Errorf("rows %v, embedder %q, %d calls", rep.Rows, rep.Env["embedder"], calls.Load())
	}
	if strings.Contains(stdout+stderr, embedKey) {
		t.Errorf("the key is in the output")
	}

	const wrong = "sk-embed-wrong-9d8c7b6a"
	stdout, stderr, code = ablateWithKey(t, wrong, append(base, "--cache", filepath.Join(t.TempDir(), "index"))...)
	if code != ExitRuntimeErr || !strings.Contains(stderr, "status 401 (invalid_request_error): Incorrect API key provided: [REDACTED].") {
		t.Errorf("a refused key: exit %d, stderr %s", code, stderr)
	}
	if strings.Contains(stdout+stderr, wrong) {
		t.Errorf("the refused key is in the output: %s", stderr)
	}

	_, stderr, code = ablateWithKey(t, "", "--dataset", tinyDataset, "--embed-url", "ftp://x", "--embed-model", "m")
	if code != ExitUsage || !strings.Contains(stderr, "base_url") {
		t.Errorf("--embed-url ftp://x: exit %d, stderr %s", code, stderr)
	}
}
