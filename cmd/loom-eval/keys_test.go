package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/datasets/datasettest"
	"github.com/loomwork/loomwork/internal/projects"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storeurl"
)

type createdKey struct {
	ID, Project, Kind, Secret string
}

// TestKeysServeAndTheCLIKeepProjectsApart: keys made with `keys create`
// send traces (demo over gRPC and HTTP) that serve stores under their
// projects; the JSON API and the CLI ($LOOMWORK_KEY) read only the key's
// project; a read-only key reads; a revoked key is refused by the running
// serve; no secret appears in serve's log or any command's output except
// the one `keys create` that shows it.
func TestKeysServeAndTheCLIKeepProjectsApart(t *testing.T) {
	testtier.Slow(t)
	dir := t.TempDir()
	keysFile := filepath.Join(dir, "keys.json")
	env := map[string]string{envKeysFile: keysFile}
	var allOut bytes.Buffer // everything but the create outputs
	run := func(env map[string]string, args ...string) (string, error) {
		var out bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &out, Getenv: func(k string) string { return env[k] }}
		err := m.Run(context.Background(), args)
		if err != nil {
			out.WriteString(err.Error())
		}
		return out.String(), err
	}
	create := func(project, kind string) createdKey {
		out, err := run(env, "keys", "create", "--project", project, "--kind", kind, "--json")
		if err != nil {
			t.Fatalf("keys create: %v %s", err, out)
		}
		var k createdKey
		if err := json.Unmarshal([]byte(out), &k); err != nil || !strings.HasPrefix(k.Secret, "lwk_") {
			t.Fatalf("keys create printed %q (%v)", out, err)
		}
		return k
	}
	alpha, alphaRO, beta := create("alpha", "read-write"), create("alpha", "read"), create("beta", "read-write")
	secrets := []string{alpha.Secret, alphaRO.Secret, beta.Secret}
	b, _ := os.ReadFile(keysFile)
	for _, s := range secrets {
		if bytes.Contains(b, []byte(s)) {
			t.Fatal("the keys file holds a secret")
		}
	}
	if st, _ := os.Stat(keysFile); st.Mode().Perm() != 0o600 {
		t.Errorf("keys file mode %v, want 0600", st.Mode().Perm())
	}
	out, err := run(env, "keys", "list")
	allOut.WriteString(out)
	if err != nil || !strings.Contains(out, alpha.ID) || !strings.Contains(out, "read") {
		t.Fatalf("keys list: %v\n%s", err, out)
	}
	if out, err := run(env, "keys", "project", "alpha", "--retention", "30d", "--capture-content=false"); err != nil || !strings.Contains(out, "retention 720h0m0s") {
		t.Fatalf("keys project: %v %s", err, out)
	}

	// serve with the keys file.
	db := filepath.Join(dir, "traces.db")
	ready := filepath.Join(dir, "ready.json")
	var serveLog syncBuffer
	sm := &Main{Stdout: io.Discard, Stderr: &serveLog, Getenv: func(k string) string { return env[k] }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sm.Run(ctx, []string{"serve", "--store", db, "--ready-file", ready, "--log-level", "debug",
			"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--ui-addr", "127.0.0.1:0", "--redact", "all"})
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	}()
	var r ServeReady
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &r) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not ready: %s", serveLog.String())
		}
	}
	idRe := regexp.MustCompile(`Trace ID: ([0-9a-f]{32})`)
	send := func(key string, args ...string) string {
		out, err := run(map[string]string{envKey: key}, append([]string{"demo"}, args...)...)
		allOut.WriteString(out)
		m := idRe.FindStringSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("demo %v: %v\n%s", args, err, out)
		}
		return m[1]
	}
	alphaID := send(alpha.Secret, "--endpoint", r.GRPCAddr, "--ui", r.UIURL)
	betaID := send(beta.Secret, "--http", "--endpoint", r.HTTPAddr, "--ui", r.UIURL)
	// A read-only key cannot send.
	if out, err := run(map[string]string{envKey: alphaRO.Secret}, "demo", "--endpoint", r.GRPCAddr, "--timeout", "2s"); err == nil {
		t.Errorf("demo with a read-only key succeeded:\n%s", out)
	} else {
		allOut.WriteString(out)
	}

	api := func(key, path string) int {
		req, _ := http.NewRequest(http.MethodGet, r.UIURL+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		allOut.Write(body)
		return resp.StatusCode
	}
	for _, c := range []struct {
		key, path string
		want      int
	}{
		{alpha.Secret, "/api/v1/traces/" + alphaID, 200},
		{alphaRO.Secret, "/api/v1/traces/" + alphaID, 200},
		{alphaRO.Secret, "/api/v1/traces/" + betaID, 404},
		{alphaRO.Secret, "/api/v1/traces/" + betaID[:8], 404},
		{beta.Secret, "/api/v1/traces/" + alphaID, 404},
		{beta.Secret, "/api/v1/traces/" + betaID, 200},
	} {
		if got := api(c.key, c.path); got != c.want {
			t.Errorf("GET %s with %s's key: %d, want %d", c.path, c.key[:4], got, c.want)
		}
	}

	// The CLI: $LOOMWORK_KEY scopes traces list/get and sessions.
	cli := func(key string, args ...string) (string, error) {
		out, err := run(map[string]string{envKey: key, envKeysFile: keysFile}, args...)
		allOut.WriteString(out)
		return out, err
	}
	out, err = cli(alphaRO.Secret, "traces", "list", "--store", db)
	if err != nil || !strings.Contains(out, alphaID[:8]) || strings.Contains(out, betaID[:8]) {
		t.Errorf("traces list as alpha: %v\n%s", err, out)
	}
	if out, err := cli(alphaRO.Secret, "traces", "get", betaID, "--store", db); err == nil {
		t.Errorf("traces get of beta's trace as alpha succeeded:\n%.300s", out)
	}
	if out, err := cli(alphaRO.Secret, "traces", "get", betaID[:10], "--store", db); err == nil {
		t.Errorf("traces get of beta's prefix as alpha succeeded:\n%.300s", out)
	}
	if out, err := cli(beta.Secret, "traces", "get", betaID, "--store", db); err != nil {
		t.Errorf("traces get of beta's trace as beta: %v\n%.300s", err, out)
	}
	if out, err := cli("lwk_not-a-key-not-a-key-not-a-key-not-a-key0", "traces", "list", "--store", db); err == nil {
		t.Errorf("an unknown key listed traces:\n%s", out)
	}
	// Content capture: alpha does not capture content, beta (default
	// settings for a new project) does not either; the default project
	// would.
	// Revocation reaches the running serve.
	if out, err := run(env, "keys", "revoke", beta.ID); err != nil {
		t.Fatalf("keys revoke: %v %s", err, out)
	} else {
		allOut.WriteString(out)
	}
	time.Sleep(1100 * time.Millisecond)
	if got := api(beta.Secret, "/api/v1/traces"); got != http.StatusUnauthorized {
		t.Errorf("a revoked key: %d, want 401", got)
	}
	if out, err := run(map[string]string{envKey: beta.Secret}, "demo", "--endpoint", r.GRPCAddr, "--timeout", "2s"); err == nil {
		t.Errorf("demo with a revoked key succeeded:\n%s", out)
	} else {
		allOut.WriteString(out)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("serve: %v", err)
	}
	done <- nil
	logs := serveLog.String()
	for _, s := range secrets {
		if strings.Contains(logs, s) || strings.Contains(allOut.String(), s) {
			t.Errorf("a secret appears in serve's log or a command's output")
		}
	}
	if !strings.Contains(logs, "OTLP collector listening") {
		t.Errorf("serve's log capture is empty; the secret check proves nothing:\n%s", logs)
	}
}

