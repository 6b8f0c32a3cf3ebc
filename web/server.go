package web

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/scorer/report"
	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

//go:embed static
var staticFS embed.FS

// Config configures the UI.
type Config struct {
	// AuthToken, when set, is required as "Authorization: Bearer TOKEN" on
	// every request but /healthz (browsers sign in with the form at /login,
	// which POSTs the token and gets a session cookie). Empty means no
	// authentication, the right default on a laptop.
	AuthToken string
	// Keys, when set, authenticates project API keys the same way (bearer
	// header, or a /login session): a key's requests see only its
	// project's traces, runs, reports and ablations (see projectServer);
	// a read-only key may only GET. AuthToken, if also set, still opens
	// the default project with everything.
	Keys KeyFunc
	// TraceCacheBytes bounds the memory of the trace cache (the spans,
	// rollup and waterfall index of recently opened traces) by an estimate
	// of each trace's size from its spans, attributes and events; least
	// recently used traces go first, and a trace larger than the whole
	// budget is served but not kept (default DefaultTraceCacheBytes,
	// 256 MiB).
	TraceCacheBytes int64
	// CacheFresh is how long a loaded trace is served without re-reading the
	// store (default 10s): paging, expanding and selecting spans of a huge
	// trace then cost no store read, and a trace still receiving spans shows
	// them within this delay.
	CacheFresh time.Duration
	// WindowSpans: a trace with more spans than this, on a store that
	// offers store.WindowReader, is drawn by the window the user looks at
	// (web/window.go) instead of read whole (default DefaultWindowSpans).
	WindowSpans int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// SessionTTL is how long a browser sign-in (/login) lasts (default
	// DefaultSessionTTL, 12 h).
	SessionTTL time.Duration
	// StoreTimeout bounds how long a request waits for the trace store
	// (default DefaultStoreTimeout); past it, and while the store is
	// unreachable (store.ErrUnavailable), the request answers 503 with
	// Retry-After, naming the store.
	StoreTimeout time.Duration
	// AnalysisWait is how long the first open of a huge trace nothing has
	// analysed yet waits for the analysis (its tree and critical path,
	// web/analysis.go) before answering "being analysed" instead (default
	// DefaultAnalysisWait). It applies while a Keeper runs: the Keeper
	// does the analysis, once, whatever the requests do; without one a
	// request analyses the trace itself, within StoreTimeout.
	AnalysisWait time.Duration
}

// KeyFunc authenticates a project API key secret: its project ("" is the
// default project) and whether it may write. It compares in constant time
// and never logs the secret.
type KeyFunc func(secret string) (project string, canWrite bool, ok bool)

// Validate reports configuration errors.
func (c Config) Validate() error {
	if c.AuthToken != "" && len(c.AuthToken) < 16 {
		return errors.New("auth_token must be at least 16 characters")
	}
	if c.TraceCacheBytes < 0 {
		return errors.New("trace_cache_bytes must not be negative")
	}
	if c.SessionTTL < 0 {
		return errors.New("session_ttl must not be negative")
	}
	if c.WindowSpans < 0 {
		return errors.New("window_spans must not be negative")
	}
	if c.StoreTimeout < 0 {
		return errors.New("store_timeout must not be negative")
	}
	if c.AnalysisWait < 0 {
		return errors.New("analysis_wait must not be negative")
	}
	return nil
}

// TraceReader is what the UI needs from the trace store.
type TraceReader interface {
	GetTrace(ctx context.Context, traceID string) ([]store.Span, error)
	ListTraces(ctx context.Context, q store.TraceQuery) (store.TracePage, error)
	ResolveTraceID(ctx context.Context, idOrPrefix string) (string, error)
}

