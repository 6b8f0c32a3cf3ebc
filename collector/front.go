package collector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/loomwork/loomwork/collector/genai"
	"github.com/loomwork/loomwork/store"
)

// TracesPath is the OTLP/HTTP traces path.
const TracesPath = "/v1/traces"

// Content types OTLP/HTTP defines.
const (
	contentTypeProto = "application/x-protobuf"
	contentTypeJSON  = "application/json"
)

// front is serve's own OTLP receiver (gRPC and HTTP). It does what the
// Collector's otlpreceiver does — decode ExportTraceServiceRequests and
// hand the spans on — with these differences, each the reason it exists:
//
//   - protobuf is decoded straight into store spans (genai.DecodeProto)
//     instead of into pdata that genai.MapTraces then walks: on a
//     1,000-span agent request that is 1.7× less time, 1.7× fewer bytes
//     and 2.8× fewer allocations (docs/bench-ingest.md); OTLP/JSON goes
//     through pdata and MapTraces, which share the same mapping;
//   - spans the mapping or the store refuses are reported one by one in
//     partial_success, and a malformed request is INVALID_ARGUMENT naming
//     where it went wrong, where the core receiver logs and drops, or
//     answers INTERNAL;
//   - admission and authentication happen before a byte of the message is
//     read (admission.go, projects.go).
//
// There is no Collector pipeline behind it: the memory limiter is the
// Collector's memorylimiterextension, asked before each request is
// decoded (as the extension's own receiver middleware does), and the
// spans go to the ingester, which the Server wires here and, for
// `--receiver otlp` and custom Collector builds, behind the exporter.
type front struct {
	in         spanConsumer
	limiter    memoryLimiter
	retryAfter time.Duration
	log        *slog.Logger
	admit      *admission
}

// spanConsumer is what the front hands decoded spans to (the ingester).
type spanConsumer interface {
	mapOptions() genai.Options
	consume(ctx context.Context, spans []store.Span, rejected []genai.Rejection) ([]genai.Rejection, error)
}

// memoryLimiter is the memory limiter extension's verdict (the Collector's
// memorylimiterextension implements it).
type memoryLimiter interface{ MustRefuse() bool }

// refuseForMemory is the status for a request refused by the memory
// limiter, before it is decoded: retryable, with a delay.
func (f *front) refuseForMemory() *status.Status {
	return newRetryable(codes.ResourceExhausted, errors.New(memoryLimiterRefusal), f.retryAfter).(*statusError).st
}

// exportProto decodes an OTLP protobuf request straight into store spans
// and stores them. A malformed request is an error naming where it went
// wrong.
func (f *front) exportProto(ctx context.Context, b []byte) (ptraceotlp.ExportResponse, *status.Status) {
	if f.limiter.MustRefuse() {
		return ptraceotlp.ExportResponse{}, f.refuseForMemory()
	}
	spans, rejected, err := genai.DecodeProto(b, f.in.mapOptions())
	if err != nil {
		return ptraceotlp.ExportResponse{}, status.Newf(codes.InvalidArgument, "decode OTLP protobuf ExportTraceServiceRequest (%d bytes): %v", len(b), err)
	}
	return f.store(ctx, spans, rejected)
}

// exportJSON decodes an OTLP/JSON request through pdata and stores it.
func (f *front) exportJSON(ctx context.Context, b []byte) (ptraceotlp.ExportResponse, *status.Status) {
	if f.limiter.MustRefuse() {
		return ptraceotlp.ExportResponse{}, f.refuseForMemory()
	}
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalJSON(b); err != nil {
		return ptraceotlp.ExportResponse{}, status.Newf(codes.InvalidArgument, "decode OTLP JSON ExportTraceServiceRequest (%d bytes): %v", len(b), err)
	}
	spans, rejected := genai.MapTraces(req.Traces(), f.in.mapOptions())
	return f.store(ctx, spans, rejected)
}