// TestMCPServeReadsOnlyItsKeysProject: `loom-eval mcp serve` started with
// $LOOMWORK_KEY answers its trace tools from that key's project only — a
// full id, a prefix and a listing of another project's traces all come
// back empty or "not found" — and an unknown key does not start it. The
// other paths (API, UI, CLI) are TestKeysServeAndTheCLIKeepProjectsApart
// and the web package's TestCrossProjectReadsFailOnEveryPath.
func TestMCPServeReadsOnlyItsKeysProject(t *testing.T) {
	testtier.Slow(t)
	dir := t.TempDir()
	keysFile := filepath.Join(dir, "keys.json")
	var keys []createdKey
	for _, p := range []string{"alpha", "beta"} {
		var out bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &out, Getenv: func(k string) string { return map[string]string{envKeysFile: keysFile}[k] }}
		if err := m.Run(context.Background(), []string{"keys", "create", "--project", p, "--kind", "read", "--json"}); err != nil {
			t.Fatalf("keys create: %v %s", err, out.String())
		}
		var k createdKey
		if err := json.Unmarshal(out.Bytes(), &k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	alpha, beta := keys[0], keys[1]

	// One trace in each project, written as serve writes them.
	db := filepath.Join(dir, "traces.db")
	st, err := storeurl.Open(context.Background(), db, false)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{"alpha": "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1", "beta": "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2"}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for project, id := range ids {
		sp := store.Span{Project: projects.StoreID(project), TraceID: id, SpanID: "0000000000000001", Name: "invoke_agent " + project,
			Kind: "internal", StartTime: t0, EndTime: t0.Add(time.Second), StatusCode: store.StatusOK, ServiceName: "svc-" + project}
		if err := st.WriteSpans(context.Background(), []store.Span{sp}); err != nil {
			t.Fatal(err)
		}
	}
	st.Shutdown(context.Background())

	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("mcp-token-for-the-test\n"), 0o600)
	ds := datasettest.ShippedDir(t)
	cache := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(key string) *exec.Cmd {
		cmd := loomEval(ctx, t.TempDir(), "mcp", "serve", "--http", "127.0.0.1:0", "--token-file", tokenFile,
			"--dataset", ds, "--index-cache", cache, "--store", db, "--no-python")
		cmd.Env = append(cmd.Env, envKeysFile+"="+keysFile, envKey+"="+key)
		return cmd
	}

	// An unknown key: the server refuses to start, without quoting it.
	bad := start("lwk_not-a-key-not-a-key-not-a-key-not-a-key0")
	out, err := bad.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is not a live key") || strings.Contains(string(out), "lwk_not-a-key") {
		t.Fatalf("mcp serve with an unknown key: %v\n%s", err, out)
	}

	c := startMCPClient(ctx, t, startMCPHTTP(t, start(alpha.Secret)), "mcp-token-for-the-test")
	res, err := c.Call(ctx, "trace_list", json.RawMessage(`{"limit":50}`))
	if err != nil || !strings.Contains(res.Content, ids["alpha"]) || strings.Contains(res.Content, ids["beta"]) {
		t.Fatalf("trace_list as alpha = %.400q, %v (want alpha's trace and not beta's)", res.Content, err)
	}
	if res, err := c.Call(ctx, "trace_get", json.RawMessage(`{"trace_id":"`+ids["alpha"]+`"}`)); err != nil || !strings.Contains(res.Content, "invoke_agent alpha") {
		t.Fatalf("trace_get of alpha's trace as alpha = %.300q, %v", res.Content, err)
	}
	for _, id := range []string{ids["beta"], ids["beta"][:8]} {
		res, err := c.Call(ctx, "trace_get", json.RawMessage(`{"trace_id":"`+id+`"}`))
		var sf *runtime.StepFailure
		if err == nil || errors.As(err, &sf) || strings.Contains(res.Content, "invoke_agent beta") {
			t.Errorf("trace_get %s (beta's) as alpha = %.300q, %v (want a tool error: not found)", id, res.Content, err)
		}
		res, err = c.Call(ctx, "trace_rollup", json.RawMessage(`{"trace_id":"`+id+`"}`))
		if err == nil || strings.Contains(res.Content, "beta") {
			t.Errorf("trace_rollup %s (beta's) as alpha = %.300q, %v (want a tool error)", id, res.Content, err)
		}
	}
	// The same ids are there for beta's key: the refusals above are the
	// scope, not a broken lookup.
	bc := startMCPClient(ctx, t, startMCPHTTP(t, start(beta.Secret)), "mcp-token-for-the-test")
	for _, id := range []string{ids["beta"], ids["beta"][:8]} {
		if res, err := bc.Call(ctx, "trace_get", json.RawMessage(`{"trace_id":"`+id+`"}`)); err != nil || !strings.Contains(res.Content, "invoke_agent beta") {
			t.Errorf("trace_get %s as beta = %.300q, %v", id, res.Content, err)
		}
	}
}
