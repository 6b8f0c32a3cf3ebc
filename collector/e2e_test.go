package collector_test

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loomwork/loomwork/collector/agenttrace"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var runStart = time.Date(2026, 4, 2, 9, 30, 0, 0, time.UTC)

// wantTyped is the oracle for the typed GenAI fields of agenttrace's run,
// written out by hand from the GenAI conventions.
func wantTyped(conv string) map[string]store.Span {
	return map[string]store.Span{
		agenttrace.SpanAgent: {
			Operation: "invoke_agent", Provider: "anthropic", RequestModel: "claude-sonnet-4-5",
			AgentName: "researcher", ConversationID: conv,
			CitedDocs: []string{"docs/uploads/retries.md", "docs/config/network.md"},
		},
		agenttrace.SpanPlan: {
			Operation: "chat", Provider: "anthropic", RequestModel: "claude-sonnet-4-5", ResponseModel: "claude-sonnet-4-5-20250929",
			HasUsage: true, InputTokens: 1850, OutputTokens: 120, CacheReadTokens: 1024, CacheCreationTokens: 512,
		},
		agenttrace.SpanTool: {
			Operation: "execute_tool", ToolName: "search_docs", ToolCallID: "toolu_01",
		},
		agenttrace.SpanRetrieval: {
			Operation:     "retrieval",
			RetrievedDocs: []string{"docs/uploads/retries.md", "docs/config/network.md", "docs/install.md"},
		},
		agenttrace.SpanFailed: {
			Operation: "chat", Provider: "anthropic", RequestModel: "claude-sonnet-4-5",
		},
		agenttrace.SpanRetry: {
			Operation: "chat", Provider: "anthropic", RequestModel: "claude-sonnet-4-5", ResponseModel: "claude-sonnet-4-5-20250929",
			HasUsage: true, InputTokens: 2600, OutputTokens: 310, CacheReadTokens: 1792, ReasoningTokens: 96,
		},
	}
}

// TestSDKTraceReadsBackEqualOverGRPCAndHTTP sends an agent trace with the
// real OpenTelemetry SDK through both of its OTLP exporters to the
// in-process pipeline, and checks every field of every span read back from
// each backend.
func TestSDKTraceReadsBackEqualOverGRPCAndHTTP(t *testing.T) {
	testtier.Slow(t) // ClickHouse
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			open := b.setup(t).open
			st := open(t)
			defer st.Shutdown(context.Background())
			srv := startServer(t, st, nil)

			for i, tc := range []struct {
				transport string
				sender    *sdkSender
			}{
				{"grpc", newGRPCSender(t, srv.GRPCAddr())},
				{"http", newHTTPSender(t, srv.HTTPAddr())},
			} {
				t.Run(tc.transport, func(t *testing.T) {
					conv := "conv-" + tc.transport
					traceID := agenttrace.Emit(context.Background(), tc.sender.tp, agenttrace.Options{
						Start: runStart.Add(time.Duration(i) * time.Minute), Conversation: conv,
					})
					if err := tc.sender.flush(t); err != nil {
						t.Fatalf("SDK export over %s failed: %v", tc.transport, err)
					}
					want := tc.sender.expectedSpans(t, traceID, wantTyped(conv))
					if len(want) != 6 {
						t.Fatalf("SDK recorded %d spans, want 6", len(want))
					}
					got, err := st.GetTrace(store.WithDefaultProject(context.Background()), traceID.String())
					if err != nil {
						t.Fatalf("GetTrace: %v", err)
					}
					got = normalise(got)
					if len(got) != len(want) {
						t.Fatalf("read back %d spans, sent %d", len(got), len(want))
					}
					for k := range want {
						if !reflect.DeepEqual(got[k], want[k]) {
							t.Errorf("span %q differs:\n got %#v\nwant %#v", want[k].Name, got[k], want[k])
						}
					}
				})
			}
		})
	}
}

