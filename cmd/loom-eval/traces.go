package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loomwork/loomwork/internal/texttable"
	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storeurl"
	"github.com/loomwork/loomwork/web"
)

// runTraces lists or shows stored traces. It opens the store read-only, so
// it works while serve is writing.
func (m *Main) runTraces(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError("traces: want a subcommand: traces list [filters] | traces get TRACE_ID (or a unique prefix of 8+ hex digits)")
	}
	switch args[0] {
	case "list":
		return m.runTracesList(ctx, args[1:])
	case "get":
		return m.runTracesGet(ctx, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(m.Stderr, "Usage: loom-eval traces list [filters] [--json] | loom-eval traces get TRACE_ID|PREFIX [--json]")
		fmt.Fprintln(m.Stderr, "PREFIX: at least 8 hex digits (the list shows 8) that exactly one stored trace id starts with.")
		return nil
	}
	return usageError("traces: unknown subcommand %q (want list or get)", args[0])
}

func (m *Main) tracesStoreFlag(fs *flag.FlagSet) *string {
	return fs.String("store", "", "trace store URL (default $"+storeurl.EnvVar+", else "+storeurl.DefaultPath+")")
}

func (m *Main) tracesOpenStore(ctx context.Context, raw string) (store.Store, error) {
	if raw == "" && m.Getenv != nil {
		raw = m.Getenv(storeurl.EnvVar)
	}
	if _, err := storeurl.Parse(raw); err != nil {
		return nil, usageError("--store: %v", err)
	}
	st, err := storeurl.Open(ctx, raw, true)
	if err != nil {
		return nil, &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	// $LOOMWORK_KEY scopes every read to the key's project (keys.go).
	scoped, err := m.scopeStore(st)
	if err != nil {
		st.Shutdown(context.WithoutCancel(ctx))
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	return scoped, nil
}

// createStoreIfMissing creates the embedded store raw names (else
// $LOOMWORK_STORE, else the default) when its file does not exist yet,
// empty, as serve creates it: for a long-running reader that may start
// before anything was stored (mcp serve). A ClickHouse store is left alone.
func (m *Main) createStoreIfMissing(ctx context.Context, raw string) error {
	if raw == "" {
		raw = m.getenv(storeurl.EnvVar)
	}
	loc, err := storeurl.Parse(raw)
	if err != nil {
		return usageError("--store: %v", err)
	}
	if loc.Backend != storeurl.SQLite {
		return nil
	}
	if _, err := os.Stat(loc.Path); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	st, err := storeurl.Open(ctx, raw, false)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("create trace store %s: %w", loc.Path, err)}
	}
	return st.Shutdown(context.WithoutCancel(ctx))
}

func (m *Main) runTracesList(ctx context.Context, args []string) error {
	fs := m.newFlagSet("traces list", "traces list [--since 1h] [--service S] [--agent A] [--model M] [--status ok|error] [--attr K=V]... [--span-name N] [--evidence ID] [--query EXPR] [--session ID] [--json]")
	storeURL := m.tracesStoreFlag(fs)
	asJSON := fs.Bool("json", false, "print the page as JSON (the rows /api/v1/traces returns)")
	pricesFile := fs.String("prices", "", "price table JSON merged over the built-in one (as serve --prices)")
	// Each filter is a store.QueryParams parameter, so the CLI and the HTTP API
	// accept and reject the same things. The search (q) has its own flags.
	search := addSearchFlags(fs)
	vals := map[string]*string{}
	for _, name := range store.QueryParamNames() {
		if name == "asc" || name == "q" {
			continue
		}
		vals[name] = fs.String(strings.ReplaceAll(name, "_", "-"), "", "filter: "+store.QueryParams[name])
	}
	asc := fs.Bool("asc", false, "ascending order")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("traces list: unexpected arguments %q", fs.Args())
	}
	v := url.Values{}
	for name, p := range vals {
		if *p != "" {
			v.Set(name, *p)
		}
	}
	if *asc {
		v.Set("asc", "true")
	}
	expr, err := search.expr()
	if err != nil {
		return err
	}
	if expr != "" {
		v.Set("q", expr)
	}
	q, err := store.ParseTraceQuery(v, time.Now())
	if err != nil {
		return usageError("traces list: %s", strings.ReplaceAll(err.Error(), "query parameter", "flag"))
	}
	st, err := m.tracesOpenStore(ctx, *storeURL)
	if err != nil {
		return err
	}
	defer st.Shutdown(context.WithoutCancel(ctx))
	page, err := st.ListTraces(ctx, q)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("traces list: %w", err)}
	}
	prices, err := scorerLoadPrices(*pricesFile)
	if err != nil {
		return err
	}
	rows, err := web.ListRows(ctx, st, page.Traces, prices)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("traces list: %w", err)}
	}
	if *asJSON {
		return tracesWriteJSON(m.Stdout, map[string]any{"traces": rows, "next_page_token": page.NextPageToken})
	}
	return tracesPrintSummaries(termSafe(m.Stdout), rows, page.NextPageToken, m.width)
}

