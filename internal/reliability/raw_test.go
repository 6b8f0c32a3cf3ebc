package reliability

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Raw OTLP/gRPC requests, for the rows the SDK cannot express: requests of
// a chosen size sent all at once, a timestamp the SDK's time.Time cannot
// hold, and bytes that are not a request at all.

func dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(256<<20), grpc.MaxCallRecvMsgSize(16<<20)))
}

// rawTraces builds n spans with keys first … first+n-1 (the key scheme of
// buildSpans); startNs overrides the start of span index bad when bad >= 0.
func rawTraces(nonce [8]byte, first uint64, n int, bad int, badStartNs uint64) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "reliability")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("loomwork/reliability")
	spans := ss.Spans()
	spans.EnsureCapacity(n)
	now := uint64(time.Now().UnixNano())
	for i := range n {
		k := first + uint64(i)
		sp := spans.AppendEmpty()
		var tid [16]byte
		copy(tid[:8], nonce[:])
		binary.BigEndian.PutUint64(tid[8:], k>>4)
		var sid [8]byte
		binary.BigEndian.PutUint64(sid[:], k)
		sp.SetTraceID(pcommon.TraceID(tid))
		sp.SetSpanID(pcommon.SpanID(sid))
		sp.SetName("chat model-a")
		sp.SetKind(ptrace.SpanKindClient)
		start := now - uint64(n-i)*1e6
		if i == bad {
			start = badStartNs
		}
		sp.SetStartTimestamp(pcommon.Timestamp(start))
		sp.SetEndTimestamp(pcommon.Timestamp(now - uint64(n-i)*1e6 + 5e5))
		a := sp.Attributes()
		a.PutStr("gen_ai.operation.name", "chat")
		a.PutStr("gen_ai.request.model", "model-a")
		a.PutInt("gen_ai.usage.input_tokens", int64(k%1000))
		a.PutInt("gen_ai.usage.output_tokens", int64(k%97))
	}
	return td
}

// maxTimestamp is 2^64−1 ns, the largest start an OTLP span can carry.
const maxTimestamp = math.MaxUint64

// floodResult is what a raw flood saw, request by request.
type floodResult struct {
	recs     []exportRecord
	outcomes codeCount
	start    time.Time
	took     time.Duration
	retryOK  int // refusals (RESOURCE_EXHAUSTED/UNAVAILABLE) carrying RetryInfo
	refusals int
}

func (f *floodResult) ackedSpans() int64 {
	var n int64
	for _, r := range f.recs {
		if r.acked {
			n += int64(r.n)
		}
	}
	return n
}

