package ci

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/collector/genai"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/store"
)

// The committed rollup files of a baselines folder.
const (
	// RollupsFile holds one rollup per fresh run (case and trial) and per
	// trace of the SDK trace files, as `loom-eval ci --record` wrote them.
	RollupsFile = "rollups.jsonl"
	// TracesDir holds OTLP/JSON trace files (*.otlp.jsonl) as other SDKs
	// send them — aggregate spans repeating their children's usage, cached
	// input, a failed call, an unpriced model — which the reference
	// agents' own traces do not exercise.
	TracesDir = "traces"
)

// RollupResult is the rollup step: every fresh run's trace, exported by
// the OpenTelemetry SDK over OTLP/HTTP to an in-process collector on
// loopback, mapped by the collector and rolled up, and every trace of the
// committed SDK trace files rolled up, compared with the committed
// rollups field by field.
type RollupResult struct {
	Passed bool   `json:"passed"`
	File   string `json:"file"`
	// Runs and Traces count the fresh runs' and the SDK files' rollups.
	Runs   int `json:"runs"`
	Traces int `json:"traces"`
	// Diffs are the fields that differ from the committed rollups.
	Diffs      []RollupDiff `json:"diffs"`
	DurationMS float64      `json:"duration_ms"`
}

// RollupDiff is one field of one rollup that differs from the committed one.
type RollupDiff struct {
	CaseID    string `json:"case_id,omitempty"`
	Trial     int    `json:"trial"`
	RunID     string `json:"run_id,omitempty"`
	File      string `json:"file,omitempty"`
	TraceID   string `json:"trace_id,omitempty"`
	Field     string `json:"field"`
	Committed string `json:"committed"`
	Now       string `json:"now"`
}

func (d RollupDiff) where() string {
	if d.File != "" {
		return fmt.Sprintf("%s trace %s", d.File, d.TraceID)
	}
	return fmt.Sprintf("%s trial %d", d.CaseID, d.Trial)
}

// RollupRecord is one line of rollups.jsonl: the deterministic fields of
// a rollup. A fresh run's trace is named by case and trial (its trace id
// is random); an SDK file's trace by file and trace id. Times come from
// the runtime's logical clock (one millisecond per reading), so a run's
// duration and critical path are deterministic; its start is not compared
// (the clock runs on across an agent's runs).
type RollupRecord struct {
	CaseID  string `json:"case_id,omitempty"`
	Trial   int    `json:"trial"`
	RunID   string `json:"run_id,omitempty"`
	File    string `json:"file,omitempty"`
	TraceID string `json:"trace_id,omitempty"`
	// RunTokens is the runtime's own accounting of the run (the usage its
	// Run returned, input plus output tokens); the rollup's tokens come
	// from the spans, each model call's own.
	RunTokens           *int64   `json:"run_tokens,omitempty"`
	TokensIn            int64    `json:"tokens_in"`
	TokensOut           int64    `json:"tokens_out"`
	CacheReadTokens     int64    `json:"cache_read_tokens"`
	CacheCreationTokens int64    `json:"cache_creation_tokens"`
	ModelCalls          int      `json:"model_calls"`
	FailedModelCalls    int      `json:"failed_model_calls"`
	ToolCalls           int      `json:"tool_calls"`
	SpanCount           int      `json:"span_count"`
	ErrorCount          int      `json:"error_count"`
	CostUSD             *float64 `json:"cost_usd"`
	KnownCostUSD        float64  `json:"known_cost_usd"`
	DurationMS          float64  `json:"duration_ms"`
	CriticalPathMS      float64  `json:"critical_path_ms"`
	CriticalPath        []string `json:"critical_path"`
}

func (r *RollupRecord) key() string {
	if r.File != "" {
		return "file " + r.File + " " + r.TraceID
	}
	return fmt.Sprintf("run %s %d", r.CaseID, r.Trial)
}

func recordOf(r rollup.Rollup) RollupRecord {
	rec := RollupRecord{TokensIn: r.TokensIn, TokensOut: r.TokensOut, CacheReadTokens: r.CacheReadTokens,
		CacheCreationTokens: r.CacheCreationTokens, ModelCalls: r.ModelCalls, FailedModelCalls: r.FailedModelCalls,
		ToolCalls: r.ToolCalls, SpanCount: r.SpanCount, ErrorCount: r.ErrorCount, CostUSD: r.CostUSD,
		KnownCostUSD: r.KnownCostUSD, DurationMS: r.DurationMS, CriticalPathMS: r.CriticalPathMS, CriticalPath: []string{}}
	for _, e := range r.CriticalPath {
		rec.CriticalPath = append(rec.CriticalPath, e.Name)
	}
	return rec
}

