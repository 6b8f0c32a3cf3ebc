package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/mcp"
	"github.com/loomwork/loomwork/agents/runtime"
)

// TestHTTPServerRefusesForeignOrigins: the Streamable HTTP server answers
// 403 to a request whose Origin is neither a localhost origin nor an
// allowed one — a page on another site reaching a local server through
// DNS rebinding — even with the right bearer token; localhost and
// allowed origins, and clients that send no Origin, get through.
func TestHTTPServerRefusesForeignOrigins(t *testing.T) {
	echo := runtime.Tool{Name: "echo", Parameters: json.RawMessage(`{"type":"object"}`),
		Run: func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error) {
			return runtime.ToolOutput{Content: "ok"}, nil
		}}
	s, err := mcp.NewServer(mcp.ServerConfig{Name: "t", Tools: []runtime.Tool{echo}, AllowedOrigins: []string{"https://App.Example:443"}})
	if err != nil {
		t.Fatal(err)
	}
	const token = "origin-test-token"
	hs := httptest.NewServer(s.HTTPHandler(token))
	defer hs.Close()
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	post := func(origins ...string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, hs.URL, strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		for _, o := range origins {
			req.Header.Add("Origin", o)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		origins []string
		want    int
	}{
		{nil, http.StatusOK},
		{[]string{"http://localhost:6274"}, http.StatusOK},
		{[]string{"http://127.0.0.1:8080"}, http.StatusOK},
		{[]string{"http://[::1]:3000"}, http.StatusOK},
		{[]string{"https://app.example"}, http.StatusOK},
		{[]string{"https://evil.example"}, http.StatusForbidden},
		{[]string{"http://localhost.evil.example"}, http.StatusForbidden},
		{[]string{"http://127.0.0.1.evil.example"}, http.StatusForbidden},
		{[]string{"https://app.example:8443"}, http.StatusForbidden},
		{[]string{"http://app.example"}, http.StatusForbidden},
		{[]string{"null"}, http.StatusForbidden},
		{[]string{"file://"}, http.StatusForbidden},
		{[]string{"http://localhost:1", "https://evil.example"}, http.StatusForbidden},
	} {
		code, body := post(c.origins...)
		if code != c.want {
			t.Errorf("Origin %q: HTTP %d, want %d (%.200s)", c.origins, code, c.want, body)
		}
		if c.want == http.StatusForbidden && !strings.Contains(body, "is not allowed") {
			t.Errorf("Origin %q: the 403 does not say why: %q", c.origins, body)
		}
	}
	if _, err := mcp.NewServer(mcp.ServerConfig{Name: "t", AllowedOrigins: []string{"app.example", "https://app.example/path"}}); err == nil ||
		!strings.Contains(err.Error(), `"app.example"`) || !strings.Contains(err.Error(), `"https://app.example/path"`) {
		t.Errorf("NewServer with bad origins = %v, want both named", err)
	}
}