// Deps are the UI's data sources. Only Traces is required.
type Deps struct {
	Traces TraceReader
	Prices *pricing.Table // nil: the shipped table
	Logger *slog.Logger
	// Files serves runs, reports and ablations; nil hides those pages.
	Files *FileSources
	// Labels is the human labels file (datasets labels JSONL) the labels
	// form appends to; "" leaves the form without a file to write.
	Labels string
	// Health backs /healthz and /readyz with the ingest pipeline's state;
	// nil: /healthz says only that the UI is up.
	Health func(ctx context.Context) HealthReport
	// Approvals lists runs suspended at approval gates and records
	// answers (/approvals); nil: the page says how to configure it.
	Approvals Approvals
	// Workflows lists workflow runs with each step's state and links to
	// their traces (/workflows); nil: the page says how to configure it.
	Workflows Workflows
	// Experiments compares the experiments the trace store keeps
	// (/experiments/compare); nil: the compare page says it cannot. The
	// list needs only the store.
	Experiments ExperimentComparer
	// Datasets is the folder of versioned datasets (datasets.Registry)
	// the /datasets pages list and the trace list's "make cases" grows;
	// "" hides them behind a note on how to configure it.
	Datasets string
	// Audit is the policy audit log /audit shows, with its chain checked;
	// nil: the page says how to configure it.
	Audit AuditSource
	// StoreName names the trace store in errors (e.g. "clickhouse
	// 127.0.0.1:9000/loomwork", without secrets); "" says "the trace store".
	StoreName string
}

// HealthReport is what /healthz and /readyz answer.
type HealthReport struct {
	// Healthy: /healthz answers 200, else 503.
	Healthy bool
	// Ready: /readyz answers 200, else 503 (a load balancer drains on it).
	Ready bool
	// Status is one word ("ok", "degraded", "unavailable", "draining").
	Status string
	// Reason says why the status is not ok (what the server waits for),
	// in words without secrets: every caller gets it.
	Reason string
	// Detail is the full report as JSON; shown only to authorized callers
	// when a token is set (it names the store and its errors).
	Detail any
}

// Server is the UI's http.Handler.
type Server struct {
	cfg  Config
	deps Deps
	mux  *http.ServeMux
	log  *slog.Logger
	// cache is shared by the per-project Servers (one memory budget
	// however many projects are opened); cacheScope, the project, prefixes
	// every key, so a cached trace is never served across projects.
	cache      *traceCache
	cacheScope string
	csrf       *csrfGuard
	// runsMemo keeps the runs list's rows per journal file (runsmemo.go).
	runsMemo runsMemo
	// sessions are the browser sign-ins (/login), shared with the
	// per-project Servers.
	sessions *sessions

	// kind is the store's derived kind for a windowed trace's kept
	// rollup under this server's prices (windowKind).
	kindOnce sync.Once
	kind     string

	// analysis hands a huge trace's first open to the running Keeper;
	// shared with the per-project Servers.
	analysis *analysisHub

	// Projects (Config.Keys): one Server per project a key has opened,
	// each with its project's file directories, all on one trace cache.
	projMu   sync.Mutex
	projects map[string]*Server
}

type cachedTrace struct {
	spans  []store.Span
	rollup rollup.Rollup
	index  *traceIndex
	labels []string // model labels ("scripted") found on the spans
	loaded time.Time
	bytes  int64 // traceBytes(spans), what the cache accounts for it
	// window is set, and spans and index nil, for a trace drawn by
	// window (web/window.go).
	window *windowTrace
}

