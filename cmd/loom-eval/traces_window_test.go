package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
	"github.com/loomwork/loomwork/web"
)

// windowTraceStore writes one trace of n spans (a root and its children)
// and returns the store's path, the trace id and its spans as stored.
func windowTraceStore(t *testing.T, n int) (string, string, []store.Span) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "traces.db")
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	const id = "ab0000000000000000000000000000cd"
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	spans := []store.Span{{TraceID: id, SpanID: "1000000000000001", Name: "invoke_agent root", Kind: "internal", StartTime: at,
		EndTime: at.Add(time.Hour), StatusCode: store.StatusOK, ServiceName: "agent"}}
	for k := 1; k < n; k++ {
		s := store.Span{TraceID: id, SpanID: fmt.Sprintf("2%015x", k), ParentSpanID: spans[0].SpanID, Name: "chat", Kind: "client",
			StartTime: at.Add(time.Duration(k) * time.Millisecond), EndTime: at.Add(time.Duration(k+1) * time.Millisecond),
			StatusCode: store.StatusOK, ServiceName: "agent", Operation: "chat", RequestModel: "gpt-4o", HasUsage: true, InputTokens: 10, OutputTokens: 2}
		spans = append(spans, s)
	}
	ctx := store.WithDefaultProject(context.Background())
	if err := st.WriteSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	stored, err := st.GetTrace(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	st.Shutdown(ctx)
	return path, id, stored
}

// traces get pages a trace (--limit, --page-token), the first page
// carrying the rollup, and --all --json streams every span: the same
// spans and rollup as the trace read whole.
func TestTracesGetPagesAndStreamsEverySpan(t *testing.T) {
	path, id, spans := windowTraceStore(t, 120)
	want := rollup.Compute(spans, pricing.Default())
	var got []store.Span
	tok := ""
	for page := 0; ; page++ {
		args := []string{"traces", "get", id, "--json", "--limit", "50", "--store", path}
		if tok != "" {
			args = append(args, "--page-token", tok)
		}
		code, out, errOut := runCLI(t, args...)
		if code != ExitOK {
			t.Fatalf("traces get page %d: exit %d: %s", page, code, errOut)
		}
		var resp web.TraceResponse
		if err := json.Unmarshal([]byte(out), &resp); err != nil {
			t.Fatal(err)
		}
		if (resp.Rollup != nil) != (page == 0) || len(resp.Spans) > 50 {
			t.Fatalf("page %d: rollup %v, %d spans", page, resp.Rollup != nil, len(resp.Spans))
		}
		if page == 0 && !reflect.DeepEqual(*resp.Rollup, want) {
			t.Fatalf("the first page's rollup differs from Compute over the trace")
		}
		got = append(got, resp.Spans...)
		if tok = resp.NextPageToken; tok == "" {
			break
		}
	}
	if a, b := jsonText(t, got), jsonText(t, spans); a != b {
		t.Fatalf("pages hold %d spans, differing from the trace's %d", len(got), len(spans))
	}
	code, out, errOut := runCLI(t, "traces", "get", id, "--all", "--json", "--store", path)
	var all web.TraceResponse
	if err := json.Unmarshal([]byte(out), &all); code != ExitOK || err != nil {
		t.Fatalf("traces get --all --json: exit %d, %v: %s", code, err, errOut)
	}
	if all.Rollup == nil || jsonText(t, all.Spans) != jsonText(t, spans) {
		t.Fatalf("--all streamed %d spans (rollup %v), want the trace's %d", len(all.Spans), all.Rollup != nil, len(spans))
	}
	code, out, _ = runCLI(t, "traces", "get", id, "--limit", "10", "--store", path)
	if code != ExitOK || !strings.Contains(out, "More spans: add --page-token ") || strings.Count(out, " chat ") != 9 {
		t.Errorf("traces get --limit 10 (text): exit %d, want the rollup, 10 spans and the next page's token:\n%s", code, out)
	}
	for _, bad := range [][]string{{"--limit", "-1"}, {"--limit", "5001"}, {"--page-token", "nope"}} {
		if code, _, errOut := runCLI(t, append([]string{"traces", "get", id, "--store", path}, bad...)...); code != ExitUsage || !strings.Contains(errOut, strings.TrimPrefix(bad[0], "--")) {
			t.Errorf("traces get %v: exit %d, want a usage error naming it: %s", bad, code, errOut)
		}
	}
}

func jsonText(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
