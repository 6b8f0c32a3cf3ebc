package web

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// envelopeTrace is a generated agent trace (and the one before it) whose
// root continues a remote parent, was cut by its SDK's limits, and links to
// the earlier trace's root in another process, with the scope attributes
// and schema URLs an instrumented service sends. It returns the spans, the
// trace id and the root's span id.
func envelopeTrace() ([]store.Span, string, string) {
	spans := storetest.GenerateTraces(2, 8, 77)
	prev, tr := spans[:8], spans[8:]
	scope := store.Attributes{"team": "search-platform", "replica": int64(3), "capture_content": true}
	for i := range tr {
		tr[i].ScopeName, tr[i].ScopeVersion = "github.com/acme/research-agent", "1.8.2"
		tr[i].ScopeAttributes = scope
		tr[i].ScopeSchemaURL = "https://opentelemetry.io/schemas/1.37.0"
		tr[i].ResourceSchemaURL = "https://opentelemetry.io/schemas/1.26.0"
	}
	root := &tr[0]
	root.ParentSpanID = "5f1e2d3c4b5a6978" // the API gateway's span, in another service
	root.Flags = store.FlagSampled | store.FlagHasIsRemote | store.FlagIsRemote
	root.TraceState = "acme=t61rcWkgMzE"
	root.DroppedAttributesCount, root.DroppedEventsCount = 3, 1
	root.ScopeDroppedAttributesCount = 1
	root.Links = []store.Link{{
		TraceID: prev[0].TraceID, SpanID: prev[0].SpanID,
		Attributes:             store.Attributes{"link.reason": "retry of a timed-out run"},
		Flags:                  store.FlagSampled | store.FlagHasIsRemote | store.FlagIsRemote,
		DroppedAttributesCount: 1,
	}, {
		TraceID: tr[1].TraceID, SpanID: tr[1].SpanID,
		Flags: store.FlagSampled | store.FlagHasIsRemote,
	}}
	return spans, root.TraceID, root.SpanID
}

func TestSpanPanelAndAPIShowTheOTLPEnvelope(t *testing.T) {
	st := openStore(t)
	spans, traceID, rootID := envelopeTrace()
	// A hostile scope attribute must render as text.
	spans[9].ScopeAttributes = store.Attributes{"<b>k</b>": "<script>alert(9)</script>"}
	if err := st.WriteSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, st, Config{})
	for _, path := range []string{"/traces/" + traceID + "?span=" + rootID, "/traces/" + traceID + "/spans/" + rootID + "?fragment=1"} {
		code, body := get(t, ts, path)
		if code != 200 {
			t.Fatalf("GET %s = %d: %.300s", path, code, body)
		}
		for _, want := range []string{
			`id="span-meta"`, "0x00000301", ">sampled<", ">remote<", "remote: the parent ran in another process",
			"acme=t61rcWkgMzE", "github.com/acme/research-agent", "1.8.2", "https://opentelemetry.io/schemas/1.37.0",
			"team", "search-platform", "replica", "capture_content", "https://opentelemetry.io/schemas/1.26.0",
			"SDK dropped 3 attributes, 1 event, 1 attribute of link 1",
			"Links (2)", "retry of a timed-out run", "this trace", ">local<", "0x00000101",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s lacks %q", path, want)
			}
		}
	}
	_, body := get(t, ts, "/traces/"+traceID+"?span="+spans[9].SpanID)
	if strings.Contains(body, "<script>alert(9)") || !strings.Contains(body, "&lt;script&gt;alert(9)") {
		t.Error("a scope attribute value is not escaped")
	}
	if strings.Contains(body, `id="span-dropped"`) {
		t.Error("a span nothing was dropped from is marked incomplete")
	}

	// The JSON API serialises the stored span: every field is there.
	_, raw := get(t, ts, "/api/v1/traces/"+traceID)
	var resp struct {
		Spans []map[string]any `json:"spans"`
	}
	if err := json.Unmarshal([]byte(raw), &resp); err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	for _, sp := range resp.Spans {
		if sp["span_id"] == rootID {
			root = sp
		}
	}
	for k, want := range map[string]any{
		"flags": 769.0, "dropped_attributes_count": 3.0, "dropped_events_count": 1.0,
		"scope_schema_url": "https://opentelemetry.io/schemas/1.37.0", "resource_schema_url": "https://opentelemetry.io/schemas/1.26.0",
		"scope_dropped_attributes_count": 1.0,
	} {
		if root[k] != want {
			t.Errorf("API span %s = %v, want %v", k, root[k], want)
		}
	}
	if sa, _ := root["scope_attributes"].(map[string]any); sa["team"] != "search-platform" || sa["replica"] != 3.0 {
		t.Errorf("API scope_attributes = %v", root["scope_attributes"])
	}
	if ls, _ := root["links"].([]any); len(ls) != 2 || ls[0].(map[string]any)["flags"] != 769.0 || ls[0].(map[string]any)["dropped_attributes_count"] != 1.0 {
		t.Errorf("API links = %v", root["links"])
	}
}

func TestBrowserSpanPanelShowsFlagsScopeLinksAndDroppedCounts(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a tab of the shared browser
	st := openStore(t)
	spans, traceID, rootID := envelopeTrace()
	if err := st.WriteSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(mustServer(t, st))
	defer ts.Close()
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(ts.URL+"/traces/"+traceID), chromedp.WaitVisible("#waterfall"))
	do(t, ctx,
		chromedp.Click(`.wf-row[data-span="`+rootID+`"] .span-link`),
		chromedp.WaitVisible(`#span-panel .span-panel[data-span="`+rootID+`"] #span-meta`),
	)
	meta := strings.ToLower(text(t, ctx, "#span-meta")) // headings are upper-cased by CSS
	for _, want := range []string{
		"Incomplete span: the sender's SDK dropped 3 attributes, 1 event, 1 attribute of link 1",
		"0x00000301", "sampled", "remote: the parent ran in another process",
		"github.com/acme/research-agent", "https://opentelemetry.io/schemas/1.37.0", "search-platform",
		"https://opentelemetry.io/schemas/1.26.0", "Links (2)", "retry of a timed-out run",
	} {
		if !strings.Contains(meta, strings.ToLower(want)) {
			t.Errorf("span panel's envelope section lacks %q; it shows:\n%s", want, meta)
		}
	}
	if n := count(t, ctx, "#span-meta .span-link-meta"); n != 2 {
		t.Errorf("links shown: %d, want 2", n)
	}
	// The page on a screen tall enough for the whole span panel: the
	// waterfall on the left, the panel with the section at its end.
	h, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(() => { const p = document.querySelector("#span-panel"); return Math.ceil(p.getBoundingClientRect().top + window.scrollY + p.scrollHeight + 40) })()`))
	if err != nil {
		t.Fatal(err)
	}
	do(t, ctx, chromedp.EmulateViewport(1500, int64(h)))
	docScreenshot(t, ctx, "span-meta")

	// A link opens the linked span's trace with that span selected.
	do(t, ctx, chromedp.Click(`#span-meta .span-link-meta[data-link="1"] a`), chromedp.WaitVisible(`#span-panel .span-panel[data-span="`+spans[0].SpanID+`"]`))
}

func mustServer(t *testing.T, st store.Store) *Server {
	t.Helper()
	srv, err := New(Config{}, Deps{Traces: st})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}