// modelLabels lists the distinct loomwork.model.label values of a trace, so
// a page can say when its model answers were scripted.
func modelLabels(spans []store.Span) []string {
	var out []string
	seen := map[string]bool{}
	for i := range spans {
		if l, ok := spans[i].Attributes.String(semconv.AttrModelLabel); ok && l != "" && !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

// New returns the UI handler.
func New(cfg Config, deps Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("web config: %w", err)
	}
	if deps.Traces == nil {
		return nil, errors.New("web config: a trace reader is required")
	}
	if deps.Prices == nil {
		deps.Prices = pricing.Default()
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TraceCacheBytes == 0 {
		cfg.TraceCacheBytes = DefaultTraceCacheBytes
	}
	if cfg.CacheFresh == 0 {
		cfg.CacheFresh = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.WindowSpans == 0 {
		cfg.WindowSpans = DefaultWindowSpans
	}
	if cfg.StoreTimeout == 0 {
		cfg.StoreTimeout = DefaultStoreTimeout
	}
	if cfg.AnalysisWait == 0 {
		cfg.AnalysisWait = DefaultAnalysisWait
	}
	s := &Server{cfg: cfg, deps: deps, mux: http.NewServeMux(), log: deps.Logger, cache: newTraceCache(cfg.TraceCacheBytes),
		csrf: newCSRFGuard(), sessions: newSessions(cfg.SessionTTL, cfg.Now), analysis: &analysisHub{}}
	static, _ := fs.Sub(staticFS, "static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", noListing(http.FileServerFS(static))))
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.HandleFunc("GET /login", s.loginForm)
	s.mux.HandleFunc("POST /login", s.loginPost)
	s.mux.HandleFunc("POST /logout", s.logout)
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/traces", http.StatusFound) })
	s.mux.HandleFunc("GET /traces", s.traceList)
	s.mux.HandleFunc("GET /traces/{id}", s.tracePage)
	s.mux.HandleFunc("GET /traces/{id}/rows", s.traceRows)
	s.mux.HandleFunc("GET /traces/{id}/spans/{span}", s.spanPage)
	s.mux.HandleFunc("GET /api/v1/traces", s.apiTraceList)
	s.mux.HandleFunc("GET /api/v1/traces/{id}", s.apiTrace)
	s.mux.HandleFunc("GET /api/v1/traces/{id}/rollup", s.apiRollup)
	s.registerSessions()
	if deps.Files != nil {
		s.registerFiles()
	}
	s.registerCompare()
	s.registerLabels()
	s.registerApprovals()
	s.registerWorkflows()
	s.registerExperiments()
	s.registerDatasets()
	s.registerAudit()
	return s, nil
}

// ServeHTTP implements http.Handler, enforcing the bearer token and the
// project keys if set.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'")
	// A request without a project key reads the default project, and says
	// so: a store that fails reads naming no project (ClickHouse) must see
	// this choice, never infer it. A key's project replaces it below.
	ctx := store.WithDefaultProject(r.Context())
	// Every read of the store has a deadline: a store that does not
	// answer (a hung server) costs a user StoreTimeout, then a 503 that
	// says so (fail), never a page that hangs. Health checks bound their
	// own ping.
	if !strings.HasPrefix(r.URL.Path, "/static/") && r.URL.Path != "/healthz" && r.URL.Path != "/readyz" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.StoreTimeout)
		defer cancel()
	}
	r = r.WithContext(ctx)
	open := r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || r.URL.Path == "/login" || r.URL.Path == "/logout"
	if open || (s.cfg.AuthToken == "" && s.cfg.Keys == nil) {
		s.mux.ServeHTTP(w, r)
		return
	}
	a := s.authenticate(r)
	switch {
	case !a.ok:
		w.Header().Set("WWW-Authenticate", `Bearer realm="loomwork"`)
		http.Error(w, "unauthorized: send Authorization: Bearer TOKEN (browsers: sign in at /login)", http.StatusUnauthorized)
	case !a.key:
		s.mux.ServeHTTP(w, r)
	case !a.canWrite && r.Method != http.MethodGet && r.Method != http.MethodHead:
		http.Error(w, "forbidden: a read-only key may only read", http.StatusForbidden)
	default:
		ps, err := s.projectServer(a.project)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		ps.mux.ServeHTTP(w, r.WithContext(store.WithProject(r.Context(), a.project)))
	}
}