// store hands a decoded request to the ingester and turns what it reports
// into the OTLP response: partial_success for rejected spans, a retryable
// status for a refusal.
func (f *front) store(ctx context.Context, spans []store.Span, rejected []genai.Rejection) (ptraceotlp.ExportResponse, *status.Status) {
	resp := ptraceotlp.NewExportResponse()
	n := len(spans) + len(rejected)
	if n == 0 {
		return resp, nil
	}
	rejected, err := f.in.consume(ctx, spans, rejected)
	if err != nil {
		st := errorStatus(err, f.retryAfter)
		f.log.Debug("refused OTLP request", "spans", n, "code", st.Code().String(), "error", err)
		return resp, st
	}
	if len(rejected) > 0 {
		ps := resp.PartialSuccess()
		ps.SetRejectedSpans(int64(len(rejected)))
		ps.SetErrorMessage(genai.RejectionSummary(rejected))
	}
	return resp, nil
}

// --- gRPC ---

// The gRPC side registers its own descriptor for the OTLP trace service
// instead of ptraceotlp.RegisterGRPCServer: gRPC decodes a request before
// the handler runs and answers INTERNAL when that fails, but OTLP wants
// INVALID_ARGUMENT for a malformed request. So the handler receives the raw
// bytes (rawCodec passes them through) and decodes them itself.

const (
	traceServiceName = "opentelemetry.proto.collector.trace.v1.TraceService"
	exportMethod     = "/" + traceServiceName + "/Export"
)

type rawMessage struct {
	b []byte
	// pooled is b's buffer from requestBufs, given back by release.
	pooled *[]byte
}

// requestBufs recycles the buffers gRPC requests are copied into: a fresh
// one per request (Materialize) was a quarter of serve's allocations at
// ingest on agent traffic, a megabyte or more each, zeroed and then
// collected. Nothing decoded from a request points into its bytes (the
// decoder copies every string), so the buffer is free once exportRaw
// returns. Requests above maxPooledRequest get a buffer of their own.
var requestBufs sync.Pool // *[]byte

const maxPooledRequest = 16 << 20

// release gives r's buffer back to requestBufs.
func (r *rawMessage) release() {
	if r.pooled != nil {
		*r.pooled = r.b[:0]
		requestBufs.Put(r.pooled)
		r.pooled, r.b = nil, nil
	}
}

// rawCodec passes *rawMessage through untouched and delegates every other
// type to the standard protobuf codec.
type rawCodec struct{ proto encoding.CodecV2 }

func newRawCodec() rawCodec { return rawCodec{proto: encoding.GetCodecV2("proto")} }

func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*rawMessage); ok {
		return mem.BufferSlice{mem.SliceBuffer(r.b)}, nil
	}
	return c.proto.Marshal(v)
}

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawMessage); ok {
		n := data.Len()
		if n > maxPooledRequest {
			r.b = data.Materialize()
			return nil
		}
		bp, _ := requestBufs.Get().(*[]byte)
		if bp == nil {
			bp = new([]byte)
		}
		if cap(*bp) < n {
			*bp = make([]byte, n)
		}
		r.b, r.pooled = (*bp)[:n], bp
		data.CopyTo(r.b)
		return nil
	}
	return c.proto.Unmarshal(data, v)
}

func (rawCodec) Name() string { return "proto" }

// rawTraceServer is the handler type of the descriptor below.
type rawTraceServer interface {
	exportRaw(ctx context.Context, in *rawMessage) (*rawMessage, error)
}

var traceServiceDesc = grpc.ServiceDesc{
	ServiceName: traceServiceName,
	HandlerType: (*rawTraceServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Export",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(rawMessage)
			if err := dec(in); err != nil {
				return nil, err
			}
			s := srv.(rawTraceServer)
			if interceptor == nil {
				return s.exportRaw(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: exportMethod}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return s.exportRaw(ctx, req.(*rawMessage))
			})
		},
	}},
	Metadata: "opentelemetry/proto/collector/trace/v1/trace_service.proto",
}

