package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/loomwork/loomwork/datasets"
)

const (
	replayGood     = "../../replay/testdata/good.jsonl"
	replayTampered = "../../replay/testdata/bad-tampered.jsonl"
)

func runReplayCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	err := m.Run(context.Background(), append([]string{"replay"}, args...))
	return out.String() + errb.String(), err
}

func TestReplayCommandPassesTheCommittedJournalAndWritesTrials(t *testing.T) {
	trials := filepath.Join(t.TempDir(), "trials.jsonl")
	// stdout is the JSON alone; progress goes to stderr.
	code, out, stderr := runWithStderr(t, "replay", "--json", "--trials-out", trials, "--experiments-dir", t.TempDir(), replayGood)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	var got replayOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !got.OK || len(got.Reports) != 1 || got.Reports[0].ModelCalls != 0 || got.Reports[0].ToolRuns != 4 {
		t.Fatalf("output = %s", out)
	}
	ts, err := datasets.LoadTrials(trials)
	if err != nil {
		t.Fatal(err)
	}
	tr := ts[0]
	if len(ts) != 1 || tr.CaseID != "lunch" || tr.ModelLabel != "scripted" || tr.Success == nil || !*tr.Success ||
		strings.Join(tr.EvidenceCited, ",") != "policy/meals" || strings.Join(tr.EvidenceRetrieved, ",") != "policy/meals" ||
		tr.Journal == nil || tr.Journal.RunID != "bookkeeper-case-lunch-t0" || tr.TraceID != "" {
		t.Fatalf("trial = %+v", tr)
	}
}

func TestReplayCommandRejectsATamperedJournalNamingTheLine(t *testing.T) {
	out, err := runReplayCmd(t, replayTampered)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitUsage {
		t.Fatalf("err = %v, want exit %d", err, ExitUsage)
	}
	if !strings.Contains(out, "bad-tampered.jsonl:12") || !strings.Contains(out, "content hash mismatch") {
		t.Fatalf("output does not name the line:\n%s", out)
	}
}

func TestReplayCommandRescoreExecutesNothing(t *testing.T) {
	out, err := runReplayCmd(t, "--rescore", replayGood)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "RESCORED bookkeeper-case-lunch-t0") || !strings.Contains(out, "0 tool runs, 0 model calls") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestReplayCommandWithoutJournalIsAUsageError(t *testing.T) {
	_, err := runReplayCmd(t)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitUsage {
		t.Fatalf("err = %v", err)
	}
}

// otlpSink is a real OTLP/gRPC trace receiver on 127.0.0.1.
type otlpSink struct {
	coltracepb.UnimplementedTraceServiceServer
	mu   sync.Mutex
	reqs []*coltracepb.ExportTraceServiceRequest
}

func (s *otlpSink) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func TestReplayCommandSendsItsSpansOverOTLP(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink := &otlpSink{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, sink)
	go srv.Serve(lis)
	defer srv.Stop()

	trials := filepath.Join(t.TempDir(), "trials.jsonl")
	out, err := runReplayCmd(t, "--otlp-endpoint", lis.Addr().String(), "--trials-out", trials, "--experiments-dir", t.TempDir(), replayGood)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ts, err := datasets.LoadTrials(trials)
	if err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	names := map[string]int{}
	labelled := 0
	for _, req := range sink.reqs {
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					names[sp.Name]++
					if got := strings.ToLower(bytesHex(sp.TraceId)); got != ts[0].TraceID {
						t.Fatalf("span %s in trace %s, trial says %s", sp.Name, got, ts[0].TraceID)
					}
					for _, kv := range sp.Attributes {
						if kv.Key == "loomwork.model.label" && kv.Value.GetStringValue() == "scripted" {
							labelled++
						}
					}
				}
			}
		}
	}
	if names["invoke_agent bookkeeper"] != 1 || names["chat scripted-bookkeeper"] != 4 || names["execute_tool ledger_append"] != 2 || names["retrieval search_policy"] != 1 {
		t.Fatalf("spans received = %v", names)
	}
	if labelled != 5 { // invoke_agent and the four chat spans
		t.Fatalf("%d spans labelled scripted, want 5", labelled)
	}
}

func bytesHex(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
