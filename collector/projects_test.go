package collector_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/collector/redact"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
)

// Secrets as internal/projects makes them (lwk_ + 43 base64url chars).
var (
	alphaKey = "lwk_" + strings.Repeat("a", 42) + "1"
	alphaRO  = "lwk_" + strings.Repeat("r", 42) + "2"
	betaKey  = "lwk_" + strings.Repeat("b", 42) + "3"
)

func testKeys(secret string) (string, bool, bool) {
	switch secret {
	case alphaKey:
		return "alpha", true, true
	case alphaRO:
		return "alpha", false, true
	case betaKey:
		return "beta", true, true
	}
	return "", false, false
}

// syncBuffer is a log sink the test greps.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// contentBatch is one trace of two spans carrying content: messages, tool
// arguments, OpenInference input/output, with an e-mail address and a
// card number inside.
func contentBatch(seed byte) (ptrace.Traces, string) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc")
	ss := rs.ScopeSpans().AppendEmpty()
	tid := pcommon.TraceID{seed, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	for i := range 2 {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(tid)
		sp.SetSpanID(pcommon.SpanID{seed, byte(i + 1), 1, 1, 1, 1, 1, 1})
		sp.SetName("chat")
		sp.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(i)*1000))
		sp.SetEndTimestamp(pcommon.Timestamp(1_700_000_000_000_100_000 + int64(i)*1000))
		a := sp.Attributes()
		a.PutStr(semconv.AttrOperationName, semconv.OpChat)
		a.PutStr(semconv.AttrRequestModel, "m")
		a.PutStr(semconv.AttrInputMessages, `[{"role":"user","parts":[{"type":"text","content":"I am alice@example.com, card 4111 1111 1111 1111"}]}]`)
		a.PutStr(semconv.AttrOutputMessages, `[{"role":"assistant","parts":[{"type":"text","content":"ok"}]}]`)
		a.PutStr(semconv.AttrToolCallArguments, `{"q":"x"}`)
		a.PutStr(semconv.OpenInferenceInputValue, "in")
		a.PutStr(semconv.OpenInferenceOutputValue, "out")
		a.PutStr("user.note", "reach me at bob@example.org")
	}
	return td, tid.String()
}

func grpcExport(t *testing.T, srv *collector.Server, key string, td ptrace.Traces) error {
	t.Helper()
	ctx := context.Background()
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
	}
	_, err := ptraceotlp.NewGRPCClient(dialGRPC(t, srv.GRPCAddr())).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
	return err
}