// projectServer returns the Server for a project key's requests: the same
// trace reader (every read scoped by the request's project in its
// context), the same trace cache under keys of the project's own (a
// cached trace is never served across projects, and the cache's budget
// bounds them all: a cache per project grew memory with every project
// opened), the project's subdirectory of each file directory
// (RUNS/<project>, REPORTS/<project>, ABLATIONS/<project>,
// DATASETS/.projects/<project>), and no human labels file, approvals or
// audit log, which are not per project.
func (s *Server) projectServer(project string) (*Server, error) {
	s.projMu.Lock()
	defer s.projMu.Unlock()
	if ps, ok := s.projects[project]; ok {
		return ps, nil
	}
	deps := s.deps
	deps.Labels, deps.Approvals, deps.Workflows, deps.Audit = "", nil, nil, nil
	if deps.Datasets != "" {
		// ".projects" is no dataset name (names start with a letter or
		// digit), so a project's datasets never mix with the default's.
		deps.Datasets = filepath.Join(deps.Datasets, ".projects", projectDir(project))
	}
	if f := s.deps.Files; f != nil {
		sub := func(dir string) string {
			if dir == "" {
				return ""
			}
			return filepath.Join(dir, projectDir(project))
		}
		deps.Files = &FileSources{RunsDir: sub(f.RunsDir), ReportsDir: sub(f.ReportsDir), AblationsDir: sub(f.AblationsDir)}
	}
	cfg := s.cfg
	cfg.AuthToken, cfg.Keys = "", nil
	ps, err := New(cfg, deps)
	if err != nil {
		return nil, fmt.Errorf("project server: %w", err)
	}
	ps.sessions, ps.analysis = s.sessions, s.analysis
	ps.cache, ps.cacheScope = s.cache, project+"\x00"
	if s.projects == nil {
		s.projects = map[string]*Server{}
	}
	s.projects[project] = ps
	return ps, nil
}

// projectDir is a project's subdirectory name ("default" for the default
// project). Project names are [a-z0-9_-] (internal/projects), so the name
// is a plain directory name.
func projectDir(project string) string {
	if project == "" {
		return "default"
	}
	return project
}

// noListing serves files only: a directory (a path ending in "/") is 404,
// not a listing of what is there.
func noListing(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Handle mounts an extra handler on the UI's mux (the collector uses it).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// auth is what a request's credentials are.
type auth struct {
	ok       bool
	key      bool // a project key (else the shared token)
	project  string
	canWrite bool
}

// authenticate reads the bearer header, else the /login session cookie
// (whose token is held server-side), and checks the token against the
// project keys, then the shared token — on every request, so a revoked
// key's session stops working.
func (s *Server) authenticate(r *http.Request) auth {
	tok := ""
	if t, ok := bearerToken(r.Header.Get("Authorization")); ok {
		tok = t
	} else if c, err := r.Cookie(authCookie); err == nil {
		tok, _ = s.sessions.token(c.Value)
	}
	return s.check(tok)
}

func (s *Server) check(tok string) auth {
	if tok == "" {
		return auth{}
	}
	if s.cfg.Keys != nil {
		if p, w, ok := s.cfg.Keys(tok); ok {
			return auth{ok: true, key: true, project: p, canWrite: w}
		}
	}
	if s.cfg.AuthToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.AuthToken)) == 1 {
		return auth{ok: true, canWrite: true}
	}
	return auth{}
}

// authorized: the request may see everything of the default project (the
// shared token), or no authentication is configured.
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.AuthToken == "" && s.cfg.Keys == nil {
		return true
	}
	a := s.authenticate(r)
	return a.ok && !a.key
}

// bearerToken returns the token of an "Authorization: Bearer TOKEN" value;
// the scheme is case-insensitive (RFC 9110 §11.1).
func bearerToken(header string) (string, bool) {
	const scheme = "bearer "
	if len(header) < len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return "", false
	}
	return header[len(scheme):], true
}

// loadTrace returns a trace's spans, rollup and index. A trace loaded less
// than CacheFresh ago is served from memory; after that it is re-read, and
// its rollup recomputed only if its span count changed.
func (s *Server) loadTrace(ctx context.Context, id string) (cachedTrace, error) {
	now := s.cfg.Now()
	// Each project has its own Server (projectServer) and its own keys in
	// the shared cache: a cached trace is never served across projects.
	key := s.cacheScope + id
	c, ok := s.cache.get(key)
	if ok && c.window == nil && now.Sub(c.loaded) < s.cfg.CacheFresh {
		return c, nil
	}
	spans, err := s.deps.Traces.GetTrace(ctx, id)
	if err != nil {
		return cachedTrace{}, err
	}
	if ok && len(c.spans) == len(spans) {
		c.loaded = now
	} else {
		// The rollup and the waterfall index only read the spans: build
		// them side by side (a 100k-span trace's open is CPU-bound).
		var r rollup.Rollup
		var wg sync.WaitGroup
		wg.Go(func() { r = rollup.Compute(spans, s.deps.Prices) })
		ix := buildTraceIndex(spans)
		wg.Wait()
		ix.setCritical(&r)
		c = cachedTrace{spans: spans, rollup: r, index: ix, labels: modelLabels(spans), loaded: now,
			bytes: traceBytes(spans)}
	}
	s.cache.put(key, c)
	return c, nil
}

