package web

import (
	"context"
	"encoding/json"
	"html"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
	"github.com/loomwork/loomwork/store/storetest"
)

// windowStores runs f on the embedded store and on ClickHouse.
func windowStores(t *testing.T, f func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) { f(t, openStore(t)) })
	t.Run("clickhouse", func(t *testing.T) {
		testtier.Slow(t)
		srv := chtest.Start(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		st, err := clickhouse.Open(ctx, clickhouse.Config{DSN: srv.DSN(srv.NewDatabase(t))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Shutdown(store.WithDefaultProject(context.Background())) })
		f(t, st)
	})
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The windowed rollup (summary as ingest keeps it, tree from the stored
// spans' bones, analysis kept by the store) equals rollup.Compute over the
// trace read whole, field for field, for awkward traces (shuffled batches,
// copies, orphans, a remote parent, a parent cycle, a span naming itself,
// clipped, detached and inverted spans, aggregates, explicit cost) and
// agent traces, on both stores, before and after the analysis is kept.
func TestWindowedRollupEqualsComputeOnTheSameSpans(t *testing.T) {
	windowStores(t, func(t *testing.T, st store.Store) {
		ctx := store.WithDefaultProject(context.Background())
		w := st.(store.WindowReader)
		var ids []string
		for k, seed := range []uint64{1, 2, 3} {
			id := strings.Repeat(string("cde"[k]), 31) + "1"
			spans := storetest.AwkwardTrace(id, seed)
			for lo := 0; lo < len(spans); lo += 5 {
				if err := st.WriteSpans(ctx, spans[lo:min(lo+5, len(spans))]); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.WriteSpans(ctx, spans[:4]); err != nil { // copies
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		gen := storetest.GenerateTraces(3, 40, 9)
		if err := st.WriteSpans(ctx, gen); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, gen[0].TraceID, gen[len(gen)-1].TraceID)
		prices := pricing.Default()
		for _, id := range ids {
			spans, err := st.GetTrace(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			want := rollup.Compute(spans, prices)
			for pass := range 2 { // computed, then kept
				got, _, err := rollup.Window(ctx, w, id, prices)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("trace %s pass %d: windowed rollup differs from Compute:\ngot  %s\nwant %s", id, pass, jsonOf(got), jsonOf(want))
				}
			}
			if len(want.Notes) == 0 && strings.HasPrefix(id, "c") {
				t.Fatalf("awkward trace %s rolled up with no repair notes: the fixture lost its awkwardness", id)
			}
		}
	})
}

var dataMore = regexp.MustCompile(`data-more="([^"]+)"`)

// A trace over WindowSpans is drawn by window: the first page lists the
// root and its sub-agents collapsed, an expansion lists a page of one
// sub-agent's children with a link to the rest, the panel, the rollup and
// the paged API read it by window, and search lists matches.
func TestWindowedTracePageExpandPanelSearchAndAPI(t *testing.T) {
	windowStores(t, func(t *testing.T, st store.Store) {
		ctx := store.WithDefaultProject(context.Background())
		spans := bigTraceSpans(1_600) // root, 50 sub-agents, 30 steps each
		if err := st.WriteSpans(ctx, spans); err != nil {
			t.Fatal(err)
		}
		ts := newServer(t, st, Config{WindowSpans: 1_000})
		id := spans[0].TraceID
		code, body := get(t, ts, "/traces/"+id)
		if code != 200 || strings.Count(body, `data-depth=`) != 51 || !strings.Contains(body, `id="window-note"`) {
			t.Fatalf("windowed page: %d, %d rows (want 200, root + 50 sub-agents, the window note)", code, strings.Count(body, `data-depth=`))
		}
		// An expansion pages the sub-agent's 30 children 20 at a time when
		// the page budget says so: here all fit, and none is repeated.
		sub := spans[1].SpanID
		code, frag := get(t, ts, "/traces/"+id+"/rows?parent="+sub)
		if n := strings.Count(frag, `data-depth="2"`); code != 200 || n != 30 || dataMore.MatchString(frag) {
			t.Fatalf("expansion: %d, %d rows at depth 2 (want 30, no more link)", code, n)
		}
		// A root with more children than a page: 500 rows, then the rest.
		wide := bigTraceSpans(51)
		root := wide[0]
		root.TraceID = "cccccccccccccccccccccccccccccc02"
		var fan []store.Span
		fan = append(fan, root)
		for k := range 700 {
			c := root
			c.SpanID, c.ParentSpanID, c.Name = hexID("7", k, 16), root.SpanID, "step"
			c.StartTime = root.StartTime.Add(time.Duration(k) * time.Millisecond)
			c.EndTime = c.StartTime.Add(time.Millisecond)
			fan = append(fan, c)
		}
		for k := range 400 {
			c := fan[1]
			c.SpanID, c.ParentSpanID = hexID("8", k, 16), fan[1].SpanID
			fan = append(fan, c)
		}
		if err := st.WriteSpans(ctx, fan); err != nil {
			t.Fatal(err)
		}
		_, body = get(t, ts, "/traces/"+root.TraceID)
		m := dataMore.FindStringSubmatch(body)
		if n := strings.Count(body, `data-depth=`); n != PageRows || m == nil {
			t.Fatalf("wide trace page: %d rows, more link %v (want %d and one)", n, m != nil, PageRows)
		}
		_, rest := get(t, ts, html.UnescapeString(m[1]))
		if n := strings.Count(rest, `data-depth="1"`); n != 700-(PageRows-1) || dataMore.MatchString(rest) {
			t.Fatalf("the rest of the root's children: %d rows (want %d, no more link)", n, 700-(PageRows-1))
		}
		// The panel, search and the rollup.
		code, panel := get(t, ts, "/traces/"+id+"/spans/"+spans[5].SpanID+"?fragment=1")
		if code != 200 || !strings.Contains(panel, spans[5].SpanID) {
			t.Fatalf("span panel: %d", code)
		}
		_, found := get(t, ts, "/traces/"+id+"?q=worker-7")
		if n := strings.Count(found, `data-depth=`); n != 1 || !strings.Contains(found, "invoke_agent worker-7") {
			t.Fatalf("search worker-7 on a windowed trace: %d rows", n)
		}
		all, err := st.GetTrace(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		_, rj := get(t, ts, "/api/v1/traces/"+id+"/rollup")
		if want := rollup.Compute(all, pricing.Default()); strings.TrimSpace(rj) != strings.TrimSpace(indentJSON(t, want)) {
			t.Fatalf("API rollup of a windowed trace differs from Compute")
		}
		// The paged API: pages of 700 concatenate to GetTrace; only the
		// first carries the rollup.
		var got []store.Span
		tok := ""
		for pages := 0; ; pages++ {
			_, pj := get(t, ts, "/api/v1/traces/"+id+"?limit=700&page_token="+tok)
			var resp TraceResponse
			if err := json.Unmarshal([]byte(pj), &resp); err != nil {
				t.Fatal(err)
			}
			if (resp.Rollup != nil) != (pages == 0) {
				t.Fatalf("page %d carries a rollup: %v", pages, resp.Rollup != nil)
			}
			got = append(got, resp.Spans...)
			if tok = resp.NextPageToken; tok == "" {
				break
			}
		}
		if jsonOf(got) != jsonOf(all) {
			t.Fatalf("API pages (%d spans) differ from GetTrace (%d)", len(got), len(all))
		}
		if code, _ := get(t, ts, "/api/v1/traces/"+id+"?limit=0"); code != 400 {
			t.Errorf("limit=0: %d, want 400", code)
		}
		if code, _ := get(t, ts, "/api/v1/traces/"+id+"?page_token=nope"); code != 400 {
			t.Errorf("a bad page token: %d, want 400", code)
		}
	})
}

func indentJSON(t *testing.T, v any) string {
	rec := httptest.NewRecorder()
	writeJSON(rec, 200, v)
	return rec.Body.String()
}
