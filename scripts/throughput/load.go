package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"

	"github.com/loomwork/loomwork/collector/agenttrace"
)

// spansPerTrace is the shape of agenttrace's traces in this load: an
// invoke_agent root and nine children.
const spansPerTrace = 10

// template is one marshaled OTLP ExportTraceServiceRequest and where its
// trace ids sit, so a sender makes a fresh request (new trace ids, same
// bytes otherwise) by patching, not by generating and marshaling spans:
// the client then costs little CPU next to the processes it measures. The
// same technique as BenchmarkIngest (collector/bench_test.go).
type template struct {
	body    []byte
	offsets []int // start of every trace id occurrence (one per span)
	spans   int
}

// makeTemplates cuts n requests of spansPerRequest spans from one
// agenttrace batch. spansPerRequest must be a multiple of spansPerTrace so
// that no trace straddles two templates (a straddling trace would get two
// different ids after patching, which is harmless but changes the shape).
func makeTemplates(n, spansPerRequest int, seed uint64, start time.Time) ([]template, error) {
	if n < 1 || spansPerRequest < spansPerTrace || spansPerRequest%spansPerTrace != 0 {
		return nil, fmt.Errorf("make templates: %d requests of %d spans: want n ≥ 1 and a positive multiple of %d spans", n, spansPerRequest, spansPerTrace)
	}
	all := agenttrace.NewGenerator(seed, start).Batch(n*spansPerRequest/spansPerTrace, spansPerTrace)
	src := all.ResourceSpans().At(0)
	spans := src.ScopeSpans().At(0).Spans()
	if spans.Len() != n*spansPerRequest {
		return nil, fmt.Errorf("make templates: generator made %d spans, want %d", spans.Len(), n*spansPerRequest)
	}
	out := make([]template, n)
	for i := range n {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		src.Resource().CopyTo(rs.Resource())
		ss := rs.ScopeSpans().AppendEmpty()
		src.ScopeSpans().At(0).Scope().CopyTo(ss.Scope())
		ids := map[pcommon.TraceID]bool{}
		for k := i * spansPerRequest; k < (i+1)*spansPerRequest; k++ {
			sp := spans.At(k)
			sp.CopyTo(ss.Spans().AppendEmpty())
			ids[sp.TraceID()] = true
		}
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			return nil, fmt.Errorf("make templates: marshal request %d: %w", i, err)
		}
		t := template{body: body, spans: spansPerRequest}
		for id := range ids {
			for off := 0; ; {
				j := bytes.Index(body[off:], id[:])
				if j < 0 {
					break
				}
				t.offsets = append(t.offsets, off+j)
				off += j + len(id)
			}
		}
		if len(t.offsets) != spansPerRequest {
			return nil, fmt.Errorf("make templates: found %d trace ids in request %d, want %d (one per span)", len(t.offsets), i, spansPerRequest)
		}
		out[i] = t
	}
	return out, nil
}

// fill writes request k into buf (reused by one sender): the template's
// bytes with the low half of every trace id XORed with a mix of k.
// Multiplying by an odd constant is a bijection on uint64, so two requests
// of one template never share a trace id, and templates differ in the
// random high half.
func (t template) fill(buf []byte, k uint64) []byte {
	buf = append(buf[:0], t.body...)
	mix := (k + 1) * 0x9e3779b97f4a7c15
	for _, off := range t.offsets {
		v := binary.BigEndian.Uint64(buf[off+8:]) ^ mix
		binary.BigEndian.PutUint64(buf[off+8:], v)
	}
	return buf
}

// loadSource makes the requests the senders send.
type loadSource interface {
	// sender returns one sender's request maker: request k written into
	// buf (reused by that sender) and its span count.
	sender() func(buf []byte, k uint64) ([]byte, int)
}

// templatedLoad is the load of issue 17: 16 templates of agenttrace
// spans, request k template k mod 16 with fresh trace ids.
type templatedLoad []template

func (ts templatedLoad) sender() func([]byte, uint64) ([]byte, int) {
	return func(buf []byte, k uint64) ([]byte, int) {
		t := ts[k%uint64(len(ts))]
		return t.fill(buf, k), t.spans
	}
}

func (l *agentLoad) sender() func([]byte, uint64) ([]byte, int) {
	var scratch []placement
	return func(buf []byte, k uint64) ([]byte, int) {
		var n int
		buf, n, scratch = l.request(buf, k, time.Now(), scratch)
		return buf, n
	}
}

// rawCodec sends pre-marshaled bytes as the gRPC message.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// loadResult is what the senders saw.
type loadResult struct {
	Requests       int64     // requests answered OK
	Failed         int64     // requests answered with an error
	Acked          int64     // spans acknowledged (OK minus partial_success rejections)
	Rejected       int64     // spans rejected through partial_success
	FirstError     string    // the first failure, if any
	Began, Stopped time.Time // first send; last answer
}

// drive runs senders concurrent senders, each on its own connection (as
// separate SDK exporters would be), sending requests back to back until
// the deadline; a request in flight at the deadline is waited for. A
// failed request is counted and not retried (the next one carries new
// spans); the sender pauses 50 ms so a refusing server is not spun on.
func drive(ctx context.Context, addr string, src loadSource, senders int, d time.Duration) (loadResult, error) {
	conns := make([]*grpc.ClientConn, senders)
	for i := range conns {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
		if err != nil {
			return loadResult{}, fmt.Errorf("dial %s: %w", addr, err)
		}
		defer c.Close()
		conns[i] = c
	}
	var (
		next, reqs, failed, acked, rejected atomic.Int64
		firstMu                             sync.Mutex
		first                               string
		wg                                  sync.WaitGroup
	)
	began := time.Now()
	deadline := began.Add(d)
	for _, conn := range conns {
		nextRequest := src.sender()
		wg.Go(func() {
			var buf, out []byte
			for ctx.Err() == nil && time.Now().Before(deadline) {
				k := next.Add(1) - 1
				var n int
				buf, n = nextRequest(buf, uint64(k))
				rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				err := conn.Invoke(rctx, exportMethod, &buf, &out, grpc.ForceCodecV2(rawCodec{}))
				cancel()
				if err == nil {
					rej, perr := rejectedSpans(out)
					if perr != nil {
						err = perr
					} else {
						reqs.Add(1)
						rejected.Add(rej)
						acked.Add(int64(n) - rej)
						continue
					}
				}
				failed.Add(1)
				firstMu.Lock()
				if first == "" {
					first = err.Error()
				}
				firstMu.Unlock()
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	return loadResult{
		Requests: reqs.Load(), Failed: failed.Load(), Acked: acked.Load(), Rejected: rejected.Load(),
		FirstError: first, Began: began, Stopped: time.Now(),
	}, nil
}

// rejectedSpans reads partial_success.rejected_spans from an
// ExportTraceServiceResponse.
func rejectedSpans(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, nil
	}
	resp := ptraceotlp.NewExportResponse()
	if err := resp.UnmarshalProto(b); err != nil {
		return 0, fmt.Errorf("decode ExportTraceServiceResponse: %w", err)
	}
	return resp.PartialSuccess().RejectedSpans(), nil
}