// badRequest reports an input error; the message names the parameter.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

// fail answers a request with err's status and message (a JSON
// {"error": ...} body under /api/, else the error page): 400 for an input
// error (a badRequest, a malformed trace id), 409 for a trace id prefix
// several traces share (the message lists some), 404 for what does not
// exist, 500 for the rest. Only 500s are logged as errors; the caller's
// mistakes are logged at debug level.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	var br badRequest
	var an *analysing
	switch {
	case errors.As(err, &an):
		s.analysingAnswer(w, r, an)
		return
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(r.Context().Err(), context.DeadlineExceeded):
		s.unavailable(w, r, err)
		return
	case errors.Is(err, context.Canceled):
		return
	case errors.As(err, &br), errors.Is(err, store.ErrBadTraceID), errors.Is(err, store.ErrBadExperimentQuery), errors.Is(err, report.ErrBadInput):
		status = http.StatusBadRequest
	case errors.Is(err, store.ErrAmbiguousTraceID):
		status = http.StatusConflict
	case errors.Is(err, store.ErrNotFound), errors.Is(err, errNotFound), errors.Is(err, store.ErrExperimentNotFound),
		errors.Is(err, datasets.ErrDatasetNotFound), errors.Is(err, datasets.ErrVersionNotFound), errors.Is(err, errNoDatasets):
		status = http.StatusNotFound
	}
	if status == http.StatusInternalServerError {
		s.log.Error("request failed", "path", r.URL.Path, "err", err)
	} else {
		s.log.Debug("request refused", "path", r.URL.Path, "status", status, "err", err)
	}
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeJSON(w, status, map[string]string{"error": err.Error()})
		return
	}
	w.WriteHeader(status)
	render(w, r, ErrorPage(status, err.Error()))
}

// DefaultStoreTimeout is how long a request waits for the trace store
// unless Config.StoreTimeout says otherwise.
const DefaultStoreTimeout = 30 * time.Second

// storeRetryAfter is the Retry-After of a 503 for an unavailable store.
const storeRetryAfter = "5"

// unavailable answers a read the store could not serve in time, or at
// all (store.ErrUnavailable): 503 with Retry-After, naming the store and
// the wait, a JSON {"error": …} under /api/, the error page otherwise.
// Logged at warn: an outage, not a bug.
func (s *Server) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	name := s.deps.StoreName
	if name == "" {
		name = "the trace store"
	}
	msg := fmt.Sprintf("%s is unavailable; retry later: %v", name, err)
	if !errors.Is(err, store.ErrUnavailable) {
		msg = fmt.Sprintf("%s did not answer within %s; retry later: %v", name, s.cfg.StoreTimeout, err)
	}
	s.log.Warn("store unavailable", "path", r.URL.Path, "err", err)
	w.Header().Set("Retry-After", storeRetryAfter)
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": msg})
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	// The request's deadline may be what passed: the page still renders.
	render(w, r.WithContext(context.WithoutCancel(r.Context())), ErrorPage(http.StatusServiceUnavailable, msg))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func render(w http.ResponseWriter, r *http.Request, c templ.Component) {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
	}
	if err := c.Render(r.Context(), w); err != nil && !errors.Is(err, context.Canceled) {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// parseMinCost reads min_cost, the one list filter the store cannot apply
// (cost is known only after a rollup).
func parseMinCost(v map[string][]string) (float64, error) {
	if x := v["min_cost"]; len(x) > 0 && strings.TrimSpace(x[0]) != "" {
		f, err := strconv.ParseFloat(strings.TrimSpace(x[0]), 64)
		if err != nil || f < 0 {
			return 0, badRequest{fmt.Sprintf("min_cost: %q is not a non-negative number of USD", x[0])}
		}
		return f, nil
	}
	return 0, nil
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