// flood runs workers concurrent senders of spansPer-span requests for d,
// each attempt with the SDK's 10 s deadline. As the SDK does, a sender
// retries the same request (same bytes, same keys) after a refusal —
// waiting what RetryInfo asks, at most 5 s — or after its deadline, and
// builds the next one only once a request is acknowledged. Each request is
// marshaled once: re-marshaling 300 large requests on every retry wave
// cost the senders more CPU than serve had left on two cores, and the row
// measured the test's client instead of serve. senderBase keeps the keys
// of separate floods apart.
func flood(addr string, nonce [8]byte, senderBase uint64, workers, spansPer int, d time.Duration) (*floodResult, error) {
	conn, err := dial(addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	res := &floodResult{start: time.Now()}
	var mu sync.Mutex
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	errs := make(chan error, workers)
	build := func(first uint64) ([]byte, error) {
		return ptraceotlp.NewExportRequestFromTraces(rawTraces(nonce, first, spansPer, -1, 0)).MarshalProto()
	}
	// Every worker builds its first request before any is sent, so the
	// first wave really is workers concurrent requests.
	startGate := make(chan struct{})
	var built sync.WaitGroup
	built.Add(workers)
	for w := range workers {
		sender := senderBase + uint64(w) + 1
		wg.Go(func() {
			seq := uint64(1)
			first := sender<<32 | seq
			msg, err := build(first)
			built.Done()
			if err != nil {
				errs <- err
				return
			}
			<-startGate
			tried := false // msg has been sent at least once, and not answered
			for time.Now().Before(end) {
				tried = true
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				var reply []byte
				err := conn.Invoke(ctx, exportMethod, &msg, &reply, grpc.ForceCodec(rawCodec{}))
				// Read before cancel: after it, ctx.Err() is always set, and
				// every failed attempt would look like a timeout.
				timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
				cancel()
				acked := false
				if err == nil {
					resp := ptraceotlp.NewExportResponse()
					if uerr := resp.UnmarshalProto(reply); uerr != nil {
						errs <- fmt.Errorf("decode export response: %w", uerr)
						return
					}
					acked = resp.PartialSuccess().RejectedSpans() == 0
				}
				name := attemptName(err)
				// The sender's deadline passed: the client saw it, or the
				// server (which has the same deadline) answered first.
				if err != nil && (timedOut || status.Code(err) == codes.DeadlineExceeded) {
					name = "deadline exceeded"
				}
				res.outcomes.add(name)
				wait := time.Duration(0)
				if st, ok := status.FromError(err); ok && err != nil {
					for _, dt := range st.Details() {
						if ri, ok := dt.(*errdetails.RetryInfo); ok {
							wait = min(ri.RetryDelay.AsDuration(), 5*time.Second)
						}
					}
				}
				mu.Lock()
				if name[:min(len(name), 17)] == "ResourceExhausted" || name[:min(len(name), 11)] == "Unavailable" {
					res.refusals++
					if wait > 0 {
						res.retryOK++
					}
				}
				if err == nil {
					// Answered: acknowledged, or partly rejected (not
					// retried, as the SDK does not retry a partial success).
					res.recs = append(res.recs, exportRecord{first: first, n: spansPer, acked: acked})
				}
				mu.Unlock()
				if err != nil {
					if wait > 0 {
						time.Sleep(min(wait, time.Until(end)))
					}
					continue // the same request again
				}
				tried = false
				seq += uint64(spansPer)
				first = sender<<32 | seq
				if msg, err = build(first); err != nil {
					errs <- err
					return
				}
			}
			// The flood ended with this request unanswered or refused: sent,
			// never acknowledged (an attempt that timed out may still have
			// been stored; the tally reads the store).
			if tried {
				mu.Lock()
				res.recs = append(res.recs, exportRecord{first: first, n: spansPer})
				mu.Unlock()
			}
		})
	}
	built.Wait()
	res.start, end = time.Now(), time.Now().Add(d)
	close(startGate)
	wg.Wait()
	res.took = time.Since(res.start)
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return res, nil
}

// rawCodec sends bytes as they are: the unauthenticated flood needs no
// valid request, only large messages.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// junkFlood sends workers concurrent messages of size bytes with the given
// authorization (empty: none) for d and counts the outcomes.
func junkFlood(addr, authorization string, workers, size int, d time.Duration) (*codeCount, int, error) {
	conn, err := dial(addr)
	if err != nil {
		return nil, 0, err
	}
	defer conn.Close()
	// A length-delimited field 1 (resource_spans) as long as the message:
	// a reader that trusts it must buffer everything.
	body := size - 1 - 4 // a 4-byte varint holds lengths of 2 MiB … 256 MiB
	msg := binary.AppendUvarint([]byte{0x0a}, uint64(body))
	msg = append(msg, make([]byte, body)...)
	var out codeCount
	var mu sync.Mutex
	sent := 0
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for range workers {
		wg.Go(func() {
			for time.Now().Before(end) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if authorization != "" {
					ctx = metadata.AppendToOutgoingContext(ctx, "authorization", authorization)
				}
				var reply []byte
				err := conn.Invoke(ctx, exportMethod, &msg, &reply, grpc.ForceCodec(rawCodec{}))
				cancel()
				out.add(attemptName(err))
				mu.Lock()
				sent++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return &out, sent, nil
}

// exportOnce sends one request and returns the response and status.
func exportOnce(addr string, td ptrace.Traces) (ptraceotlp.ExportResponse, error) {
	conn, err := dial(addr)
	if err != nil {
		return ptraceotlp.NewExportResponse(), err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
	if err != nil {
		return resp, fmt.Errorf("export: %w", err)
	}
	return resp, nil
}
