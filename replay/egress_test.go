package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/sandbox"
	"github.com/loomwork/loomwork/agents/scripted"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/replay"
	"github.com/loomwork/loomwork/semconv"
)

// replaySecret is the credential of TestEgressAttemptsAreSpanEventsJournaledAndComparedByReplay.
const replaySecret = "lw-replay-secret-5f1c0e"

// codingWithEgress is the coding agent with a sandbox whose egress policy
// allows the host pattern on port (ok.test resolves on the host to
// 127.0.0.2).
func codingWithEgress(t *testing.T, port int, host string) runtime.Agent {
	t.Helper()
	sb := &coding.LazySandbox{Config: sandbox.Config{EgressResolver: func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "ok.test" {
			return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = sb.Shutdown(ctx)
	})
	rule := sandbox.EgressRule{Host: host, Ports: []int{port}}
	if strings.HasPrefix(host, "*.") {
		// A wildcard rule names the hosts under it that may be resolved.
		rule.Resolve = []string{"ok.test"}
	}
	policy := &sandbox.Egress{Allow: []sandbox.EgressRule{rule, {CIDR: "127.0.0.2/32", Ports: []int{port}}}}
	if host == "ok.test" {
		// The proxy adds the token to every request for ok.test.
		policy.Credentials = []sandbox.Credential{{Name: "ok-token", Host: "ok.test", Port: port, Value: sandbox.Secret("Bearer " + replaySecret)}}
	}
	a, err := coding.New(coding.Config{Sandbox: sb, WorkRoot: t.TempDir(), Egress: policy})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestEgressAttemptsAreSpanEventsJournaledAndComparedByReplay runs the
// coding agent (scripted model) with an egress policy: each connection
// attempt and verdict is a span event on run_python's execute_tool span and
// is journaled with the result; a replay under the same policy matches, and
// one under a policy that refuses the host reports the difference.
func TestEgressAttemptsAreSpanEventsJournaledAndComparedByReplay(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	t.Parallel()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("needs root for the sandbox, and CI runs as root")
		}
		t.Skip("the sandbox needs root")
	}
	ln, err := net.Listen("tcp4", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	var authorized atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+replaySecret {
			authorized.Add(1)
		}
		fmt.Fprint(w, "fetched")
	}))
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	code := fmt.Sprintf(`import socket, urllib.request
try:
    print(urllib.request.urlopen('http://ok.test:%d/', timeout=5).read().decode())
except Exception as e:
    print('ok.test failed:', type(e).__name__)
try:
    socket.create_connection(('192.0.2.1', 80), timeout=5)
except OSError as e:
    print('raw ip refused, errno', e.errno)
`, port)
	writeArgs, _ := json.Marshal(map[string]string{"path": "net.py", "content": code})
	script := scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []llm.ToolCall{{ID: "w1", Name: "write_file", Arguments: writeArgs}}},
		{ToolCalls: []llm.ToolCall{{ID: "r1", Name: "run_python", Arguments: json.RawMessage(`{"path":"net.py"}`)}}},
		{Content: "done"},
	}}
	m, err := scripted.New(script)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(t.TempDir(), "j.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(ctx)
	rt, err := runtime.New(runtime.Config{Model: m, Journal: j, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	agent := codingWithEgress(t, port, "ok.test")
	if _, err := rt.Run(ctx, agent, runtime.Task{RunID: "egress-run", Input: "fetch ok.test"}); err != nil {
		t.Fatal(err)
	}

	// The span events.
	var spanEvents []sdktrace.Event
	for _, s := range rec.Ended() {
		if s.Name() == "execute_tool run_python" {
			spanEvents = s.Events()
		}
	}
	verdicts := map[string]string{}
	for _, e := range spanEvents {
		if e.Name != semconv.EventSandboxEgress {
			continue
		}
		a := map[string]string{}
		for _, kv := range e.Attributes {
			a[string(kv.Key)] = kv.Value.AsString()
		}
		verdicts[a[semconv.AttrEgressProto]+" "+a[semconv.AttrEgressHost]+a[semconv.AttrEgressAddr]] = a[semconv.AttrEgressVerdict]
	}
	want := map[string]string{
		fmt.Sprintf("tcp ok.test127.0.0.1:%d", port): "allow",
		"dns ok.test127.0.0.1:53":                    "allow",
		"tcp 192.0.2.1:80":                           "deny",
	}
	for k, v := range want {
		if verdicts[k] != v {
			t.Errorf("span event %q: want verdict %s, got %q (all: %v)", k, v, verdicts[k], verdicts)
		}
	}

	// The journal holds the same events with the result.
	evs, err := j.Events(ctx, "egress-run")
	if err != nil {
		t.Fatal(err)
	}
	var tr journal.ToolResult
	for _, e := range evs {
		if e.Kind == journal.KindToolResult && e.Tool == "run_python" {
			_ = json.Unmarshal(e.Payload, &tr)
		}
	}
	if len(tr.Events) != len(spanEvents) || len(tr.Events) < 3 {
		t.Errorf("journal has %d events, the span %d; want the same, at least 3", len(tr.Events), len(spanEvents))
	}
	var rr coding.RunResult
	_ = json.Unmarshal([]byte(tr.Content), &rr)
	if !strings.Contains(rr.Stdout, "fetched") || len(rr.Refused) != 1 || !strings.HasPrefix(rr.Refused[0], "tcp 192.0.2.1:80: ") {
		t.Errorf("observation: stdout %q, refused %v", rr.Stdout, rr.Refused)
	}

	// The credential reached the upstream and no record holds it: not the
	// journal (its export), not a span (attributes and events).
	if authorized.Load() != 1 {
		t.Errorf("the upstream saw the credential %d times, want 1", authorized.Load())
	}
	var export bytes.Buffer
	if err := j.Export(ctx, &export, "egress-run"); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(export.Bytes(), []byte(replaySecret)) {
		t.Error("the secret is in the journal")
	}
	if !bytes.Contains(export.Bytes(), []byte("ok-token")) {
		t.Error("the journal should name the credential the proxy injected")
	}
	for _, s := range rec.Ended() {
		all := fmt.Sprint(s.Attributes(), s.Events(), s.Status())
		if strings.Contains(all, replaySecret) {
			t.Errorf("span %s holds the secret", s.Name())
		}
	}

	// Replay: the same policy matches; a policy that refuses ok.test differs
	// in the content and in the events; one that allows it by another rule
	// differs in the events only (the rule that decided).
	var buf bytes.Buffer
	if err := j.Export(ctx, &buf, "egress-run"); err != nil {
		t.Fatal(err)
	}
	runs, err := journal.ReadJSONL(bytes.NewReader(buf.Bytes()), "egress.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host     string
		wantSame bool
		inDiff   string
	}{{"ok.test", true, ""}, {"elsewhere.test", false, `verdict="deny"`}, {"*.test", false, `rule="allow[0] *.test"`}} {
		eng, err := replay.New(replay.Config{Registry: registry(t, codingWithEgress(t, port, c.host)), WorkDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := eng.Replay(ctx, runs[0])
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() != c.wantSame {
			t.Errorf("replay allowing %s: OK=%v, want %v; diffs %+v divergence %v", c.host, rep.OK(), c.wantSame, rep.ResultDiffs, rep.Divergence)
		}
		if !c.wantSame && (len(rep.ResultDiffs) != 1 || !strings.Contains(rep.ResultDiffs[0].Replayed, c.inDiff)) {
			t.Errorf("replay allowing %s: the result diff should show %s: %+v", c.host, c.inDiff, rep.ResultDiffs)
		}
	}
}
