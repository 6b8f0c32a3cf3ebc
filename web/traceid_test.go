package web

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/loomwork/loomwork/store"
)

// levelRecorder is a slog.Handler that keeps every record, so a test can
// say what was logged at which level.
type levelRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *levelRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *levelRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *levelRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *levelRecorder) WithGroup(string) slog.Handler      { return h }

// atLeast returns the messages and attributes of the records at level or
// above.
func (h *levelRecorder) atLeast(level slog.Level) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		if r.Level >= level {
			line := r.Level.String() + " " + r.Message
			r.Attrs(func(a slog.Attr) bool {
				line += " " + a.String()
				return true
			})
			out = append(out, line)
		}
	}
	return out
}

// loggedServer serves st with a logger that records levels.
func loggedServer(t *testing.T, st store.Store) (*httptest.Server, *levelRecorder) {
	t.Helper()
	rec := &levelRecorder{}
	srv, err := New(Config{}, Deps{Traces: st, Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts, rec
}

// fetch GETs path without following redirects.
func fetch(t *testing.T, ts *httptest.Server, path string) (*http.Response, string) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// apiError decodes a JSON API error body.
func apiError(t *testing.T, path, body string) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" {
		t.Fatalf("%s: body %q is not a JSON {\"error\": ...}: %v", path, body, err)
	}
	return e.Error
}

// refusalsLoggedBelowErrorLevel checks that the server logged the requests
// it refused, and none of them at error level.
func refusalsLoggedBelowErrorLevel(t *testing.T, rec *levelRecorder) {
	t.Helper()
	if len(rec.atLeast(slog.LevelDebug)) == 0 {
		t.Error("nothing was logged, not even at debug level: is the recorder wired?")
	}
	noErrorLogged(t, rec)
}

func noErrorLogged(t *testing.T, rec *levelRecorder) {
	t.Helper()
	if logged := rec.atLeast(slog.LevelError); len(logged) > 0 {
		t.Errorf("logged at error level for a caller's mistake:\n%s", strings.Join(logged, "\n"))
	}
}

const hostileID = "a1b2c3d4e5f60718293a4b5c6d7e8f90" // hostileTrace's id

func TestMalformedTraceIDIsABadRequestNotAServerError(t *testing.T) {
	st, _ := seeded(t)
	ts, rec := loggedServer(t, st)
	for _, c := range []struct{ path, id string }{
		{"/traces/xyz", "xyz"},
		{"/traces/a1b2c3d", "a1b2c3d"}, // 7 digits: shorter than the list shows
		{"/traces/" + hostileID + "0", hostileID + "0"},
		{"/traces/a1b2c3d4e5f60718293a4b5c6d7e8f9g", "a1b2c3d4e5f60718293a4b5c6d7e8f9g"},
		{"/traces/xyz/rows?parent=00000000000000a1", "xyz"},
		{"/traces/xyz/spans/00000000000000a1", "xyz"},
		{"/api/v1/traces/xyz", "xyz"},
		{"/api/v1/traces/a1b2c3d", "a1b2c3d"},
		{"/api/v1/traces/" + hostileID + "00", hostileID + "00"},
		{"/api/v1/traces/not-a-trace-id/rollup", "not-a-trace-id"},
	} {
		resp, body := fetch(t, ts, c.path)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s = %d, want 400: %.300s", c.path, resp.StatusCode, body)
			continue
		}
		msg := body
		if strings.HasPrefix(c.path, "/api/") {
			msg = apiError(t, c.path, body)
		}
		if !strings.Contains(msg, "invalid trace id") || !strings.Contains(msg, c.id) {
			t.Errorf("GET %s: the message does not say trace id %s is invalid: %.300s", c.path, c.id, msg)
		}
	}
	refusalsLoggedBelowErrorLevel(t, rec)
}