// fields lists the compared fields of r, formatted.
func (r *RollupRecord) fields() [][2]string {
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 12, 64) }
	opt := func(p *int64) string {
		if p == nil {
			return "unknown"
		}
		return i(*p)
	}
	cost := "unknown"
	if r.CostUSD != nil {
		cost = f(*r.CostUSD)
	}
	return [][2]string{
		{"run_tokens", opt(r.RunTokens)},
		{"tokens_in", i(r.TokensIn)}, {"tokens_out", i(r.TokensOut)},
		{"cache_read_tokens", i(r.CacheReadTokens)}, {"cache_creation_tokens", i(r.CacheCreationTokens)},
		{"model_calls", i(int64(r.ModelCalls))}, {"failed_model_calls", i(int64(r.FailedModelCalls))},
		{"tool_calls", i(int64(r.ToolCalls))}, {"span_count", i(int64(r.SpanCount))}, {"error_count", i(int64(r.ErrorCount))},
		{"cost_usd", cost}, {"known_cost_usd", f(r.KnownCostUSD)},
		{"duration_ms", f(r.DurationMS)}, {"critical_path_ms", f(r.CriticalPathMS)},
		{"critical_path", strings.Join(r.CriticalPath, " > ")},
	}
}

// compareRollups compares the records with the committed ones, by key.
func compareRollups(committed, now []RollupRecord) []RollupDiff {
	byKey := map[string]*RollupRecord{}
	for i := range committed {
		byKey[committed[i].key()] = &committed[i]
	}
	seen := map[string]bool{}
	diffs := []RollupDiff{}
	at := func(r *RollupRecord) RollupDiff {
		return RollupDiff{CaseID: r.CaseID, Trial: r.Trial, RunID: r.RunID, File: r.File, TraceID: r.TraceID}
	}
	for i := range now {
		n := &now[i]
		seen[n.key()] = true
		c := byKey[n.key()]
		if c == nil {
			d := at(n)
			d.Field, d.Committed, d.Now = "rollup", "none", "a rollup"
			diffs = append(diffs, d)
			continue
		}
		cf, nf := c.fields(), n.fields()
		for k := range cf {
			if cf[k][1] != nf[k][1] {
				d := at(n)
				d.Field, d.Committed, d.Now = cf[k][0], cf[k][1], nf[k][1]
				diffs = append(diffs, d)
			}
		}
	}
	for i := range committed {
		if c := &committed[i]; !seen[c.key()] {
			d := at(c)
			d.Field, d.Committed, d.Now = "rollup", "a rollup", "none"
			diffs = append(diffs, d)
		}
	}
	return diffs
}

// traceCollector is the recipe's trace path: the OpenTelemetry SDK's
// OTLP/HTTP exporter sending to the Loomwork collector, in process, on a
// loopback port, writing to memory.
type traceCollector struct {
	srv *collector.Server
	w   *spanWriter
	tp  *sdktrace.TracerProvider
}

// spanWriter is the collector's store: it keeps what it is given.
type spanWriter struct {
	mu    sync.Mutex
	spans []store.Span
}

func (w *spanWriter) WriteSpans(_ context.Context, spans []store.Span) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.spans = append(w.spans, spans...)
	return nil
}

