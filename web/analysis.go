package web

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// This file holds the first open of a huge trace nothing has analysed yet.
//
// Drawing a trace by window needs its analysis (the tree's tops, the
// critical path, the priced calls: keptWindow), derived once from every
// span's bones and then kept by the store. For a million spans that takes
// seconds (7–8 s on SQLite, 17–19 s on ClickHouse on an idle 2-core
// machine), and a request that derived it itself held the reader that
// long; under load it passed StoreTimeout, answered 503, and threw the
// work away, so every retry started again from nothing. While a Keeper
// runs, the request hands the trace to it instead and waits AnalysisWait:
// the Keeper analyses each trace once, one at a time (a million spans'
// analysis peaks at gigabytes), whatever the requests do, and the page
// answers within the wait either way — the trace, an older analysis with
// a note, or "being analysed" with a refresh.

// DefaultAnalysisWait is Config.AnalysisWait's default: a trace of some
// ten thousands of spans is analysed within it and opens at once.
const DefaultAnalysisWait = time.Second

// analysisRetry is the Retry-After (and the page's Refresh) while a
// trace is being analysed.
const analysisRetry = 2

// analysisHub holds the running Keeper, if any, for the Servers of one UI
// (the root and its per-project Servers).
type analysisHub struct {
	mu sync.Mutex
	k  *Keeper
}

func (h *analysisHub) keeper() *Keeper {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.k
}

func (h *analysisHub) set(k *Keeper) {
	h.mu.Lock()
	h.k = k
	h.mu.Unlock()
}

// clear forgets k if it is the one set.
func (h *analysisHub) clear(k *Keeper) {
	h.mu.Lock()
	if h.k == k {
		h.k = nil
	}
	h.mu.Unlock()
}

// analysing is the error of a request for a huge trace the Keeper is still
// analysing (or has queued): nothing of the trace's analysis is kept yet.
type analysing struct {
	traceID string
	spans   int64
	// since is when the analysis was asked for.
	since time.Time
	now   time.Time
}

func (e *analysing) Error() string {
	return fmt.Sprintf("trace %s: its %s spans are being analysed (asked %s ago): retry in %d s",
		e.traceID, fmtInt(e.spans), e.now.Sub(e.since).Round(time.Second), analysisRetry)
}

// analysingAnswer answers a request for a trace being analysed: under
// /api/, 503 with Retry-After and {"error", "analysing": true}; a page,
// 200 with a Refresh header and what is known (the span count, how long
// the analysis has run), so a browser reloads by itself until the trace
// opens.
func (s *Server) analysingAnswer(w http.ResponseWriter, r *http.Request, e *analysing) {
	w.Header().Set("Retry-After", strconv.Itoa(analysisRetry))
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": e.Error(), "analysing": true, "spans": e.spans})
		return
	}
	w.Header().Set("Refresh", strconv.Itoa(analysisRetry))
	render(w, r, AnalysingPage(e.traceID, e.spans, e.now.Sub(e.since).Round(time.Second).String()))
}
