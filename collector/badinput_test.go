package collector_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/collector/agenttrace"
	"github.com/loomwork/loomwork/collector/genai"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
)

func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "traces.db"), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Shutdown(context.Background()) })
	return st
}

// postOTLP posts body to the server's OTLP/HTTP traces endpoint.
func postOTLP(t *testing.T, srv *collector.Server, contentType string, body []byte, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+srv.HTTPAddr()+collector.TracesPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// rpcStatus decodes an OTLP/HTTP error body.
func rpcStatus(t *testing.T, contentType string, body []byte) *spb.Status {
	t.Helper()
	st := &spb.Status{}
	var err error
	if contentType == "application/x-protobuf" {
		err = proto.Unmarshal(body, st)
	} else {
		err = protojson.Unmarshal(body, st)
	}
	if err != nil {
		t.Fatalf("error body is not a google.rpc.Status (%v): %q", err, body)
	}
	return st
}

// rawBytesCodec lets a test send arbitrary bytes as a gRPC request.
type rawBytesCodec struct{}

func (rawBytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawBytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}
func (rawBytesCodec) Name() string { return "proto" }

func invokeRaw(conn *grpc.ClientConn, body []byte) error {
	var out []byte
	return conn.Invoke(context.Background(), "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
		&body, &out, grpc.ForceCodecV2(rawBytesCodec{}))
}

// malformedProto is a truncated protobuf: field 1 (resource_spans) claims
// 100 bytes and carries 2.
var malformedProto = []byte{0x0a, 0x64, 0x0a, 0x00}

func TestMalformedRequestsGetClientErrorsThatSayWhatIsWrong(t *testing.T) {
	srv := startServer(t, openSQLite(t), nil)

	t.Run("http protobuf", func(t *testing.T) {
		resp, body := postOTLP(t, srv, "application/x-protobuf", malformedProto, nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", resp.StatusCode)
		}
		st := rpcStatus(t, "application/x-protobuf", body)
		if codes.Code(st.Code) != codes.InvalidArgument || !strings.Contains(st.Message, "decode OTLP protobuf ExportTraceServiceRequest") {
			t.Errorf("status = %v %q", codes.Code(st.Code), st.Message)
		}
	})
	t.Run("http json", func(t *testing.T) {
		resp, body := postOTLP(t, srv, "application/json", []byte(`{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "not-hex"}]}]}]}`), nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", resp.StatusCode)
		}
		st := rpcStatus(t, "application/json", body)
		t.Logf("400: %s", st.Message)
		if !strings.Contains(st.Message, "decode OTLP JSON ExportTraceServiceRequest") || !strings.Contains(strings.ToLower(st.Message), "traceid") {
			t.Errorf("message %q does not say what is wrong", st.Message)
		}
	})
	t.Run("http truncated json", func(t *testing.T) {
		resp, body := postOTLP(t, srv, "application/json", []byte(`{"resourceSpans": [`), nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d, want 400: %s", resp.StatusCode, body)
		}
	})
	t.Run("http unsupported content type", func(t *testing.T) {
		resp, body := postOTLP(t, srv, "text/plain", []byte("hello"), nil)
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Fatalf("status %d, want 415", resp.StatusCode)
		}
		if st := rpcStatus(t, "application/json", body); !strings.Contains(st.Message, `unsupported Content-Type "text/plain"`) {
			t.Errorf("message %q", st.Message)
		}
	})
	t.Run("http wrong method", func(t *testing.T) {
		resp, err := http.Get("http://" + srv.HTTPAddr() + collector.TracesPath)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Fatalf("status %d Allow %q, want 405 POST", resp.StatusCode, resp.Header.Get("Allow"))
		}
	})
	t.Run("http corrupt gzip", func(t *testing.T) {
		resp, _ := postOTLP(t, srv, "application/x-protobuf", []byte("not gzip"), map[string]string{"Content-Encoding": "gzip"})
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", resp.StatusCode)
		}
	})
	t.Run("grpc", func(t *testing.T) {
		err := invokeRaw(dialGRPC(t, srv.GRPCAddr()), malformedProto)
		st, _ := status.FromError(err)
		t.Logf("%v", err)
		if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "decode OTLP protobuf ExportTraceServiceRequest (4 bytes)") {
			t.Fatalf("got %v, want INVALID_ARGUMENT saying the request did not decode", err)
		}
	})
}

