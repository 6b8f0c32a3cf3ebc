package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
	"github.com/loomwork/loomwork/store/storetest"
)

// envelopeStore stores a generated trace whose root continues a remote
// parent, was cut by its SDK and links to an earlier trace, under a scope
// with attributes and schema URLs. It returns the store's path, the trace
// id and the earlier trace's root span id.
func envelopeStore(t *testing.T) (string, string, string) {
	t.Helper()
	spans := storetest.GenerateTraces(2, 5, 31)
	prev, tr := spans[:5], spans[5:]
	for i := range tr {
		tr[i].ScopeName, tr[i].ScopeVersion = "github.com/acme/research-agent", "1.8.2"
		tr[i].ScopeAttributes = store.Attributes{"team": "search-platform", "replica": int64(3)}
	}
	root := &tr[0]
	root.ParentSpanID = "5f1e2d3c4b5a6978"
	root.Flags = store.FlagSampled | store.FlagHasIsRemote | store.FlagIsRemote
	root.DroppedAttributesCount, root.DroppedEventsCount = 3, 1
	root.Links = []store.Link{{TraceID: prev[0].TraceID, SpanID: prev[0].SpanID,
		Attributes: store.Attributes{"link.reason": "retry"}, DroppedAttributesCount: 2,
		Flags: store.FlagSampled | store.FlagHasIsRemote | store.FlagIsRemote}}
	tr[1].Flags = store.FlagHasIsRemote // not sampled
	path := filepath.Join(t.TempDir(), "traces.db")
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WriteSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	if err := st.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return path, root.TraceID, prev[0].SpanID
}

func TestTracesGetShowsFlagsDroppedCountsScopesAndLinks(t *testing.T) {
	path, id, linked := envelopeStore(t)
	code, out, errOut := runCLI(t, "traces", "get", id, "--store", path)
	if code != 0 {
		t.Fatalf("traces get: exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"parent=remote", "dropped=3 attributes,1 event,2 attributes of link 1", "links=1", "not-sampled",
		"Span flags", "sampled, remote (0x301)", "not sampled, local (0x100)", "sampled, local (0x101)",
		"Instrumentation scopes", "github.com/acme/research-agent  1.8.2", "https://opentelemetry.io/schemas/1.37.0",
		"replica=3 team=search-platform",
		"Resource schema URLs", "https://opentelemetry.io/schemas/1.26.0",
		"Links", "/" + linked, "link.reason=retry (2 attributes dropped)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("traces get lacks %q:\n%s", want, out)
		}
	}

	code, out, errOut = runCLI(t, "traces", "get", id, "--json", "--store", path)
	if code != 0 {
		t.Fatalf("traces get --json: exit %d: %s", code, errOut)
	}
	var resp struct {
		Spans []store.Span `json:"spans"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatal(err)
	}
	var root *store.Span
	for i := range resp.Spans {
		if resp.Spans[i].ParentSpanID == "5f1e2d3c4b5a6978" {
			root = &resp.Spans[i]
		}
	}
	if root == nil {
		t.Fatal("--json lacks the root span")
	}
	if root.Flags != 0x301 || root.DroppedAttributesCount != 3 || root.DroppedEventsCount != 1 ||
		root.ScopeAttributes["team"] != "search-platform" || root.ScopeSchemaURL != "https://opentelemetry.io/schemas/1.37.0" ||
		root.ResourceSchemaURL != "https://opentelemetry.io/schemas/1.26.0" || len(root.Links) != 1 || root.Links[0].Flags != 0x301 ||
		root.Links[0].DroppedAttributesCount != 2 {
		t.Errorf("--json root span lacks envelope fields: %+v", root)
	}
	for _, key := range []string{`"flags": 769`, `"scope_attributes"`, `"scope_schema_url"`, `"resource_schema_url"`, `"dropped_attributes_count": 3`} {
		if !strings.Contains(out, key) {
			t.Errorf("--json lacks %s", key)
		}
	}
}

func TestTracesGetPrintsNoEnvelopeSectionsForSpansWithoutOne(t *testing.T) {
	path := tracesStore(t)
	code, out, errOut := runCLI(t, "traces", "get", tracesOther, "--store", path)
	if code != 0 {
		t.Fatalf("traces get: exit %d: %s", code, errOut)
	}
	for _, absent := range []string{"Span flags", "Instrumentation scopes", "Links", "parent=remote", "dropped="} {
		if strings.Contains(out, absent) {
			t.Errorf("traces get of a span without an OTLP envelope prints %q:\n%s", absent, out)
		}
	}
}
