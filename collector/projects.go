package collector

import (
	"context"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loomwork/loomwork/collector/redact"
	"github.com/loomwork/loomwork/store"
)

// Projects (issue 21). With API keys configured, every OTLP request is
// authenticated by its key before a byte of its message is read (the gRPC
// tap, the HTTP handler's first step), and its spans are stored under the
// key's project: the collector sets store.Span.Project from the key, never
// from anything the sender put in the request. Then, before anything is
// written, content attributes are dropped for a project that does not
// capture content, and the redaction patterns run over every string.

// KeyFunc authenticates a presented API key secret: the project it belongs
// to ("" for the default project) and whether it may send spans. It must
// compare in constant time and must not log the secret.
type KeyFunc func(secret string) (project string, canWrite bool, ok bool)

// ProjectPolicy is what the collector needs to know of a project.
type ProjectPolicy struct {
	// CaptureContent keeps content attributes (semconv.IsContentKey);
	// false drops them before the spans are written.
	CaptureContent bool
	// Retention is how long the project keeps its traces (0: for ever);
	// it is stamped on each span (store.Span.Retention) for backends that
	// compute a row's expiry when writing it.
	Retention time.Duration
}

// PolicyFunc returns a project's policy ("" is the default project).
type PolicyFunc func(project string) ProjectPolicy

// WithProjects gives the exporter the project policies. Without it every
// project captures content (the behaviour before projects).
func WithProjects(p PolicyFunc) FactoryOption {
	return func(f *factory) { f.policy = p }
}

// WithRedactor makes the exporter redact every span with r before it is
// written (nil: no redaction).
func WithRedactor(r *redact.Redactor) FactoryOption {
	return func(f *factory) { f.redactor = r }
}

// prepare stamps spans with the request's project, drops content the
// project does not capture, and redacts.
func (e *ingester) prepare(ctx context.Context, spans []store.Span) {
	project := store.ProjectOf(ctx)
	capture, retention := true, time.Duration(0)
	if e.policy != nil {
		pol := e.policy(project)
		capture, retention = pol.CaptureContent, pol.Retention
	}
	for i := range spans {
		sp := &spans[i]
		sp.Project, sp.Retention = project, retention
		if !capture {
			if n := redact.DropContent(sp); n > 0 {
				e.contentDropped.Add(int64(n))
			}
		}
		if e.redactor != nil {
			e.redactor.Span(sp)
		}
	}
}

// RedactionHealth is what the redaction step did since the server started.
type RedactionHealth struct {
	// Redacted counts the matches replaced, per pattern.
	Redacted map[string]int64 `json:"redacted"`
	// ContentDropped counts content attributes dropped for projects that
	// do not capture content.
	ContentDropped int64 `json:"content_dropped"`
}

// authenticator checks OTLP credentials: the shared token (the default
// project) and, when configured, project API keys.
type authenticator struct {
	token string
	keys  KeyFunc
}

func (a authenticator) on() bool { return a.token != "" || a.keys != nil }

var (
	errUnauthenticated = status.New(codes.Unauthenticated, "missing or unknown bearer token: send Authorization: Bearer TOKEN (a project key, or the server's token)")
	errReadOnlyKey     = status.New(codes.PermissionDenied, "the bearer token is a read-only key: sending spans needs a read-write key")
)

// check authenticates an Authorization value and returns the project to
// store under. The status never quotes what was presented.
func (a authenticator) check(header string) (string, *status.Status) {
	tok, ok := bearerToken(header)
	if !ok || tok == "" {
		return "", errUnauthenticated
	}
	if a.keys != nil {
		if project, canWrite, ok := a.keys(tok); ok {
			if !canWrite {
				return "", errReadOnlyKey
			}
			return project, nil
		}
	}
	if a.token != "" && bearerOK(header, a.token) {
		return "", nil
	}
	return "", errUnauthenticated
}

// http wraps next: unauthenticated requests get 401 (a read-only key 403)
// with an OTLP Status body; the others run with their project in the
// context.
func (a authenticator) http(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		project, st := a.check(r.Header.Get("Authorization"))
		if st != nil {
			code := http.StatusUnauthorized
			if st.Code() == codes.PermissionDenied {
				code = http.StatusForbidden
			} else {
				w.Header().Set("WWW-Authenticate", `Bearer realm="loomwork-otlp"`)
			}
			writeHTTPStatus(w, r.Header.Get("Content-Type"), code, st)
			return
		}
		next.ServeHTTP(w, r.WithContext(store.WithProject(r.Context(), project)))
	})
}

// unary re-checks in the interceptor (the tap already did, before the
// message was read) and sets the project.
func (a authenticator) unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		header := ""
		if vals := md.Get("authorization"); len(vals) > 0 {
			header = vals[0]
		}
		project, st := a.check(header)
		if st != nil {
			return nil, st.Err()
		}
		return handler(store.WithProject(ctx, project), req)
	}
}

// redactionHealth reports the exporter's counters.
func (e *ingester) redactionHealth() RedactionHealth {
	return RedactionHealth{Redacted: e.redactor.Counts(), ContentDropped: e.contentDropped.Load()}
}
