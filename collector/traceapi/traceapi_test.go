package traceapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/collector/agenttrace"
	"github.com/loomwork/loomwork/collector/genai"
	"github.com/loomwork/loomwork/collector/traceapi"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
)

var base = time.Date(2026, 4, 2, 9, 0, 0, 0, time.UTC)

func newAPI(t *testing.T) (*httptest.Server, []store.Span) {
	t.Helper()
	spans := apiSpans()
	return serveAPI(t, spans), spans
}

// apiSpans is three generated agent traces of five spans each.
func apiSpans() []store.Span {
	spans, _ := genai.MapTraces(agenttrace.NewGenerator(1, base).Batch(3, 5), genai.Options{})
	return spans
}

// serveAPI serves the API over a fresh store holding spans.
func serveAPI(t *testing.T, spans []store.Span) *httptest.Server {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "t.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.WriteSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	traceapi.Register(mux, st, nil, func() time.Time { return base.Add(time.Hour) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestListFiltersAndPaginates(t *testing.T) {
	srv, _ := newAPI(t)
	code, body := get(t, srv.URL+"/api/v1/traces?since=2h&service=research-agent&limit=2&sort=start&asc=true")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	var page store.TracePage
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Traces) != 2 || page.NextPageToken == "" || page.Traces[0].SpanCount != 5 {
		t.Fatalf("page = %+v", page)
	}
	code, body = get(t, srv.URL+"/api/v1/traces?since=2h&service=research-agent&limit=2&sort=start&asc=true&page_token="+page.NextPageToken)
	if err := json.Unmarshal(body, &page); code != http.StatusOK || err != nil || len(page.Traces) != 1 {
		t.Fatalf("second page: %d %s", code, body)
	}
	code, body = get(t, srv.URL+"/api/v1/traces?service=nobody")
	if code != http.StatusOK || !strings.Contains(string(body), `"traces": []`) {
		t.Fatalf("empty result: %d %s", code, body)
	}
}

func TestBadParametersAre400sNamingTheParameter(t *testing.T) {
	srv, _ := newAPI(t)
	for q, want := range map[string]string{
		"limit=0":                             "limit:",
		"status=broken":                       "status:",
		"sort=name":                           "sort:",
		"start=yesterday":                     "start:",
		"min_duration=-1s":                    "min_duration:",
		"colour=blue":                         "unknown query parameter",
		"since=1h&start=2026-01-01T00:00:00Z": "since:",
		"page_token=garbage":                  "page token",
	} {
		code, body := get(t, srv.URL+"/api/v1/traces?"+q)
		if code != http.StatusBadRequest || !strings.Contains(string(body), want) {
			t.Errorf("?%s: %d %s; want 400 mentioning %q", q, code, body, want)
		}
	}
}

func TestGetTraceReturnsSpansOr404(t *testing.T) {
	srv, spans := newAPI(t)
	code, body := get(t, srv.URL+"/api/v1/traces/"+spans[0].TraceID)
	var tr traceapi.TraceResponse
	if err := json.Unmarshal(body, &tr); code != http.StatusOK || err != nil || len(tr.Spans) != 5 {
		t.Fatalf("get: %d %v %s", code, err, body)
	}
	if code, _ := get(t, srv.URL+"/api/v1/traces/"+strings.Repeat("ab", 16)); code != http.StatusNotFound {
		t.Errorf("unknown trace: %d, want 404", code)
	}
	if code, body := get(t, srv.URL+"/api/v1/traces/xyz"); code != http.StatusBadRequest || !strings.Contains(string(body), "invalid trace id") || !strings.Contains(string(body), "xyz") {
		t.Errorf("bad id: %d %s", code, body)
	}
	if code, body := get(t, srv.URL+"/healthz"); code != http.StatusOK || string(body) != "ok\n" {
		t.Errorf("healthz: %d %q", code, body)
	}
}

func TestGetTraceByUniquePrefixAndRejectsMalformedOrAmbiguousIDs(t *testing.T) {
	spans := apiSpans()
	// Two traces sharing a 12-digit prefix, next to the generated ones.
	a, b := "feedfacecafe0000000000000000000a", "feedfacecafe0000000000000000000b"
	all := append([]store.Span(nil), spans...)
	for _, id := range []string{a, b} {
		sp := spans[0]
		sp.TraceID, sp.ParentSpanID = id, ""
		all = append(all, sp)
	}
	srv := serveAPI(t, all)

	full := spans[0].TraceID
	code, body := get(t, srv.URL+"/api/v1/traces/"+strings.ToUpper(full[:8]))
	var tr traceapi.TraceResponse
	if err := json.Unmarshal(body, &tr); code != http.StatusOK || err != nil || tr.TraceID != full || len(tr.Spans) != 5 {
		t.Fatalf("GET by prefix %s: %d %v %.300s; want 200 with trace %s", strings.ToUpper(full[:8]), code, err, body, full)
	}
	for _, c := range []struct {
		id   string
		code int
		want []string
	}{
		{"feedfacecafe", http.StatusConflict, []string{"ambiguous", a, b}},
		{a[:31] + "c", http.StatusNotFound, []string{a[:31] + "c", "not found"}},
		{"feedfac", http.StatusBadRequest, []string{"invalid trace id", "feedfac"}},
		{a + "0", http.StatusBadRequest, []string{"invalid trace id", a + "0"}},
		{"feedfacg", http.StatusBadRequest, []string{"invalid trace id", "feedfacg"}},
	} {
		code, body := get(t, srv.URL+"/api/v1/traces/"+c.id)
		if code != c.code {
			t.Errorf("GET %s: %d %s; want %d", c.id, code, body, c.code)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(string(body), w) {
				t.Errorf("GET %s: body %s lacks %q", c.id, body, w)
			}
		}
	}
}