func startProjectServer(t *testing.T, st *sqlite.Store, logs *syncBuffer) *collector.Server {
	return startServer(t, st, func(c *collector.ServerConfig) {
		c.Keys = testKeys
		c.AuthToken = "shared-token-0123456789"
		c.Policy = func(p string) collector.ProjectPolicy { return collector.ProjectPolicy{CaptureContent: p == "beta"} }
		c.Redact = redact.Config{Builtins: redact.Builtins}
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
}

// TestSpansAreStoredUnderTheSendingKeysProject: over HTTP and gRPC, a
// read-write key's spans land in its project and only there; a read-only
// key and an unknown key are refused and store nothing; the shared token
// still writes the default project; no key appears in any log line,
// response or stored span.
func TestSpansAreStoredUnderTheSendingKeysProject(t *testing.T) {
	st := openSQLite(t)
	logs := &syncBuffer{}
	srv := startProjectServer(t, st, logs)
	ctx := context.Background()
	var responses bytes.Buffer

	tdA, idA := contentBatch(1)
	pb, _ := ptraceotlp.NewExportRequestFromTraces(tdA).MarshalProto()
	hr, body := postOTLP(t, srv, "application/x-protobuf", pb, map[string]string{"Authorization": "Bearer " + alphaKey})
	responses.Write(body)
	if hr.StatusCode != http.StatusOK {
		t.Fatalf("alpha's key over HTTP: %d", hr.StatusCode)
	}
	tdB, idB := contentBatch(2)
	if err := grpcExport(t, srv, betaKey, tdB); err != nil {
		t.Fatalf("beta's key over gRPC: %v", err)
	}
	tdD, idD := contentBatch(3)
	if err := grpcExport(t, srv, "shared-token-0123456789", tdD); err != nil {
		t.Fatalf("shared token over gRPC: %v", err)
	}

	// Refusals: read-only key (403 / PERMISSION_DENIED), unknown key.
	tdR, idR := contentBatch(4)
	pbR, _ := ptraceotlp.NewExportRequestFromTraces(tdR).MarshalProto()
	hr, body = postOTLP(t, srv, "application/x-protobuf", pbR, map[string]string{"Authorization": "Bearer " + alphaRO})
	responses.Write(body)
	if hr.StatusCode != http.StatusForbidden {
		t.Errorf("read-only key over HTTP: %d, want 403", hr.StatusCode)
	}
	if err := grpcExport(t, srv, alphaRO, tdR); status.Code(err) != codes.PermissionDenied {
		t.Errorf("read-only key over gRPC: %v, want PERMISSION_DENIED", err)
	} else {
		responses.WriteString(err.Error())
	}
	wrong := "lwk_" + strings.Repeat("z", 43)
	hr, body = postOTLP(t, srv, "application/x-protobuf", pbR, map[string]string{"Authorization": "Bearer " + wrong})
	responses.Write(body)
	if hr.StatusCode != http.StatusUnauthorized {
		t.Errorf("unknown key over HTTP: %d, want 401", hr.StatusCode)
	}
	if err := grpcExport(t, srv, wrong, tdR); status.Code(err) != codes.Unauthenticated {
		t.Errorf("unknown key over gRPC: %v, want UNAUTHENTICATED", err)
	} else {
		responses.WriteString(err.Error())
	}

	for _, c := range []struct {
		project string
		id      string
		found   bool
	}{
		{"alpha", idA, true}, {"beta", idA, false}, {"", idA, false},
		{"beta", idB, true}, {"alpha", idB, false}, {"", idB, false},
		{"", idD, true}, {"alpha", idD, false}, {"beta", idD, false},
		{"alpha", idR, false}, {"", idR, false},
	} {
		spans, err := st.GetTrace(store.WithProject(ctx, c.project), c.id)
		switch {
		case c.found && (err != nil || len(spans) != 2):
			t.Errorf("project %q, trace %s: %d spans, %v; want 2", c.project, c.id, len(spans), err)
		case !c.found && !errors.Is(err, store.ErrNotFound):
			t.Errorf("project %q reads trace %s: %d spans, %v; want ErrNotFound", c.project, c.id, len(spans), err)
		}
		for _, sp := range spans {
			b, _ := sp.Attributes.MarshalJSON()
			if strings.Contains(string(b), "lwk_") {
				t.Errorf("a key is in a stored span: %s", b)
			}
		}
	}
	for _, k := range []string{alphaKey, alphaRO, betaKey, wrong, "shared-token-0123456789"} {
		if strings.Contains(logs.String(), k) || strings.Contains(responses.String(), k) {
			t.Errorf("a key appears in the logs or a response")
		}
	}
	if !strings.Contains(logs.String(), "OTLP collector listening") {
		t.Errorf("the log capture saw nothing; the key check above proves nothing")
	}
}

// TestKeyIsCheckedBeforeTheMessageIsRead: over gRPC a read-only or
// unknown key is refused from the headers; an 80 MiB message is not read.
func TestKeyIsCheckedBeforeTheMessageIsRead(t *testing.T) {
	srv := startProjectServer(t, openSQLite(t), &syncBuffer{})
	td, _ := mixedBatch()
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("padding", strings.Repeat("x", 80<<20))
	if err := grpcExport(t, srv, alphaRO, td); status.Code(err) != codes.PermissionDenied {
		t.Errorf("over-limit message with a read-only key: %v, want PERMISSION_DENIED before reading", err)
	}
	if err := grpcExport(t, srv, "lwk_unknown-unknown-unknown-unknown-unknown0", td); status.Code(err) != codes.Unauthenticated {
		t.Errorf("over-limit message with an unknown key: %v, want UNAUTHENTICATED before reading", err)
	}
}

// TestContentIsStoredOnlyForProjectsThatCaptureItAndRedacted: alpha does
// not capture content, beta does; both are redacted before the write, and
// the health report counts it.
func TestContentIsStoredOnlyForProjectsThatCaptureItAndRedacted(t *testing.T) {
	st := openSQLite(t)
	srv := startProjectServer(t, st, &syncBuffer{})
	ctx := context.Background()
	tdA, idA := contentBatch(1)
	if err := grpcExport(t, srv, alphaKey, tdA); err != nil {
		t.Fatal(err)
	}
	tdB, idB := contentBatch(2)
	if err := grpcExport(t, srv, betaKey, tdB); err != nil {
		t.Fatal(err)
	}
	spansA, err := st.GetTrace(store.WithProject(ctx, "alpha"), idA)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range spansA {
		for k := range sp.Attributes {
			if semconv.IsContentKey(k) {
				t.Errorf("alpha does not capture content but %s was stored", k)
			}
		}
		if sp.Attributes["user.note"] != "reach me at [REDACTED:email]" || sp.RequestModel != "m" {
			t.Errorf("alpha's other attributes: %v", sp.Attributes)
		}
	}
	spansB, err := st.GetTrace(store.WithProject(ctx, "beta"), idB)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range spansB {
		in, _ := sp.Attributes.String(semconv.AttrInputMessages)
		if !strings.Contains(in, "I am [REDACTED:email], card [REDACTED:card]") {
			t.Errorf("beta's input messages: %q, want kept and redacted", in)
		}
		if v, _ := sp.Attributes.String(semconv.OpenInferenceInputValue); v != "in" {
			t.Errorf("beta's input.value = %q", v)
		}
	}
	h := srv.Health(ctx)
	if h.Redaction == nil || h.Redaction.Redacted[redact.Email] != 6 || h.Redaction.Redacted[redact.Card] != 2 || h.Redaction.ContentDropped != 10 {
		t.Errorf("health redaction = %+v; want email 6 (alpha's 2 notes, beta's 2 notes and 2 messages), card 2, content dropped 10", h.Redaction)
	}
}