// TestRestartKeepsEveryAcknowledgedSpanExactlyOnce sends batches from
// several concurrent senders, shuts the server down while they are still
// sending, restarts it on the same store and checks that every batch the
// sender was told was stored is there, once; then resends all of them and
// checks nothing is counted twice.
func TestRestartKeepsEveryAcknowledgedSpanExactlyOnce(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // its own store (database), server and directories
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			open := b.setup(t).open
			ctx := context.Background()

			st := open(t)
			srv := startServer(t, st, nil)
			conn := dialGRPC(t, srv.GRPCAddr())
			client := ptraceotlp.NewGRPCClient(conn)

			const senders, batchesEach, tracesPerBatch, spansPerTrace = 3, 8, 6, 10
			var (
				mu    sync.Mutex
				acked []ptrace.Traces
				sent  atomic.Int64
			)
			ready := make(chan struct{})
			var wg sync.WaitGroup
			for s := range senders {
				gen := agenttrace.NewGenerator(uint64(100+s), runStart.Add(time.Duration(s)*time.Hour))
				wg.Go(func() {
					for i := range batchesEach {
						td := gen.Batch(tracesPerBatch, spansPerTrace)
						rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
						_, err := client.Export(rctx, ptraceotlp.NewExportRequestFromTraces(td))
						cancel()
						if sent.Add(1) == senders*2 {
							close(ready)
						}
						if err != nil {
							return // the server is going away; unacknowledged data may be lost
						}
						mu.Lock()
						acked = append(acked, td)
						mu.Unlock()
						_ = i
					}
				})
			}
			<-ready // shut down in the middle of the load
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			if err := srv.Shutdown(sctx); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			cancel()
			wg.Wait()
			if err := st.Shutdown(context.Background()); err != nil {
				t.Fatalf("close store: %v", err)
			}
			if len(acked) == 0 {
				t.Fatal("no batch was acknowledged before the shutdown")
			}
			t.Logf("%d of %d batches acknowledged before shutdown", len(acked), senders*batchesEach)

			st2 := open(t)
			defer st2.Shutdown(context.Background())
			srv2 := startServer(t, st2, nil)
			checkExactlyOnce(t, st2, acked, spansPerTrace)

			client2 := ptraceotlp.NewGRPCClient(dialGRPC(t, srv2.GRPCAddr()))
			for _, td := range acked {
				if _, err := client2.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td)); err != nil {
					t.Fatalf("resend after restart: %v", err)
				}
			}
			checkExactlyOnce(t, st2, acked, spansPerTrace)
		})
	}
}

// checkExactlyOnce asserts each acknowledged trace is stored with each of
// its spans once, and that its summary counts them once.
func checkExactlyOnce(t *testing.T, st store.Reader, acked []ptrace.Traces, spansPerTrace int) {
	t.Helper()
	ctx := store.WithDefaultProject(context.Background())
	ids := map[string]bool{}
	for _, td := range acked {
		spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
		for i := 0; i < spans.Len(); i++ {
			ids[spans.At(i).TraceID().String()] = true
		}
	}
	for id := range ids {
		got, err := st.GetTrace(ctx, id)
		if err != nil {
			t.Fatalf("acknowledged trace %s: %v", id, err)
		}
		seen := map[string]int{}
		for _, s := range got {
			seen[s.SpanID]++
		}
		if len(got) != spansPerTrace || len(seen) != spansPerTrace {
			t.Fatalf("trace %s: %d spans (%d distinct), want %d once each", id, len(got), len(seen), spansPerTrace)
		}
	}
	// Summaries count each span once too.
	page, err := st.ListTraces(ctx, store.TraceQuery{Limit: store.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, sum := range page.Traces {
		if !ids[sum.TraceID] {
			continue
		}
		found++
		if sum.SpanCount != int64(spansPerTrace) {
			t.Errorf("summary of %s counts %d spans, want %d", sum.TraceID, sum.SpanCount, spansPerTrace)
		}
	}
	if found != len(ids) && page.NextPageToken == "" {
		t.Errorf("ListTraces found %d of %d acknowledged traces", found, len(ids))
	}
}

func dialGRPC(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
