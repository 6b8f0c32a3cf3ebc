package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
	"github.com/loomwork/loomwork/store/storetest"
)

// sessionsStore writes two conversations (4 and 2 turns) and an unrelated
// trace into a new embedded store and returns its path and the spans.
func sessionsStore(t *testing.T) (string, []store.Span) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "traces.db")
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	spans := storetest.GenerateConversation("conv-support-7", 4, 6, 1, at, 2*time.Minute)
	spans = append(spans, storetest.GenerateConversation("conv-billing-2", 2, 6, 2, at.Add(time.Hour), time.Minute)...)
	if err := st.WriteSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	if err := st.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return path, spans
}

func TestSessionsListAndGetSumTheTracesSummaries(t *testing.T) {
	path, _ := sessionsStore(t)
	code, out, errOut := runCLI(t, "sessions", "list", "--store", path)
	if code != ExitOK || !strings.Contains(out, "conv-support-7") || !strings.Contains(out, "conv-billing-2") ||
		strings.Index(out, "conv-billing-2") > strings.Index(out, "conv-support-7") {
		t.Fatalf("sessions list: exit %d, want both sessions, the latest first\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "sessions", "get", "conv-support-7", "--json", "--store", path)
	if code != ExitOK {
		t.Fatalf("sessions get: exit %d\nstderr: %s", code, errOut)
	}
	var sess store.Session
	if err := json.Unmarshal([]byte(out), &sess); err != nil {
		t.Fatal(err)
	}
	// The turns are exactly what traces list --session prints, and the
	// totals their sums.
	code, tl, errOut := runCLI(t, "traces", "list", "--session", "conv-support-7", "--asc", "--json", "--store", path)
	if code != ExitOK {
		t.Fatalf("traces list --session: exit %d\nstderr: %s", code, errOut)
	}
	var page store.TracePage
	if err := json.Unmarshal([]byte(tl), &page); err != nil {
		t.Fatal(err)
	}
	if len(sess.Traces) != 4 || len(page.Traces) != 4 || sess.Turns != 4 {
		t.Fatalf("%d turns (count %d) in the session, %d traces listed; want 4", len(sess.Traces), sess.Turns, len(page.Traces))
	}
	var in, out2 int64
	for i, tr := range page.Traces {
		if sess.Traces[i].TraceID != tr.TraceID || sess.Traces[i].InputTokens != tr.InputTokens {
			t.Errorf("turn %d: %s/%d, traces list has %s/%d", i, sess.Traces[i].TraceID, sess.Traces[i].InputTokens, tr.TraceID, tr.InputTokens)
		}
		in += tr.InputTokens
		out2 += tr.OutputTokens
	}
	if sess.InputTokens != in || sess.OutputTokens != out2 || in == 0 {
		t.Errorf("session tokens %d/%d, sum of the traces %d/%d", sess.InputTokens, sess.OutputTokens, in, out2)
	}
	code, text, _ := runCLI(t, "sessions", "get", "conv-support-7", "--store", path)
	if code != ExitOK || !strings.Contains(text, "4 turns") || !strings.Contains(text, "TOTAL") {
		t.Errorf("sessions get (text): exit %d\n%s", code, text)
	}
	if code, _, errOut := runCLI(t, "sessions", "get", "nobody", "--store", path); code != ExitFailure || !strings.Contains(errOut, "session not found") {
		t.Errorf("sessions get nobody: exit %d, want %d naming the missing session\nstderr: %s", code, ExitFailure, errOut)
	}
	if code, _, errOut := runCLI(t, "sessions", "list", "--limit", "0", "--store", path); code != ExitUsage || !strings.Contains(errOut, "limit") {
		t.Errorf("sessions list --limit 0: exit %d\nstderr: %s", code, errOut)
	}
}

func TestTracesListSearchFlags(t *testing.T) {
	path, spans := sessionsStore(t)
	var toolSpan store.Span
	for _, sp := range spans {
		if sp.ToolCallID != "" {
			toolSpan = sp
			break
		}
	}
	for _, args := range [][]string{
		{"--attr", "gen_ai.tool.call.id=" + toolSpan.ToolCallID},
		{"--query", "gen_ai.tool.call.id=" + toolSpan.ToolCallID + " gen_ai.operation.name"},
		{"--span-name", toolSpan.Name, "--attr", "gen_ai.tool.call.id=" + toolSpan.ToolCallID},
	} {
		code, out, errOut := runCLI(t, append([]string{"traces", "list", "--json", "--store", path}, args...)...)
		var page store.TracePage
		if code != ExitOK || json.Unmarshal([]byte(out), &page) != nil || len(page.Traces) != 1 || page.Traces[0].TraceID != toolSpan.TraceID {
			t.Errorf("traces list %q: exit %d, want the one trace %s\nstdout: %s\nstderr: %s", args, code, toolSpan.TraceID, out, errOut)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--attr", "gen_ai.usage.input_tokens>many"}, `--attr "gen_ai.usage.input_tokens>many": clause 1`},
		{[]string{"--attr", "a=1 b=2"}, "want one attribute clause"},
		{[]string{"--query", `x=1 name:"open`}, `--query: clause 2 "name:\"open": unterminated quote`},
	} {
		code, _, errOut := runCLI(t, append([]string{"traces", "list", "--store", path}, c.args...)...)
		if code != ExitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("traces list %q: exit %d, want %d with %q\nstderr: %s", c.args, code, ExitUsage, c.want, errOut)
		}
	}
}
