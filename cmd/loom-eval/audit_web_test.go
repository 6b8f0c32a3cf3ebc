package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/store/sqlite"
	"github.com/loomwork/loomwork/web"
)

// TestAuditPageShowsTheLogAndWhetherItsChainHolds: /audit lists a policy
// audit log's entries with each decision's summary and says whether the
// chain verifies, as `audit verify` does; an edited entry, text after an
// entry and a missing log are each said, naming where.
func TestAuditPageShowsTheLogAndWhetherItsChainHolds(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "audit.jsonl")
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(dir, "traces.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Shutdown(context.Background())
	srv, err := web.New(web.Config{}, web.Deps{Traces: st, Audit: newWebAudit(file)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	if page := get("/audit"); !strings.Contains(page, `id="audit-missing"`) {
		t.Fatal("a log not written yet is not said")
	}

	key, err := loadAuditKey()
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC) }
	log, err := policy.OpenAudit(file, clock, policy.SignedWith(key))
	if err != nil {
		t.Fatal(err)
	}
	allow := policy.DecisionRecord{Tool: "search_docs", CallID: "c1", Principal: "agent:research", Verdict: policy.Verdict{Decision: policy.Allow, Reason: "reads are safe"}}
	held := policy.DecisionRecord{Tool: "send_email", CallID: "c2", Principal: "agent:research", Writes: true,
		Verdict: policy.Verdict{Decision: policy.RequireApproval, Tainted: true, Origin: "memory:mem-7", Reason: "write carries untrusted argument 'to'"}}
	for _, d := range []policy.DecisionRecord{allow, held} {
		if _, err := log.Append(d.Principal, "tool_call", d); err != nil {
			t.Fatal(err)
		}
	}
	page := get("/audit")
	if !strings.Contains(page, `id="audit-verified"`) || !strings.Contains(page, "2 entries") || !strings.Contains(page, `id="audit-2" class="require_approval"`) ||
		!strings.Contains(page, "write carries untrusted argument") {
		t.Fatalf("audit page of a good log:\n%s", page)
	}
	var v web.AuditView
	if err := json.Unmarshal([]byte(get("/api/v1/audit?action=tool_call&q=send_email")), &v); err != nil || !v.Verified || v.Total != 2 || v.Shown != 1 || v.Entries[0].Tool != "send_email" {
		t.Fatalf("api: %v %+v", err, v)
	}
	if _, _, code := cli(t, "audit", "verify", file); code != ExitOK {
		t.Fatalf("audit verify of the good log: exit %d", code)
	}

	// An edit: the held send_email rewritten as allowed.
	good, _ := os.ReadFile(file)
	os.WriteFile(file, bytes.Replace(good, []byte(`"decision":"require_approval"`), []byte(`"decision":"allow"`), 1), 0o644)
	if page := get("/audit"); !strings.Contains(page, `id="audit-broken"`) || !strings.Contains(page, "line 2 (entry seq 2): content does not match its hash: edited") {
		t.Fatalf("an edited entry:\n%s", page)
	}
	if _, _, code := cli(t, "audit", "verify", file); code != ExitFailure {
		t.Fatalf("audit verify of the edited log: exit %d, want %d", code, ExitFailure)
	}
	// Text after an entry on its line.
	os.WriteFile(file, append(bytes.TrimRight(good, "\n"), []byte(` {"seq":3}`+"\n")...), 0o644)
	if page := get("/audit"); !strings.Contains(page, `id="audit-broken"`) || !strings.Contains(page, "line 2") || !strings.Contains(page, "data after the entry") {
		t.Fatalf("trailing text:\n%s", page)
	}
	// A forgery with a whole, correct chain: the held send_email written as
	// allowed by someone without the key (every hash computed afresh).
	os.Remove(file)
	forged, err := policy.OpenAudit(file, clock)
	if err != nil {
		t.Fatal(err)
	}
	held.Verdict.Decision = policy.Allow
	for _, d := range []policy.DecisionRecord{allow, held} {
		if _, err := forged.Append(d.Principal, "tool_call", d); err != nil {
			t.Fatal(err)
		}
	}
	if page := get("/audit"); !strings.Contains(page, `id="audit-broken"`) || !strings.Contains(page, "line 1 (entry seq 1): unsigned") {
		t.Fatalf("a re-chained forgery:\n%s", page)
	}
	if out, _, code := cli(t, "audit", "verify", file); code != ExitFailure {
		t.Fatalf("audit verify of the forgery: exit %d, want %d\n%s", code, ExitFailure, out)
	}
	if out, _, code := cli(t, "audit", "verify", "--unsigned", file); code != ExitOK || !strings.Contains(out, "signatures not checked") {
		t.Fatalf("audit verify --unsigned of the forgery (its chain holds): exit %d\n%s", code, out)
	}
}