func startTraceCollector(ctx context.Context, log *slog.Logger) (*traceCollector, error) {
	w := &spanWriter{}
	// The collector's start-up lines are information about the recipe's
	// plumbing, not its verdict: only its warnings and errors get through.
	quiet := slog.New(minLevel{Handler: log.Handler(), min: slog.LevelWarn})
	srv, err := collector.NewServer(collector.ServerConfig{GRPCAddr: collector.AddrOff, HTTPAddr: "127.0.0.1:0", Logger: quiet}, w)
	if err != nil {
		return nil, fmt.Errorf("ci: trace collector: %w", err)
	}
	if err := srv.Start(ctx); err != nil {
		return nil, fmt.Errorf("ci: trace collector: %w", err)
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(srv.HTTPAddr()), otlptracehttp.WithInsecure())
	if err != nil {
		_ = srv.Shutdown(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("ci: trace exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "loomwork-ci"))),
		sdktrace.WithBatcher(exp, sdktrace.WithMaxExportBatchSize(2048), sdktrace.WithMaxQueueSize(1<<16)),
	)
	return &traceCollector{srv: srv, w: w, tp: tp}, nil
}

// minLevel drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(as), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}

// finish exports every span ended so far, drains the collector and
// returns the spans it stored, by trace id.
func (c *traceCollector) finish(ctx context.Context) (map[string][]store.Span, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	err := c.tp.Shutdown(ctx)
	err = errors.Join(err, c.srv.Shutdown(ctx))
	if err != nil {
		return nil, fmt.Errorf("ci: export the fresh runs' traces: %w", err)
	}
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	out := map[string][]store.Span{}
	for _, s := range c.w.spans {
		out[s.TraceID] = append(out[s.TraceID], s)
	}
	return out, nil
}

// close releases a collector that finish did not (an error path).
func (c *traceCollector) close(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = c.tp.Shutdown(ctx)
	_ = c.srv.Shutdown(ctx)
}

// runTrace names one fresh run's trace.
type runTrace struct {
	caseID  string
	trial   int
	runID   string
	traceID string
	tokens  *int64 // nil: the run stopped with an error
}

// rollupRecords rolls up the fresh runs' traces and the SDK trace files
// of dir/traces, in that order (runs in the order they ran, files by name).
func rollupRecords(dir string, runs []runTrace, byTrace map[string][]store.Span) ([]RollupRecord, int, error) {
	prices := pricing.Default()
	var out []RollupRecord
	for _, r := range runs {
		rec := RollupRecord{CaseID: r.caseID, Trial: r.trial, RunID: r.runID, CriticalPath: []string{}}
		if spans := byTrace[r.traceID]; r.traceID != "" && len(spans) > 0 {
			rec = recordOf(rollup.Compute(spans, prices))
			rec.CaseID, rec.Trial, rec.RunID = r.caseID, r.trial, r.runID
		}
		rec.RunTokens = r.tokens
		out = append(out, rec)
	}
	files, err := filepath.Glob(filepath.Join(dir, TracesDir, "*.otlp.jsonl"))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	sort.Strings(files)
	traces := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %w", ErrBadInput, err)
		}
		spans, rejected, err := genai.ReadJSON(bytes.NewReader(b), f, genai.Options{})
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %w", ErrBadInput, err)
		}
		if len(rejected) > 0 {
			return nil, 0, fmt.Errorf("%w: %s: %s", ErrBadInput, f, genai.RejectionSummary(rejected))
		}
		for _, r := range rollup.ComputeAll(spans, prices) {
			rec := recordOf(r)
			rec.File, rec.TraceID = filepath.ToSlash(filepath.Join(TracesDir, filepath.Base(f))), r.TraceID
			out = append(out, rec)
			traces++
		}
	}
	return out, traces, nil
}

func readRollups(path string) ([]RollupRecord, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%w: %w (regenerate it with scripts/baselines.sh record)", ErrBadInput, err)
	}
	return readJSONLines[RollupRecord](path)
}

// readJSONLines decodes one T per non-blank line of path, strictly (an
// unknown field is an error naming the line).
func readJSONLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var v T
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: %s line %d: %w", ErrBadInput, path, line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadInput, path, err)
	}
	return out, nil
}

func writeJSONLines[T any](path string, vs []T) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, v := range vs {
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// runTraces pairs each fresh trial with its run's trace and the runtime's
// token total for it.
func runTraces(trials []datasets.Trial, traceOf map[string]string, usageOf map[string]int64) []runTrace {
	out := make([]runTrace, 0, len(trials))
	for _, t := range trials {
		rt := runTrace{caseID: t.CaseID, trial: t.Trial}
		if t.Journal != nil {
			rt.runID = t.Journal.RunID
			rt.traceID = traceOf[rt.runID]
			if n, ok := usageOf[rt.runID]; ok {
				rt.tokens = &n
			}
		}
		out = append(out, rt)
	}
	return out
}
