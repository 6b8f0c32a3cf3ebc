package collector_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loomwork/loomwork/collector"
)

func TestBearerTokenGuardsOTLPIngestOnBothTransports(t *testing.T) {
	const token = "ingest-token-0123456789"
	st := openSQLite(t)
	srv := startServer(t, st, func(c *collector.ServerConfig) { c.AuthToken = token })
	td, tid := mixedBatch()
	req := ptraceotlp.NewExportRequestFromTraces(td)
	pb, _ := req.MarshalProto()

	// HTTP: refused without the token, nothing stored; accepted with it.
	hr, body := postOTLP(t, srv, "application/x-protobuf", pb, nil)
	if hr.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token over HTTP: status %d, want 401", hr.StatusCode)
	}
	if st := rpcStatus(t, "application/x-protobuf", body); codes.Code(st.Code) != codes.Unauthenticated {
		t.Fatalf("401 body status = %v", st)
	}
	if _, err := st.GetTrace(context.Background(), tid); err == nil {
		t.Fatal("a refused request was stored")
	}
	hr, _ = postOTLP(t, srv, "application/x-protobuf", pb, map[string]string{"Authorization": "Bearer wrong-token-0000000000"})
	if hr.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token over HTTP: status %d, want 401", hr.StatusCode)
	}
	hr, _ = postOTLP(t, srv, "application/x-protobuf", pb, map[string]string{"Authorization": "Bearer " + token})
	if hr.StatusCode != http.StatusOK {
		t.Fatalf("right token over HTTP: status %d", hr.StatusCode)
	}

	// gRPC: UNAUTHENTICATED without metadata, OK with it.
	client := ptraceotlp.NewGRPCClient(dialGRPC(t, srv.GRPCAddr()))
	if _, err := client.Export(context.Background(), req); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token over gRPC: %v, want UNAUTHENTICATED", err)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
	if _, err := client.Export(ctx, req); err != nil {
		t.Fatalf("right token over gRPC: %v", err)
	}
	spans, err := st.GetTrace(context.Background(), tid)
	if err != nil || len(spans) != 3 {
		t.Fatalf("stored %d spans (err %v), want the 3 valid ones once", len(spans), err)
	}
}

func TestAuthTokenNeedsTheLoomworkReceiverAndALongToken(t *testing.T) {
	for _, cfg := range []collector.ServerConfig{
		{AuthToken: "ingest-token-0123456789", Receiver: collector.ReceiverOTLP},
		{AuthToken: "short"},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

// The bearer scheme is case-insensitive (RFC 9110 §11.1), on both
// transports.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	const token = "ingest-token-0123456789"
	st := openSQLite(t)
	srv := startServer(t, st, func(c *collector.ServerConfig) { c.AuthToken = token })
	td, _ := mixedBatch()
	req := ptraceotlp.NewExportRequestFromTraces(td)
	pb, _ := req.MarshalProto()
	for _, scheme := range []string{"bearer ", "BEARER ", "Bearer "} {
		if hr, _ := postOTLP(t, srv, "application/x-protobuf", pb, map[string]string{"Authorization": scheme + token}); hr.StatusCode != http.StatusOK {
			t.Errorf("HTTP with %q: status %d, want 200", scheme, hr.StatusCode)
		}
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", scheme+token)
		if _, err := ptraceotlp.NewGRPCClient(dialGRPC(t, srv.GRPCAddr())).Export(ctx, req); err != nil {
			t.Errorf("gRPC with %q: %v", scheme, err)
		}
	}
}

// An unauthenticated gRPC call is refused from its headers, before its
// message is read: a message over the receive limit still gets
// UNAUTHENTICATED, not the RESOURCE_EXHAUSTED that reading it would give.
func TestGRPCAuthIsCheckedBeforeTheMessageIsRead(t *testing.T) {
	const token = "ingest-token-0123456789"
	srv := startServer(t, openSQLite(t), func(c *collector.ServerConfig) { c.AuthToken = token })
	td, _ := mixedBatch()
	// One attribute of 80 MiB: the request is over the server's 64 MiB
	// receive limit.
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("padding", strings.Repeat("x", 80<<20))
	_, err := ptraceotlp.NewGRPCClient(dialGRPC(t, srv.GRPCAddr())).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td))
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("an over-limit message without a token: %v, want UNAUTHENTICATED (refused before reading)", err)
	}
}