func TestValidJSONAndGzipRequestsAreStored(t *testing.T) {
	st := openSQLite(t)
	srv := startServer(t, st, nil)
	td := agenttrace.NewGenerator(1, runStart).Batch(2, 5)
	req := ptraceotlp.NewExportRequestFromTraces(td)

	js, _ := req.MarshalJSON()
	resp, body := postOTLP(t, srv, "application/json", js, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("JSON request: status %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	out := ptraceotlp.NewExportResponse()
	if err := out.UnmarshalJSON(body); err != nil || out.PartialSuccess().RejectedSpans() != 0 {
		t.Fatalf("response %s (%v)", body, err)
	}

	td2 := agenttrace.NewGenerator(2, runStart).Batch(1, 5)
	pb, _ := ptraceotlp.NewExportRequestFromTraces(td2).MarshalProto()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(pb)
	zw.Close()
	resp, body = postOTLP(t, srv, "application/x-protobuf", gz.Bytes(), map[string]string{"Content-Encoding": "gzip"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("gzip request: status %d: %s", resp.StatusCode, body)
	}
	for _, d := range []ptrace.Traces{td, td2} {
		id := d.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID().String()
		spans, err := st.GetTrace(context.Background(), id)
		if err != nil || len(spans) != 5 {
			t.Fatalf("trace %s: %d spans, err %v; want 5", id, len(spans), err)
		}
	}

	// An empty request is a success with nothing stored.
	resp, _ = postOTLP(t, srv, "application/json", []byte(`{}`), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("empty request: status %d", resp.StatusCode)
	}
}

// mixedBatch returns a request with three valid spans and two with invalid
// ids, and the trace id of the valid ones.
func mixedBatch() (ptrace.Traces, string) {
	td := agenttrace.NewGenerator(7, runStart).Batch(1, 3)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	tid := spans.At(0).TraceID()
	bad1 := spans.AppendEmpty()
	bad1.SetName("no trace id")
	bad1.SetSpanID(pcommon.SpanID{1, 2, 3})
	bad2 := spans.AppendEmpty()
	bad2.SetName("no span id")
	bad2.SetTraceID(tid)
	return td, tid.String()
}

func TestInvalidIDSpansAreRejectedWithPartialSuccessAndTheRestStored(t *testing.T) {
	for _, transport := range []string{"grpc", "http-protobuf", "http-json"} {
		t.Run(transport, func(t *testing.T) {
			st := openSQLite(t)
			srv := startServer(t, st, nil)
			td, tid := mixedBatch()
			req := ptraceotlp.NewExportRequestFromTraces(td)
			var resp ptraceotlp.ExportResponse
			switch transport {
			case "grpc":
				var err error
				resp, err = ptraceotlp.NewGRPCClient(dialGRPC(t, srv.GRPCAddr())).Export(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
			case "http-protobuf":
				pb, _ := req.MarshalProto()
				hr, body := postOTLP(t, srv, "application/x-protobuf", pb, nil)
				if hr.StatusCode != http.StatusOK {
					t.Fatalf("status %d", hr.StatusCode)
				}
				resp = ptraceotlp.NewExportResponse()
				if err := resp.UnmarshalProto(body); err != nil {
					t.Fatal(err)
				}
			case "http-json":
				js, _ := req.MarshalJSON()
				hr, body := postOTLP(t, srv, "application/json", js, nil)
				if hr.StatusCode != http.StatusOK {
					t.Fatalf("status %d", hr.StatusCode)
				}
				resp = ptraceotlp.NewExportResponse()
				if err := resp.UnmarshalJSON(body); err != nil {
					t.Fatal(err)
				}
			}
			ps := resp.PartialSuccess()
			if ps.RejectedSpans() != 2 {
				t.Errorf("rejected_spans = %d, want 2", ps.RejectedSpans())
			}
			for _, part := range []string{"2 span(s) rejected", genai.ReasonEmptyTraceID, genai.ReasonEmptySpanID, `"no span id"`} {
				if !strings.Contains(ps.ErrorMessage(), part) {
					t.Errorf("error_message %q lacks %q", ps.ErrorMessage(), part)
				}
			}
			spans, err := st.GetTrace(context.Background(), tid)
			if err != nil || len(spans) != 3 {
				t.Fatalf("stored %d valid spans (err %v), want 3", len(spans), err)
			}
		})
	}
}

func TestStoreFailureAnswersRetryableWithRetryAfter(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "traces.db")
	rw, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	rw.Shutdown(context.Background())
	readOnly, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer readOnly.Shutdown(context.Background())
	closed := openSQLite(t)
	closed.Shutdown(context.Background())

	for _, tc := range []struct {
		name string
		st   store.Store
	}{{"read-only store", readOnly}, {"closed store", closed}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, tc.st, func(c *collector.ServerConfig) { c.Exporter.RetryAfter = 3 * time.Second })
			req := ptraceotlp.NewExportRequestFromTraces(agenttrace.NewGenerator(3, runStart).Batch(1, 4))

			_, err := ptraceotlp.NewGRPCClient(dialGRPC(t, srv.GRPCAddr())).Export(context.Background(), req)
			st, _ := status.FromError(err)
			if st.Code() != codes.Unavailable {
				t.Fatalf("gRPC: %v, want UNAVAILABLE", err)
			}
			if d := retryDelay(st); d != 3*time.Second {
				t.Errorf("gRPC RetryInfo delay = %v, want 3s", d)
			}

			pb, _ := req.MarshalProto()
			resp, body := postOTLP(t, srv, "application/x-protobuf", pb, nil)
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "3" {
				t.Fatalf("HTTP: status %d Retry-After %q, want 503 and 3", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
			if s := rpcStatus(t, "application/x-protobuf", body); !strings.Contains(s.Message, "store 4 spans") {
				t.Errorf("HTTP error message %q does not say the store failed", s.Message)
			}
		})
	}
}

func retryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

func TestMemoryLimiterRefusalAnswersResourceExhaustedAnd429(t *testing.T) {
	// A 1 MiB limit is below what any Go process uses, so the real memory
	// limiter refuses as soon as it has measured once.
	srv := startServer(t, openSQLite(t), func(c *collector.ServerConfig) {
		c.MemoryLimitMiB = 1
		c.MemoryCheckInterval = 10 * time.Millisecond
	})
	req := ptraceotlp.NewExportRequestFromTraces(agenttrace.NewGenerator(4, runStart).Batch(1, 2))
	client := ptraceotlp.NewGRPCClient(dialGRPC(t, srv.GRPCAddr()))
	var err error
	for range 500 { // wait for the limiter's first measurement
		if _, err = client.Export(context.Background(), req); err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	st, _ := status.FromError(err)
	if st.Code() != codes.ResourceExhausted || retryDelay(st) <= 0 {
		t.Fatalf("gRPC: %v (retry delay %v), want RESOURCE_EXHAUSTED with RetryInfo", err, retryDelay(st))
	}
	pb, _ := req.MarshalProto()
	resp, _ := postOTLP(t, srv, "application/x-protobuf", pb, nil)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("HTTP: status %d Retry-After %q, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	js, _ := req.MarshalJSON()
	resp, _ = postOTLP(t, srv, "application/json", js, nil)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("HTTP JSON: status %d Retry-After %q, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestCoreOTLPReceiverIsRefusedByTheSameMemoryLimiter: with --receiver
// otlp the memory limiter is the receiver's middleware, so a request is
// refused before the receiver decodes it, as with Loomwork's front.
func TestCoreOTLPReceiverIsRefusedByTheSameMemoryLimiter(t *testing.T) {
	st := openSQLite(t)
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	startServer(t, st, func(c *collector.ServerConfig) {
		c.Receiver = collector.ReceiverOTLP
		c.GRPCAddr, c.HTTPAddr = grpcAddr, httpAddr
		c.MemoryLimitMiB = 1
		c.MemoryCheckInterval = 10 * time.Millisecond
	})
	td := agenttrace.NewGenerator(4, runStart).Batch(1, 2)
	client := ptraceotlp.NewGRPCClient(dialGRPC(t, grpcAddr))
	var err error
	for range 500 { // the receiver starts asynchronously; the limiter measures once first
		if _, err = client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td)); status.Code(err) == codes.ResourceExhausted {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("gRPC through the core receiver under a 1 MiB limit: %v, want RESOURCE_EXHAUSTED", err)
	}
	pb, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	hr, err := http.Post("http://"+httpAddr+collector.TracesPath, "application/x-protobuf", bytes.NewReader(pb))
	if err != nil {
		t.Fatal(err)
	}
	hr.Body.Close()
	if hr.StatusCode != http.StatusTooManyRequests {
		t.Errorf("HTTP through the core receiver under a 1 MiB limit: status %d, want 429", hr.StatusCode)
	}
}

func TestOversizedAttributeIsStoredTruncatedWithMarkerAndSize(t *testing.T) {
	st := openSQLite(t)
	srv := startServer(t, st, nil) // default limit: 64 KiB
	td := agenttrace.NewGenerator(5, runStart).Batch(1, 2)
	sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1)
	big := strings.Repeat("0123456789", 10_000) // 100,000 bytes
	sp.Attributes().PutStr("gen_ai.input.messages", big)
	if _, err := ptraceotlp.NewGRPCClient(dialGRPC(t, srv.GRPCAddr())).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td)); err != nil {
		t.Fatal(err)
	}
	spans, err := st.GetTrace(context.Background(), sp.TraceID().String())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range spans {
		if s.SpanID != sp.SpanID().String() {
			continue
		}
		got, _ := s.Attributes["gen_ai.input.messages"].(string)
		if got != big[:genai.DefaultMaxAttrBytes]+"…[truncated by loomwork: 100000 bytes]" {
			t.Errorf("stored value is %d bytes ending %q", len(got), got[max(0, len(got)-60):])
		}
		if n := s.Attributes[semconv.AttrTruncatedPrefix+"gen_ai.input.messages"]; n != int64(100000) {
			t.Errorf("recorded original size = %#v, want 100000", n)
		}
		return
	}
	t.Fatal("span not stored")
}

// freeAddr returns a loopback address with a port that was free a moment
// ago (the core receiver does not report the port it bound).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestCoreOTLPReceiverStoresButCannotReportRejections runs the pipeline
// with the Collector's own otlpreceiver: data flows to the store, but the
// receiver answers INTERNAL to a malformed gRPC request and plain success
// to a request with rejected spans. This is why serve uses Loomwork's
// front by default.
func TestCoreOTLPReceiverStoresButCannotReportRejections(t *testing.T) {
	st := openSQLite(t)
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	startServer(t, st, func(c *collector.ServerConfig) {
		c.Receiver = collector.ReceiverOTLP
		c.GRPCAddr, c.HTTPAddr = grpcAddr, httpAddr
	})
	conn := dialGRPC(t, grpcAddr)
	td, tid := mixedBatch()
	var (
		resp ptraceotlp.ExportResponse
		err  error
	)
	for range 100 { // the core receiver starts serving asynchronously
		if resp, err = ptraceotlp.NewGRPCClient(conn).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td)); status.Code(err) != codes.Unavailable {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	if resp.PartialSuccess().RejectedSpans() != 0 {
		t.Errorf("the core receiver reported %d rejections; update docs/collector.md", resp.PartialSuccess().RejectedSpans())
	}
	spans, err := st.GetTrace(context.Background(), tid)
	if err != nil || len(spans) != 3 {
		t.Fatalf("stored %d spans (err %v), want the 3 valid ones", len(spans), err)
	}
	if err := invokeRaw(conn, malformedProto); status.Code(err) != codes.Internal {
		t.Errorf("malformed gRPC request: %v; the core receiver used to answer INTERNAL — update docs/collector.md", err)
	}
}