func TestUniqueTraceIDPrefixRedirectsToTheFullTraceURLKeepingTheQuery(t *testing.T) {
	st, _ := seeded(t)
	ts, rec := loggedServer(t, st)
	for path, want := range map[string]string{
		"/traces/a1b2c3d4":                              "/traces/" + hostileID,
		"/traces/a1b2c3d4e?p=1&q=chat":                  "/traces/" + hostileID + "?p=1&q=chat",
		"/traces/" + strings.ToUpper(hostileID):         "/traces/" + hostileID,
		"/traces/A1B2C3D4/rows?parent=00000000000000a1": "/traces/" + hostileID + "/rows?parent=00000000000000a1",
		"/traces/a1b2c3d4/spans/00000000000000a2":       "/traces/" + hostileID + "/spans/00000000000000a2",
	} {
		resp, body := fetch(t, ts, path)
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
			t.Errorf("GET %s = %d to %q, want 302 to %s: %.200s", path, resp.StatusCode, resp.Header.Get("Location"), want, body)
		}
	}
	// Where it leads is the trace.
	resp, body := fetch(t, ts, "/traces/"+hostileID+"?p=1&q=chat")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, hostileID) || !strings.Contains(body, "chat gpt-4o") {
		t.Fatalf("GET the redirect's target = %d, want the trace page: %.300s", resp.StatusCode, body)
	}
	noErrorLogged(t, rec)
}

func TestAPIServesATraceNamedByAUniquePrefixUnderItsFullID(t *testing.T) {
	st, _ := seeded(t)
	ts, rec := loggedServer(t, st)
	resp, body := fetch(t, ts, "/api/v1/traces/A1B2C3D4")
	var tr struct {
		TraceID string       `json:"trace_id"`
		Spans   []store.Span `json:"spans"`
	}
	if err := json.Unmarshal([]byte(body), &tr); resp.StatusCode != http.StatusOK || err != nil || tr.TraceID != hostileID || len(tr.Spans) != 3 {
		t.Fatalf("GET /api/v1/traces/A1B2C3D4 = %d, trace_id %q, %d spans (%v); want 200, %s, 3 spans", resp.StatusCode, tr.TraceID, len(tr.Spans), err, hostileID)
	}
	resp, body = fetch(t, ts, "/api/v1/traces/a1b2c3d4e5f6/rollup")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"critical_path_ms": 900`) {
		t.Fatalf("GET /api/v1/traces/a1b2c3d4e5f6/rollup = %d: %.300s", resp.StatusCode, body)
	}
	noErrorLogged(t, rec)
}

func TestAmbiguousTraceIDPrefixIsAConflictListingTheCandidates(t *testing.T) {
	st, _ := seeded(t)
	a, b := "cafecafe000000000000000000000001", "cafecafe000000000000000000000002"
	var spans []store.Span
	for _, id := range []string{a, b} {
		sp := hostileTrace()[0]
		sp.TraceID = id
		spans = append(spans, sp)
	}
	if err := st.WriteSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	ts, rec := loggedServer(t, st)
	for _, path := range []string{"/traces/cafecafe", "/traces/CAFECAFE0000?p=2", "/api/v1/traces/cafecafe", "/api/v1/traces/cafecafe/rollup"} {
		resp, body := fetch(t, ts, path)
		if resp.StatusCode != http.StatusConflict {
			t.Errorf("GET %s = %d, want 409: %.300s", path, resp.StatusCode, body)
			continue
		}
		msg := body
		if strings.HasPrefix(path, "/api/") {
			msg = apiError(t, path, body)
		}
		if !strings.Contains(msg, "ambiguous") || !strings.Contains(msg, a) || !strings.Contains(msg, b) {
			t.Errorf("GET %s: the message does not list %s and %s: %.400s", path, a, b, msg)
		}
	}
	// One more digit settles it.
	if resp, _ := fetch(t, ts, "/api/v1/traces/"+b[:31]+"2"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET the full id of one of them = %d, want 200", resp.StatusCode)
	}
	refusalsLoggedBelowErrorLevel(t, rec)
}

func TestTraceIDPrefixNoTraceHasIsNotFound(t *testing.T) {
	st, _ := seeded(t)
	ts, rec := loggedServer(t, st)
	for _, path := range []string{"/traces/deadbeef00", "/api/v1/traces/deadbeef00", "/api/v1/traces/DEADBEEF00/rollup"} {
		resp, body := fetch(t, ts, path)
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "deadbeef00") && !strings.Contains(body, "DEADBEEF00") {
			t.Errorf("GET %s = %d, want 404 naming the prefix: %.300s", path, resp.StatusCode, body)
		}
	}
	refusalsLoggedBelowErrorLevel(t, rec)
}
