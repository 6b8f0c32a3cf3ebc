package mcp_test

import (
	"context"
	"errors"
	"os"
	"sort"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomwork/loomwork/agents/mcp"
	"github.com/loomwork/loomwork/internal/testtier"
)

// serveGetEnv is the test binary as a stdio MCP server with one tool,
// get-env, returning its environment: what a hostile or careless server
// (the reference server-everything has the same tool) could show the
// model and the journal.
func serveGetEnv() int {
	s := sdk.NewServer(&sdk.Implementation{Name: "getenv-test", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "get-env", Description: "returns the server's environment"},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			env := os.Environ()
			sort.Strings(env)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Join(env, "\n")}}}, nil, nil
		})
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
		os.Stderr.WriteString(err.Error())
		return 1
	}
	return 0
}

// TestStdioServerGetsNoSecrets: with secrets in Loomwork's environment, a
// stdio MCP server sees none of them unless a variable is named
// explicitly (PassEnv); it still gets the default list (PATH, HOME, …).
func TestStdioServerGetsNoSecrets(t *testing.T) {
	testtier.Slow(t) // stdio server subprocesses
	t.Setenv("OPENAI_API_KEY", "sk-test-openai-secret")
	t.Setenv("LOOMWORK_MCP_TOKEN", "mcp-token-secret")
	t.Setenv("LOOMWORK_TEST_ALLOWED", "allowed-value")
	t.Setenv("PATH", os.Getenv("PATH"))
	ctx := context.Background()
	getEnv := func(pass ...string) string {
		t.Helper()
		c, err := mcp.NewClient(mcp.ClientConfig{Name: "env", Command: os.Args[0], Args: []string{"serve-get-env"}, PassEnv: pass})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer c.Shutdown(ctx)
		out, err := c.Call(ctx, "get-env", nil)
		if err != nil {
			t.Fatal(err)
		}
		return out.Content
	}
	env := getEnv()
	for _, secret := range []string{"OPENAI_API_KEY", "sk-test-openai-secret", "LOOMWORK_MCP_TOKEN", "mcp-token-secret", "LOOMWORK_TEST_ALLOWED"} {
		if strings.Contains(env, secret) {
			t.Errorf("the server's get-env shows %s:\n%s", secret, env)
		}
	}
	if !strings.Contains(env, "PATH="+os.Getenv("PATH")) {
		t.Errorf("the server did not get PATH (a default variable):\n%s", env)
	}
	env = getEnv("LOOMWORK_TEST_ALLOWED")
	if !strings.Contains(env, "LOOMWORK_TEST_ALLOWED=allowed-value") {
		t.Errorf("an explicitly named variable did not reach the server:\n%s", env)
	}
	if strings.Contains(env, "sk-test-openai-secret") || strings.Contains(env, "mcp-token-secret") {
		t.Errorf("naming one variable passed others:\n%s", env)
	}
}

func TestPassEnvNeedsStdio(t *testing.T) {
	err := mcp.ClientConfig{Name: "x", URL: "http://127.0.0.1:1/mcp", PassEnv: []string{"A"}}.Validate()
	if err == nil || !strings.Contains(err.Error(), "need command") {
		t.Fatalf("Validate = %v, want pass_env refused for an HTTP server", err)
	}
	err = mcp.ClientConfig{Name: "x", Command: "true", PassEnv: []string{"A=B"}, Env: []string{"novalue"}}.Validate()
	if err == nil || !strings.Contains(err.Error(), `"A=B"`) || !strings.Contains(err.Error(), `"novalue"`) {
		t.Fatalf("Validate = %v, want both bad entries named", err)
	}
}