func (f *front) exportRaw(ctx context.Context, in *rawMessage) (*rawMessage, error) {
	defer in.release()
	// The tap reserved an estimate before the message was read; correct it
	// to the real size before decoding multiplies it.
	if t := ticketFrom(ctx); t != nil {
		defer t.release()
		if !t.resize(int64(len(in.b))) {
			return nil, f.admit.refusal(fmt.Sprintf("a %d-byte request", len(in.b))).Err()
		}
	}
	resp, st := f.exportProto(ctx, in.b)
	if st != nil {
		return nil, st.Err()
	}
	b, err := resp.MarshalProto()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode OTLP response: %v", err)
	}
	return &rawMessage{b: b}, nil
}

// --- HTTP ---

func (f *front) handleHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeHTTPStatus(w, contentTypeJSON, http.StatusMethodNotAllowed,
			status.Newf(codes.Unimplemented, "method %s not allowed on %s: OTLP/HTTP uses POST", r.Method, TracesPath))
		return
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != contentTypeProto && mt != contentTypeJSON {
		writeHTTPStatus(w, contentTypeJSON, http.StatusUnsupportedMediaType,
			status.Newf(codes.InvalidArgument, "unsupported Content-Type %q: OTLP/HTTP accepts %s and %s",
				r.Header.Get("Content-Type"), contentTypeProto, contentTypeJSON))
		return
	}
	// Admission before the body is read: the declared length when there is
	// one, else the recent average, corrected once the body is in.
	est := r.ContentLength
	if est <= 0 {
		est = f.admit.estimate()
	}
	// The rule gRPC's tap applies (admission.admit); OTLP/HTTP states no
	// deadline, so the exporters' default timeout stands in for it.
	t, refusal := f.admit.admit(est, protoHTTP, "the request was not read")
	if refusal != nil {
		writeHTTPStatus(w, mt, http.StatusTooManyRequests, refusal)
		return
	}
	defer t.release()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		code := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			code = http.StatusRequestEntityTooLarge
		}
		writeHTTPStatus(w, mt, code, status.Newf(codes.InvalidArgument, "read request body: %v", err))
		return
	}
	if !t.resize(int64(len(body))) {
		writeHTTPStatus(w, mt, http.StatusTooManyRequests, f.admit.refusal(fmt.Sprintf("a %d-byte request", len(body))))
		return
	}
	var (
		resp ptraceotlp.ExportResponse
		st   *status.Status
	)
	if mt == contentTypeJSON {
		resp, st = f.exportJSON(r.Context(), body)
	} else {
		resp, st = f.exportProto(r.Context(), body)
	}
	if st != nil {
		writeHTTPStatus(w, mt, httpStatus(st.Code()), st)
		return
	}
	var out []byte
	if mt == contentTypeJSON {
		out, err = resp.MarshalJSON()
	} else {
		out, err = resp.MarshalProto()
	}
	if err != nil {
		writeHTTPStatus(w, mt, http.StatusInternalServerError, status.Newf(codes.Internal, "encode OTLP response: %v", err))
		return
	}
	w.Header().Set("Content-Type", mt)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// writeHTTPStatus writes an OTLP/HTTP error: a google.rpc.Status in the
// request's encoding, with Retry-After when the status carries a retry
// delay and the code is retryable.
func writeHTTPStatus(w http.ResponseWriter, contentType string, code int, st *status.Status) {
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		if ra := retryAfterHeader(st); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
	}
	var (
		body []byte
		err  error
	)
	if contentType == contentTypeProto {
		body, err = proto.Marshal(st.Proto())
	} else {
		contentType = contentTypeJSON
		body, err = protojson.Marshal(st.Proto())
	}
	if err != nil {
		contentType = "text/plain; charset=utf-8"
		body = fmt.Appendf(nil, "%s\n", st.Message())
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