// tracesDuration shows a trace's duration as every view does: the extent
// of its spans, the part after the root ended, and its fragments.
func tracesDuration(d, afterRoot time.Duration, fragments int64) string {
	out := tracesDur(d).String()
	if afterRoot > 0 {
		out += fmt.Sprintf(" (%s after the root ended)", tracesDur(afterRoot))
	}
	if fragments > 1 {
		out += fmt.Sprintf(" (%d fragments)", fragments)
	}
	return out
}

// tracesCost shows a row's cost; an unknown one names its calls and why.
func tracesCost(r web.ListRow) string {
	if r.CostUSD != nil {
		return fmt.Sprintf("$%.6f", *r.CostUSD)
	}
	return fmt.Sprintf("unknown (%s; priced part $%.6f)", r.CostUnknown, r.KnownCostUSD)
}

// traceListColumns are the human trace list's columns: within a width,
// values are cut (Min) and then columns left out, highest Drop first; the
// trace id, which traces get takes, and the root are always shown.
var traceListColumns = []texttable.Column{
	{Header: "TRACE ID"},
	{Header: "START (UTC)", Drop: 4},
	{Header: "DURATION", Min: 8, Drop: 5},
	{Header: "SPANS", Drop: 9},
	{Header: "ERRORS", Drop: 2},
	{Header: "ROOT", Min: 16},
	{Header: "SERVICE", Min: 10, Drop: 7},
	{Header: "AGENTS", Min: 10, Drop: 8},
	{Header: "MODELS", Min: 12, Drop: 6},
	{Header: "CALLS", Drop: 10},
	{Header: "TOKENS IN/OUT", Drop: 11},
	{Header: "COST", Min: 10, Drop: 3},
}

// tracesPrintSummaries writes the human trace list within width (0: every
// value whole).
func tracesPrintSummaries(w io.Writer, rows []web.ListRow, next string, width int) error {
	if len(rows) == 0 {
		fmt.Fprintln(w, "No traces match.")
		return nil
	}
	cells := make([][]string, 0, len(rows))
	for _, s := range rows {
		root := s.RootName
		if root == "" {
			root = "(root not received)"
		}
		models := strings.Join(s.Models, ",")
		if len(s.ModelLabels) > 0 {
			models += " [" + strings.Join(s.ModelLabels, ",") + "]"
		}
		cells = append(cells, []string{s.TraceID, s.Start.UTC().Format("2006-01-02 15:04:05"), tracesDuration(s.Duration, s.AfterRoot, s.Fragments),
			fmt.Sprint(s.SpanCount), fmt.Sprint(s.ErrorCount), tracesClip(root, 40), s.ServiceName, strings.Join(s.AgentNames, ","), models,
			fmt.Sprint(s.ModelCalls), fmt.Sprintf("%d/%d", s.InputTokens, s.OutputTokens), tracesCost(s)})
	}
	if err := texttable.Write(w, traceListColumns, cells, width); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("traces list: %w", err)}
	}
	if next != "" {
		fmt.Fprintf(w, "\nMore traces: add --page-token %s\n", next)
	}
	return nil
}

func (m *Main) runTracesGet(ctx context.Context, args []string) error {
	fs := m.newFlagSet("traces get", "traces get TRACE_ID|PREFIX [--json] [--limit N] [--page-token T] [--all] [--store URL]  (PREFIX: at least 8 hex digits one trace starts with)")
	storeURL := m.tracesStoreFlag(fs)
	asJSON := fs.Bool("json", false, "print the spans and the rollup as JSON")
	pricesFile := fs.String("prices", "", "price table override (JSON), see docs/scoring.md")
	pg := tracesPagingFlags(fs)
	// Accept the id before or after the flags.
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if id == "" && fs.NArg() > 0 {
		id = fs.Arg(0)
		if fs.NArg() > 1 {
			return usageError("traces get: unexpected arguments %q", fs.Args()[1:])
		}
	} else if fs.NArg() > 0 {
		return usageError("traces get: unexpected arguments %q", fs.Args())
	}
	// TRACE_ID is a full id or a prefix of at least 8 hex digits (the
	// list shows ids that long) that one stored trace starts with.
	id = strings.TrimSpace(id)
	if id == "" {
		return usageError("traces get: want a TRACE_ID, a full trace id or a unique prefix of at least %d hex digits (see loom-eval traces list)", store.MinTraceIDPrefix)
	}
	if _, err := store.ParseTraceIDPrefix(id); err != nil {
		return usageError("traces get: %w", err)
	}
	if err := pg.check(); err != nil {
		return err
	}
	st, err := m.tracesOpenStore(ctx, *storeURL)
	if err != nil {
		return err
	}
	defer st.Shutdown(context.WithoutCancel(ctx))
	var spans []store.Span
	id, err = store.TraceIDOf(ctx, st, id)
	windowed := false
	if err == nil {
		windowed, err = m.tracesGetWindowed(ctx, st, id, *pg, *asJSON, *pricesFile)
	}
	if err == nil && !windowed {
		spans, err = st.GetTrace(ctx, id)
	}
	var exit *ExitError
	switch {
	case errors.As(err, &exit):
		return err
	case errors.Is(err, store.ErrBadTraceID), errors.Is(err, store.ErrAmbiguousTraceID):
		return usageError("traces get: %w", err)
	case errors.Is(err, store.ErrNotFound):
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("traces get: %w", err)}
	case err != nil:
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("traces get: %w", err)}
	}
	if windowed {
		return nil
	}
	prices, err := scorerLoadPrices(*pricesFile)
	if err != nil {
		return err
	}
	ru := rollup.Compute(spans, prices)
	if *asJSON {
		return tracesWriteJSON(m.Stdout, web.TraceResponse{TraceID: id, Rollup: &ru, Spans: spans})
	}
	out := termSafe(m.Stdout)
	tracesPrintTree(out, id, spans)
	tracesPrintEnvelope(out, spans)
	fmt.Fprintln(out)
	return writeRollupText(out, []rollup.Rollup{ru}, prices)
}

// printTree prints spans as an indented tree: offset from the trace start,
// duration, status and the GenAI fields that matter when reading a run.
func tracesPrintTree(w io.Writer, id string, spans []store.Span) {
	tree := rollup.NewTree(spans)
	sum := store.Summarize(spans)
	start := sum.Start
	fmt.Fprintf(w, "Trace %s  %d spans  %s  service %s\n\n", id, sum.SpanCount, tracesDuration(sum.Duration, sum.AfterRoot, sum.Fragments), sum.ServiceName)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SPAN\tOFFSET\tDURATION\tSTATUS\tDETAILS")
	tree.Walk(func(i, depth int) {
		s := spans[i]
		name := strings.Repeat("  ", depth) + s.Name
		if tree.Orphaned(i) {
			if remote, known := s.RemoteParent(); remote && known {
				name += " (continues remote parent " + s.ParentSpanID + ")"
			} else {
				name += " (parent " + s.ParentSpanID + " not received)"
			}
		}
		status := s.StatusCode
		if s.IsError() && s.StatusMessage != "" {
			status += ": " + tracesClip(s.StatusMessage, 40)
		}
		fmt.Fprintf(tw, "%s\t+%s\t%s\t%s\t%s\n", name, tracesDur(s.StartTime.Sub(start)), tracesDur(s.Duration()), status, tracesSpanDetails(s))
	})
	tw.Flush()
}

func tracesSpanDetails(s store.Span) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("op", s.Operation)
	add("agent", s.AgentName)
	model := s.ResponseModel
	if model == "" {
		model = s.RequestModel
	}
	add("model", model)
	add("tool", s.ToolName)
	if s.HasUsage {
		u := fmt.Sprintf("%d/%d", s.InputTokens, s.OutputTokens)
		if s.CacheReadTokens > 0 {
			u += fmt.Sprintf(" cache-read %d", s.CacheReadTokens)
		}
		if s.CacheCreationTokens > 0 {
			u += fmt.Sprintf(" cache-write %d", s.CacheCreationTokens)
		}
		if s.ReasoningTokens > 0 {
			u += fmt.Sprintf(" reasoning %d", s.ReasoningTokens)
		}
		add("tokens in/out", u)
	}
	if s.CostUSD != nil {
		add("cost", fmt.Sprintf("$%.6f", *s.CostUSD))
	}
	if len(s.RetrievedDocs) > 0 {
		add("retrieved", strings.Join(s.RetrievedDocs, ","))
	}
	if len(s.CitedDocs) > 0 {
		add("cited", strings.Join(s.CitedDocs, ","))
	}
	if l, ok := s.Attributes.String(semconv.AttrModelLabel); ok {
		add("label", l)
	}
	parts = append(parts, tracesEnvelopeDetails(s)...)
	return strings.Join(parts, " ")
}

func tracesDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d
}

func tracesClip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func tracesWriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("write JSON: %w", err)}
	}
	return nil
}
