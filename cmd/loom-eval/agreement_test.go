package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/html"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/web"
)

// TestAllViewsAgree is issue 16's all-views agreement test. The shapes
// views used to disagree on (agreement_shapes_test.go) are sent through
// real SDKs — the OTel Go SDK over OTLP/gRPC and OTLP/HTTP, and the OTel JS
// SDK (scripts/jsagent) over OTLP/HTTP JSON and protobuf — into `loom-eval
// serve` on each store (SQLite, ClickHouse). Then every view of every trace
// is read and checked against the figures computed by hand: the UI's list
// rows (HTML), /api/v1/traces (and sort=tokens), `traces list --json` and
// its table, /api/v1/traces/{id}/rollup, the trace page, `traces get
// --json` and its text, and `rollup FILE` of what the SDKs sent, written as
// the Collector's file exporter writes it with the spans shuffled. Views
// that print the same JSON must print the same bytes, and both stores must
// answer the API with the same bytes.
func TestAllViewsAgree(t *testing.T) {
	testtier.Slow(t)
	prices := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(prices, []byte(agreementPrices), 0o644); err != nil {
		t.Fatal(err)
	}
	shapes := agreementShapes()
	senders := []agreementSender{
		{n: 1, service: "agree-go-grpc", how: "OTel Go SDK, otlptracegrpc"},
		{n: 2, service: "agree-go-http", how: "OTel Go SDK, otlptracehttp (protobuf)"},
	}
	js, jsMissing := jsAgentFor(t)
	if js != nil {
		senders = append(senders,
			agreementSender{n: 3, service: "agree-js-json", how: "OTel JS SDK, exporter-trace-otlp-http (JSON)"},
			agreementSender{n: 4, service: "agree-js-proto", how: "OTel JS SDK, exporter-trace-otlp-proto"})
	}

	api := map[string]map[string][]byte{} // store → API path → body
	for _, backend := range []string{"sqlite", "clickhouse"} {
		t.Run(backend, func(t *testing.T) {
			var storeURL string
			if backend == "sqlite" {
				storeURL = filepath.Join(t.TempDir(), "traces.db")
			} else {
				srv := chtest.Start(t) // skips locally without ClickHouse, fails in CI
				storeURL = srv.DSN(srv.NewDatabase(t))
			}
			a := &agreement{t: t, storeURL: storeURL, prices: prices, shapes: shapes, senders: senders, js: js}
			a.run() // returns only when every view was read (t.Fatal ends the goroutine)
			api[backend] = a.api
		})
	}
	if len(api) == 2 {
		var paths []string
		for p := range api["sqlite"] {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			s, c := api["sqlite"][p], api["clickhouse"][p]
			if !bytes.Equal(s, c) {
				t.Errorf("GET %s: the stores answer differently (first difference at byte %d):\nsqlite:     %s\nclickhouse: %s", p, firstDiff(s, c), around(s, firstDiff(s, c)), around(c, firstDiff(s, c)))
			}
		}
		if len(api["clickhouse"]) != len(paths) {
			t.Errorf("the stores were asked %d and %d API paths", len(paths), len(api["clickhouse"]))
		}
		t.Logf("compared the stores' answers to %d API requests", len(paths))
	} else {
		t.Logf("the stores' answers were not compared: %d of 2 stores ran (see the subtests)", len(api))
	}
	if js == nil {
		// After the Go senders' checks, so they still run (and fail) here.
		t.Skip(jsMissing)
	}
}

// agreement is one store's run of the test.
type agreement struct {
	t        *testing.T
	storeURL string
	prices   string
	shapes   []shape
	senders  []agreementSender
	js       *jsAgent

	ui  string
	tee *otlpTee
	// api holds the body of every API request made, by path, for the
	// comparison of the stores.
	api map[string][]byte
	// rows are /api/v1/traces's rows by trace id; rollups the bodies of
	// /api/v1/traces/{id}/rollup; getText the rollup part of `traces get`'s
	// text, by trace id.
	rows    map[string]listRow
	rollups map[string][]byte
	getText map[string]string
}

func (a *agreement) run() {
	t := a.t
	a.api = map[string][]byte{}
	a.rows, a.rollups, a.getText = map[string]listRow{}, map[string][]byte{}, map[string]string{}
	ready, _, _ := startServe(t, nil, "--store", a.storeURL, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--ui-addr", "127.0.0.1:0", "--prices", a.prices)
	a.ui = ready.UIURL
	a.tee = newOTLPTee(t)
	for _, s := range a.senders {
		spec := specOf(s, a.shapes)
		switch s.n {
		case 1:
			exp, err := otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(ready.GRPCAddr), otlptracegrpc.WithInsecure(),
				otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
			if err != nil {
				t.Fatal(err)
			}
			sendGo(t, spec, exp, a.tee.url)
		case 2:
			exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpoint(ready.HTTPAddr), otlptracehttp.WithInsecure(),
				otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
			if err != nil {
				t.Fatal(err)
			}
			sendGo(t, spec, exp, a.tee.url)
		case 3:
			a.js.send(t, spec, "http://"+ready.HTTPAddr, "json", a.tee.url)
		case 4:
			a.js.send(t, spec, "http://"+ready.HTTPAddr, "proto", a.tee.url)
		}
	}
	if t.Failed() {
		return
	}
	want := len(a.senders) * len(a.shapes)
	a.waitForTraces(want)

	a.checkList()
	a.checkListHTML()
	a.checkCLIList()
	for _, s := range a.senders {
		for _, sh := range a.shapes {
			a.checkTrace(s, sh)
		}
	}
	a.checkRollupFile()
}

// waitForTraces waits until the list holds the n traces and all their
// spans. Every export was acknowledged after a durable write, so this
// should pass at once; waiting keeps a slow store from failing the views
// for the wrong reason.
func (a *agreement) waitForTraces(n int) {
	t := a.t
	deadline := time.Now().Add(30 * time.Second)
	for {
		var page struct {
			Traces []web.ListRow `json:"traces"`
		}
		body := a.getRaw("/api/v1/traces?limit=200")
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatalf("/api/v1/traces: %v\n%s", err, body)
		}
		spans := 0
		for _, r := range page.Traces {
			spans += int(r.SpanCount)
		}
		wantSpans := 0
		for _, sh := range a.shapes {
			wantSpans += len(sh.spans) * len(a.senders)
		}
		if len(page.Traces) == n && spans == wantSpans {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store lists %d traces of %d spans, want %d of %d", len(page.Traces), spans, n, wantSpans)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ---- the list: API, HTML and CLI -------------------------------------------

// listRow is a row of /api/v1/traces with its cost as the bytes sent.
type listRow struct {
	web.ListRow
	CostBytes json.RawMessage `json:"-"`
}

func decodeList(t *testing.T, what string, body []byte) []listRow {
	t.Helper()
	var page struct {
		Traces []json.RawMessage `json:"traces"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, body)
	}
	var rows []listRow
	for _, raw := range page.Traces {
		var r listRow
		var c struct {
			Cost json.RawMessage `json:"cost_usd"`
		}
		if err := json.Unmarshal(raw, &r.ListRow); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		r.CostBytes = c.Cost
		rows = append(rows, r)
	}
	return rows
}

// wantOrder is the trace ids in the order a list sorted by key shows them,
// computed from the hand-written figures: start (newest first) or tokens
// (most first, then the larger trace id, as both stores break ties).
func (a *agreement) wantOrder(key string) []string {
	type entry struct {
		id     string
		start  time.Time
		tokens int64
	}
	var all []entry
	for _, s := range a.senders {
		for _, sh := range a.shapes {
			all = append(all, entry{traceIDOf(s.n, sh.key), traceStart(s.n, sh.key), sh.want.in + sh.want.out})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if key == "tokens" && all[i].tokens != all[j].tokens {
			return all[i].tokens > all[j].tokens
		}
		if key == "tokens" {
			return all[i].id > all[j].id
		}
		return all[i].start.After(all[j].start)
	})
	var ids []string
	for _, e := range all {
		ids = append(ids, e.id)
	}
	return ids
}

// checkList reads /api/v1/traces (default order and sort=tokens) and checks
// every row's figures and the order.
func (a *agreement) checkList() {
	t := a.t
	for _, sortBy := range []string{"", "tokens"} {
		path := "/api/v1/traces"
		if sortBy != "" {
			path += "?sort=" + sortBy
		}
		rows := decodeList(t, path, a.get(path))
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.TraceID)
			a.checkRow(path, r)
			if sortBy == "" {
				a.rows[r.TraceID] = r
			}
		}
		if want := a.wantOrder(sortBy); !slices.Equal(ids, want) {
			t.Errorf("%s orders the traces\n%v\nwant (by hand)\n%v", path, ids, want)
		}
	}
}

// shapeOf finds the sender and shape of a trace id.
func (a *agreement) shapeOf(id string) (agreementSender, shape, bool) {
	for _, s := range a.senders {
		for _, sh := range a.shapes {
			if traceIDOf(s.n, sh.key) == id {
				return s, sh, true
			}
		}
	}
	return agreementSender{}, shape{}, false
}

func (a *agreement) checkRow(view string, r listRow) {
	t := a.t
	s, sh, ok := a.shapeOf(r.TraceID)
	if !ok {
		t.Errorf("%s lists trace %s, which no sender sent", view, r.TraceID)
		return
	}
	w := sh.want
	got := fmt.Sprintf("root %q service %s spans %d calls %d tools %d errors %d tokens %d/%d cache %d/%d duration %v after root %v fragments %d",
		r.RootName, r.ServiceName, r.SpanCount, r.ModelCalls, r.ToolCalls, r.ErrorCount, r.InputTokens, r.OutputTokens,
		r.CacheReadTokens, r.CacheCreationTokens, r.Duration, r.AfterRoot, r.Fragments)
	exp := fmt.Sprintf("root %q service %s spans %d calls %d tools %d errors %d tokens %d/%d cache %d/%d duration %v after root %v fragments %d",
		w.root, s.service, w.spans, w.calls, w.tools, w.errors, w.in, w.out, w.cacheRead, w.cacheWrite, w.dur, w.afterRoot, w.fragments)
	if got != exp {
		t.Errorf("%s, trace %s (%s, shape %s: %s):\n got  %s\n want %s", view, r.TraceID, s.how, sh.key, sh.what, got, exp)
	}
	if !r.Start.Equal(traceStart(s.n, sh.key)) {
		t.Errorf("%s, trace %s: start %s, want %s", view, r.TraceID, r.Start.Format(time.RFC3339Nano), traceStart(s.n, sh.key).Format(time.RFC3339Nano))
	}
	// A list row carries the billed calls summed per model, never the
	// calls themselves.
	calls := int64(0)
	for _, g := range r.Groups {
		calls += g.Calls
	}
	if r.Calls != nil || calls != int64(len(w.callSpans)) {
		t.Errorf("%s, trace %s (shape %s): %d calls listed and %d in its call groups, want none and %d", view, r.TraceID, sh.key, len(r.Calls), calls, len(w.callSpans))
	}
	a.checkCost(fmt.Sprintf("%s, trace %s (shape %s)", view, r.TraceID, sh.key), s, sh, r.CostUSD, r.KnownCostUSD)
	if w.unknown != 0 {
		if want := listUnknownText(sh); r.CostUnknown != want {
			t.Errorf("%s, trace %s (shape %s): cost_unknown %q, want %q", view, r.TraceID, sh.key, r.CostUnknown, want)
		}
	} else if r.CostUnknown != "" {
		t.Errorf("%s, trace %s (shape %s): cost_unknown %q, want none", view, r.TraceID, sh.key, r.CostUnknown)
	}
}

// checkCost compares a cost with the hand-computed one (to 1e-12: the
// figures are sums of products of decimal rates).
func (a *agreement) checkCost(where string, s agreementSender, sh shape, c *float64, known float64) {
	t := a.t
	w := sh.want
	switch {
	case w.cost == nil && c != nil:
		t.Errorf("%s: cost $%v, want unknown (priced part $%v)", where, *c, w.known)
	case w.cost == nil && math.Abs(known-w.known) > 1e-12:
		t.Errorf("%s: cost unknown with priced part $%v, want $%v", where, known, w.known)
	case w.cost != nil && c == nil:
		t.Errorf("%s: cost unknown (priced part $%v), want $%v", where, known, *w.cost)
	case w.cost != nil && math.Abs(*c-*w.cost) > 1e-12:
		t.Errorf("%s: cost $%v, want $%v", where, *c, *w.cost)
	}
}

// checkListHTML reads the UI's list page (both orders) and checks each
// row's figures as printed, and its cost tooltip.
func (a *agreement) checkListHTML() {
	t := a.t
	for _, sortBy := range []string{"", "tokens"} {
		path := "/traces"
		if sortBy != "" {
			path += "?sort=" + sortBy
		}
		doc := a.getHTML(path)
		table := findNodes(doc, func(n *html.Node) bool { return n.Data == "table" && nodeAttr(n, "id") == "trace-table" })
		if len(table) != 1 {
			t.Errorf("%s: no table#trace-table", path)
			continue
		}
		col := map[string]int{}
		for i, th := range findNodes(table[0], func(n *html.Node) bool { return n.Data == "th" }) {
			col[nodeText(th)] = i
		}
		for _, name := range []string{"Root", "Service", "Duration", "Cost", "Tokens in/out", "Spans", "Errors"} {
			if _, ok := col[name]; !ok {
				t.Fatalf("%s: the list has no %q column (columns %v)", path, name, col)
			}
		}
		var ids []string
		for _, tr := range findNodes(table[0], func(n *html.Node) bool { return n.Data == "tr" && n.Parent != nil && n.Parent.Data == "tbody" }) {
			tds := findNodes(tr, func(n *html.Node) bool { return n.Data == "td" })
			links := findNodes(tr, func(n *html.Node) bool { return n.Data == "a" && strings.HasPrefix(nodeAttr(n, "href"), "/traces/") })
			if len(links) == 0 || len(tds) < len(col) {
				t.Errorf("%s: a row without a trace link or with %d cells", path, len(tds))
				continue
			}
			id := strings.TrimPrefix(nodeAttr(links[0], "href"), "/traces/")
			ids = append(ids, id)
			s, sh, ok := a.shapeOf(id)
			if !ok {
				t.Errorf("%s lists trace %s, which no sender sent", path, id)
				continue
			}
			w := sh.want
			cell := func(name string) string { return nodeText(tds[col[name]]) }
			where := fmt.Sprintf("list page %s, trace %s (%s, shape %s: %s)", path, id, s.how, sh.key, sh.what)
			wantDur := strings.Join(nonEmpty(w.uiDur, w.uiAsync, w.uiFragments), " ")
			for _, c := range []struct{ name, got, want string }{
				{"Root", cell("Root"), w.root + " " + id[:8]},
				{"Service", cell("Service"), s.service},
				{"Duration", cell("Duration"), wantDur},
				{"Cost", cell("Cost"), w.uiCost},
				{"Tokens in/out", cell("Tokens in/out"), fmt.Sprintf("%d / %d", w.in, w.out)},
				{"Spans", cell("Spans"), fmt.Sprint(w.spans)},
				{"Errors", cell("Errors"), fmt.Sprint(w.errors)},
			} {
				if c.got != c.want {
					t.Errorf("%s: %s shows %q, want %q", where, c.name, c.got, c.want)
				}
			}
			if w.unknown != 0 {
				tips := findNodes(tds[col["Cost"]], func(n *html.Node) bool { return nodeAttr(n, "title") != "" })
				want := fmt.Sprintf("cost unknown: %s; priced part $%.5f", listUnknownText(sh), w.known)
				if len(tips) == 0 || nodeAttr(tips[0], "title") != want {
					got := ""
					if len(tips) > 0 {
						got = nodeAttr(tips[0], "title")
					}
					t.Errorf("%s: the cost's tooltip is %q, want %q", where, got, want)
				}
			}
		}
		if want := a.wantOrder(sortBy); !slices.Equal(ids, want) {
			t.Errorf("list page %s orders the traces\n%v\nwant (by hand)\n%v", path, ids, want)
		}
	}
}

// checkCLIList runs `traces list`: its --json must be /api/v1/traces's
// rows byte for byte (as JSON values), and its table must print the
// figures by hand.
func (a *agreement) checkCLIList() {
	t := a.t
	for _, sortBy := range []string{"", "tokens"} {
		args := []string{"traces", "list", "--store", a.storeURL, "--prices", a.prices, "--json"}
		path := "/api/v1/traces"
		if sortBy != "" {
			args = append(args, "--sort", sortBy)
			path += "?sort=" + sortBy
		}
		out := a.cli(args...)
		if got, want := compactJSON(t, out), compactJSON(t, a.get(path)); !bytes.Equal(got, want) {
			i := firstDiff(got, want)
			t.Errorf("loom-eval %s differs from GET %s at byte %d:\ncli: %s\napi: %s", strings.Join(args, " "), path, i, around(got, i), around(want, i))
		}
	}

	out := string(a.cli("traces", "list", "--store", a.storeURL, "--prices", a.prices))
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < 2 {
		t.Fatalf("traces list printed:\n%s", out)
	}
	cols := tableColumns(lines[0])
	for _, name := range []string{"TRACE ID", "DURATION", "SPANS", "ERRORS", "ROOT", "SERVICE", "CALLS", "TOKENS IN/OUT", "COST"} {
		if _, ok := cols[name]; !ok {
			t.Fatalf("traces list has no %s column:\n%s", name, lines[0])
		}
	}
	seen := 0
	for _, line := range lines[1:] {
		if line == "" {
			break
		}
		cell := func(name string) string { return tableCell(line, cols, name) }
		id := cell("TRACE ID")
		s, sh, ok := a.shapeOf(id)
		if !ok {
			t.Errorf("traces list prints a row for %q, which no sender sent:\n%s", id, line)
			continue
		}
		seen++
		w := sh.want
		wantCost := w.cliCost
		if w.cost == nil {
			wantCost = fmt.Sprintf("unknown (%s; priced part $%.6f)", listUnknownText(sh), w.known)
		}
		where := fmt.Sprintf("traces list, trace %s (%s, shape %s: %s)", id, s.how, sh.key, sh.what)
		for _, c := range []struct{ name, want string }{
			{"DURATION", w.cliDur},
			{"SPANS", fmt.Sprint(w.spans)},
			{"ERRORS", fmt.Sprint(w.errors)},
			{"ROOT", w.root},
			{"SERVICE", s.service},
			{"CALLS", fmt.Sprint(w.calls)},
			{"TOKENS IN/OUT", fmt.Sprintf("%d/%d", w.in, w.out)},
			{"COST", wantCost},
		} {
			if got := cell(c.name); got != c.want {
				t.Errorf("%s: %s is %q, want %q", where, c.name, got, c.want)
			}
		}
	}
	if want := len(a.senders) * len(a.shapes); seen != want {
		t.Errorf("traces list printed %d rows, want %d:\n%s", seen, want, out)
	}
}

// checkTrace reads one trace's rollup (API), its JSON (API), its page and
// `traces get` (JSON and text).
func (a *agreement) checkTrace(s agreementSender, sh shape) {
	t := a.t
	id := traceIDOf(s.n, sh.key)
	w := sh.want
	where := fmt.Sprintf("trace %s (%s, shape %s: %s)", id, s.how, sh.key, sh.what)

	// The rollup the API serves.
	rpath := "/api/v1/traces/" + id + "/rollup"
	body := a.get(rpath)
	a.rollups[id] = body
	var ru rollup.Rollup
	if err := json.Unmarshal(body, &ru); err != nil {
		t.Fatalf("GET %s: %v\n%s", rpath, err, body)
	}
	got := fmt.Sprintf("root %q spans %d calls %d tools %d errors %d tokens %d/%d cache %d/%d duration %.3f ms after root %.3f ms fragments %d",
		ru.RootName, ru.SpanCount, ru.ModelCalls, ru.ToolCalls, ru.ErrorCount, ru.TokensIn, ru.TokensOut, ru.CacheReadTokens, ru.CacheCreationTokens,
		ru.DurationMS, ru.AfterRootMS, len(ru.Tops))
	exp := fmt.Sprintf("root %q spans %d calls %d tools %d errors %d tokens %d/%d cache %d/%d duration %.3f ms after root %.3f ms fragments %d",
		w.root, w.spans, w.calls, w.tools, w.errors, w.in, w.out, w.cacheRead, w.cacheWrite, msOf(w.dur), msOf(w.afterRoot), w.fragments)
	if got != exp {
		t.Errorf("GET %s, %s:\n got  %s\n want %s", rpath, where, got, exp)
	}
	var calls []string
	for _, c := range ru.Calls {
		calls = append(calls, c.SpanID)
	}
	if want := spanIDsOf(s.n, sh.key, w.callSpans); !slices.Equal(calls, want) {
		t.Errorf("GET %s, %s: calls %v, want %v", rpath, where, calls, want)
	}
	if want := spanIDsOf(s.n, sh.key, w.aggregates); !slices.Equal(ru.AggregateSpans, want) {
		t.Errorf("GET %s, %s: aggregate spans %v, want %v", rpath, where, ru.AggregateSpans, want)
	}
	a.checkCost("GET "+rpath+", "+where, s, sh, ru.CostUSD, ru.KnownCostUSD)
	var rc struct {
		Cost json.RawMessage `json:"cost_usd"`
	}
	_ = json.Unmarshal(body, &rc)
	if row, ok := a.rows[id]; !ok {
		t.Errorf("%s: not in /api/v1/traces", where)
	} else if !bytes.Equal(row.CostBytes, rc.Cost) {
		t.Errorf("%s: the list's cost_usd is %s, the rollup's %s", where, row.CostBytes, rc.Cost)
	}

	// The trace as JSON, from the API and from traces get --json.
	tpath := "/api/v1/traces/" + id
	api := a.get(tpath)
	cli := a.cli("traces", "get", id, "--json", "--store", a.storeURL, "--prices", a.prices)
	if g, w := compactJSON(t, cli), compactJSON(t, api); !bytes.Equal(g, w) {
		i := firstDiff(g, w)
		t.Errorf("traces get --json differs from GET %s at byte %d:\ncli: %s\napi: %s", tpath, i, around(g, i), around(w, i))
	}
	var tr web.TraceResponse
	if err := json.Unmarshal(api, &tr); err != nil {
		t.Fatalf("GET %s: %v", tpath, err)
	}
	if g, w := compactJSON(t, mustJSON(t, tr.Rollup)), compactJSON(t, body); !bytes.Equal(g, w) {
		t.Errorf("GET %s's rollup differs from GET %s at byte %d", tpath, rpath, firstDiff(g, w))
	}
	if len(tr.Spans) != int(w.spans) {
		t.Errorf("GET %s: %d spans, want %d", tpath, len(tr.Spans), w.spans)
	}

	// The trace page's figures.
	a.checkTracePage(s, sh)

	// traces get's text: one duration (the async part and the fragments
	// said), the rollup's figures.
	text := string(a.cli("traces", "get", id, "--store", a.storeURL, "--prices", a.prices))
	header := fmt.Sprintf("Trace %s  %d spans  %s  service %s\n", id, w.spans, w.cliDur, s.service)
	if !strings.HasPrefix(text, header) {
		t.Errorf("traces get %s: the first line is %q, want %q", id, firstLine(text), strings.TrimSuffix(header, "\n"))
	}
	i := strings.Index(text, "\ntrace "+id+"  ")
	if i < 0 {
		t.Errorf("traces get %s prints no rollup:\n%s", id, text)
		return
	}
	block := text[i+1:]
	a.getText[id] = block
	a.checkRollupText("traces get "+id, s, sh, block)
}

// checkTracePage reads the figures at the head of the trace page.
func (a *agreement) checkTracePage(s agreementSender, sh shape) {
	t := a.t
	id := traceIDOf(s.n, sh.key)
	w := sh.want
	path := "/traces/" + id
	where := fmt.Sprintf("trace page %s (%s, shape %s: %s)", path, s.how, sh.key, sh.what)
	doc := a.getHTML(path)
	heads := findNodes(doc, func(n *html.Node) bool { return n.Data == "div" && hasClass(n, "trace-head") })
	if len(heads) != 1 {
		t.Errorf("%s: no div.trace-head", where)
		return
	}
	stats := map[string]string{}
	for _, st := range findNodes(heads[0], func(n *html.Node) bool { return n.Data == "div" && n.Parent != nil && hasClass(n.Parent, "stats") }) {
		b := findNodes(st, func(n *html.Node) bool { return n.Data == "b" })
		l := findNodes(st, func(n *html.Node) bool { return n.Data == "span" })
		if len(b) > 0 && len(l) > 0 {
			stats[nodeText(l[len(l)-1])] = nodeText(b[0])
		}
	}
	for _, c := range []struct{ label, want string }{
		{"duration", w.uiDur},
		{"cost (leaf calls only)", w.uiCost},
		{"tokens in / out", fmt.Sprintf("%d / %d", w.in, w.out)},
		{"cache-read tokens", fmt.Sprint(w.cacheRead)},
		{"model calls", fmt.Sprint(w.calls)},
		{"tool calls", fmt.Sprint(w.tools)},
		{"errors", fmt.Sprint(w.errors)},
		{"spans", fmt.Sprint(w.spans)},
	} {
		if got, ok := stats[c.label]; !ok {
			t.Errorf("%s: no %q figure (figures: %v)", where, c.label, stats)
		} else if got != c.want {
			t.Errorf("%s: %s is %q, want %q (as the list shows it)", where, c.label, got, c.want)
		}
	}
	head := nodeText(heads[0])
	if w.afterRoot > 0 {
		// The list shows "+200 ms async"; the page must show that part of
		// the one duration too, in words of its own if it likes.
		d := regexp.QuoteMeta(strings.TrimPrefix(strings.TrimSuffix(w.uiAsync, " async"), "+"))
		re := regexp.MustCompile(`(?i)` + d + `[^.;]{0,40}(async|after the root)|(async|after the root)[^.;]{0,40}` + d)
		if !re.MatchString(head) {
			t.Errorf("%s: the head does not show the part of the %s after the root ended (%s, which the list shows as %q and traces get as %q):\n%s",
				where, w.uiDur, d, w.uiAsync, w.cliDur, head)
		}
	}
	if w.fragments > 1 {
		if !regexp.MustCompile(fmt.Sprintf(`(?i)\b%d fragments\b`, w.fragments)).MatchString(head) {
			t.Errorf("%s: the head does not say the trace has %d fragments (the list shows %q, traces get %q):\n%s", where, w.fragments, w.uiFragments, w.cliDur, head)
		}
		// And names their tops, saying which is a root and why the other
		// has no parent here: the SDKs can only give a span a parent they
		// do not export through a remote span context, so they flag it
		// remote (OTLP IS_REMOTE) and the page says so.
		if !strings.Contains(head, "(a root)") || !strings.Contains(head, "(continues a remote parent)") {
			t.Errorf("%s: the head does not name the fragments' tops:\n%s", where, head)
		}
	}
	if w.unknown != 0 && !strings.Contains(head, "reported no token usage") {
		t.Errorf("%s: the cost is unknown but the head does not say why:\n%s", where, head)
	}
}

// checkRollupText checks a trace's block of the rollup text (traces get,
// rollup FILE) against the figures by hand.
func (a *agreement) checkRollupText(view string, s agreementSender, sh shape, block string) {
	t := a.t
	w := sh.want
	wantCost := fmt.Sprintf("  cost           %s  (prices as of 2026-12-01)\n", w.cliCost)
	if w.cost == nil {
		wantCost = fmt.Sprintf("  cost           unknown: %s; priced part $%.6f\n", unknownText(s.n, sh), w.known)
	}
	wants := []string{
		"\n  duration       " + w.rollupDur + "   critical path ",
		fmt.Sprintf("\n  spans          %d (model calls %d, failed 0; tool calls %d; errors %d)\n", w.spans, w.calls, w.tools, w.errors),
		fmt.Sprintf("\n  tokens         in %d (cache read %d, cache write %d)  out %d (reasoning 0)\n", w.in, w.cacheRead, w.cacheWrite, w.out),
		"\n" + wantCost,
	}
	if w.fragments > 1 {
		wants = append(wants, fmt.Sprintf("\n  fragments      %d: ", w.fragments))
	} else if strings.Contains(block, "\n  fragments ") {
		t.Errorf("%s (shape %s): names fragments of a whole trace:\n%s", view, sh.key, block)
	}
	for _, want := range wants {
		if !strings.Contains(block, want) {
			t.Errorf("%s (%s, shape %s: %s): lacks %q:\n%s", view, s.how, sh.key, sh.what, strings.Trim(want, "\n"), block)
		}
	}
}

// checkRollupFile writes what the SDKs sent (recorded by the tee) as the
// Collector's file exporter does, the spans shuffled, and checks that
// `rollup FILE` gives every trace's rollup with the bytes the API gave
// (JSON) and the text traces get printed.
func (a *agreement) checkRollupFile() {
	t := a.t
	spans := a.tee.spans()
	want := 0
	for _, sh := range a.shapes {
		want += len(sh.spans) * len(a.senders)
	}
	if len(spans) != want {
		t.Fatalf("the tee recorded %d spans, want %d", len(spans), want)
	}
	rng := rand.New(rand.NewPCG(16, 2026))
	shuffled := slices.Clone(spans)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	reversed := slices.Clone(spans)
	slices.SortFunc(reversed, func(x, y teeSpan) int {
		return y.span.StartTimestamp().AsTime().Compare(x.span.StartTimestamp().AsTime())
	})
	for _, f := range []struct {
		name  string
		spans []teeSpan
	}{{"shuffled", shuffled}, {"latest-first", reversed}} {
		path := filepath.Join(t.TempDir(), f.name+".jsonl")
		writeOTLPJSONL(t, path, f.spans, rng)
		out := a.cli("rollup", path, "--json", "--prices", a.prices)
		var rs []json.RawMessage
		if err := json.Unmarshal(out, &rs); err != nil {
			t.Fatalf("rollup %s --json: %v\n%s", path, err, out)
		}
		if want := len(a.senders) * len(a.shapes); len(rs) != want {
			t.Errorf("rollup %s: %d rollups, want %d", f.name, len(rs), want)
		}
		for _, raw := range rs {
			var head struct {
				TraceID string `json:"trace_id"`
			}
			_ = json.Unmarshal(raw, &head)
			api, ok := a.rollups[head.TraceID]
			if !ok {
				t.Errorf("rollup %s: trace %s is not in the store", f.name, head.TraceID)
				continue
			}
			if g, w := compactJSON(t, raw), compactJSON(t, api); !bytes.Equal(g, w) {
				i := firstDiff(g, w)
				t.Errorf("rollup FILE (%s spans) of trace %s differs from GET /api/v1/traces/%s/rollup at byte %d:\nfile:  %s\nstore: %s",
					f.name, head.TraceID, head.TraceID, i, around(g, i), around(w, i))
			}
		}
		text := string(a.cli("rollup", path, "--prices", a.prices))
		for _, s := range a.senders {
			for _, sh := range a.shapes {
				id := traceIDOf(s.n, sh.key)
				i := strings.Index(text, "trace "+id+"  ")
				if i < 0 {
					t.Errorf("rollup %s (text) has no trace %s", f.name, id)
					continue
				}
				block := text[i:]
				if j := strings.Index(block, "\n\n"); j >= 0 {
					block = block[:j+1]
				}
				a.checkRollupText("rollup FILE ("+f.name+")", s, sh, "\n"+block)
				if got := a.getText[id]; block != got {
					t.Errorf("rollup FILE (%s) prints trace %s as\n%s\ntraces get prints\n%s", f.name, id, block, got)
				}
			}
		}
	}
}

// ---- serve, CLI and HTTP ---------------------------------------------------

// cli runs loom-eval with args and returns its stdout; any error fails.
func (a *agreement) cli(args ...string) []byte {
	a.t.Helper()
	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
	if err := m.Run(context.Background(), args); err != nil {
		a.t.Fatalf("loom-eval %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.Bytes()
}

// get fetches an API path and records its body for the stores' comparison.
func (a *agreement) get(path string) []byte {
	b := a.getRaw(path)
	a.api[path] = b
	return b
}

func (a *agreement) getRaw(path string) []byte {
	a.t.Helper()
	resp, err := http.Get(a.ui + path)
	if err != nil {
		a.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		a.t.Fatalf("GET %s: status %d, %v\n%s", path, resp.StatusCode, err, b)
	}
	return b
}

func (a *agreement) getHTML(path string) *html.Node {
	a.t.Helper()
	doc, err := html.Parse(bytes.NewReader(a.getRaw(path)))
	if err != nil {
		a.t.Fatalf("GET %s: parse HTML: %v", path, err)
	}
	return doc
}

// ---- the senders -----------------------------------------------------------

// sendGo sends spec through the OTel Go SDK: exp carries it to the
// collector; a second exporter copies every span to the tee (OTLP/HTTP).
// Each batch of a trace is one ForceFlush, so one export request.
func sendGo(t *testing.T, spec senderSpec, exp sdktrace.SpanExporter, teeURL string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	teeExp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(teeURL), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	primary, tee := &checkedExporter{SpanExporter: exp}, &checkedExporter{SpanExporter: teeExp}
	ids := &fixedIDs{}
	batch := []sdktrace.BatchSpanProcessorOption{sdktrace.WithBatchTimeout(time.Hour), sdktrace.WithMaxExportBatchSize(4096), sdktrace.WithMaxQueueSize(4096)}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", spec.Service))),
		sdktrace.WithIDGenerator(ids),
		sdktrace.WithBatcher(primary, batch...),
		sdktrace.WithBatcher(tee, batch...),
	)
	tracer := tp.Tracer("loomwork-agreement", trace.WithInstrumentationVersion("1.0.0"))
	kinds := map[string]trace.SpanKind{"internal": trace.SpanKindInternal, "client": trace.SpanKindClient, "server": trace.SpanKindServer}
	for _, tr := range spec.Traces {
		tid, err := trace.TraceIDFromHex(tr.TraceID)
		if err != nil {
			t.Fatal(err)
		}
		started := map[string]trace.Span{}
		for _, s := range tr.Spans {
			sctx := context.Background()
			if s.ParentSpanID != "" {
				if p, ok := started[s.ParentSpanID]; ok {
					sctx = trace.ContextWithSpan(sctx, p)
				} else {
					pid, _ := trace.SpanIDFromHex(s.ParentSpanID)
					sctx = trace.ContextWithRemoteSpanContext(sctx, trace.NewSpanContext(trace.SpanContextConfig{
						TraceID: tid, SpanID: pid, TraceFlags: trace.FlagsSampled, Remote: true}))
				}
			}
			sid, _ := trace.SpanIDFromHex(s.SpanID)
			ids.set(tid, sid)
			var attrs []attribute.KeyValue
			for _, k := range sortedKeys(s.Attributes) {
				switch v := s.Attributes[k].(type) {
				case string:
					attrs = append(attrs, attribute.String(k, v))
				case int:
					attrs = append(attrs, attribute.Int(k, v))
				case int64:
					attrs = append(attrs, attribute.Int64(k, v))
				default:
					t.Fatalf("attribute %s: %T", k, v)
				}
			}
			_, span := tracer.Start(sctx, s.Name, trace.WithTimestamp(time.Unix(s.Start[0], s.Start[1])),
				trace.WithSpanKind(kinds[s.Kind]), trace.WithAttributes(attrs...))
			if sc := span.SpanContext(); sc.TraceID() != tid || sc.SpanID() != sid {
				t.Fatalf("span %s: the SDK gave ids %s/%s, want %s/%s", s.Name, sc.TraceID(), sc.SpanID(), tid, sid)
			}
			if s.Error != "" {
				span.SetStatus(otelcodes.Error, s.Error)
			}
			started[s.SpanID] = span
		}
		for _, b := range tr.batches() {
			for _, s := range tr.Spans {
				if s.Batch == b {
					started[s.SpanID].End(trace.WithTimestamp(time.Unix(s.End[0], s.End[1])))
				}
			}
			if err := tp.ForceFlush(ctx); err != nil {
				t.Fatalf("%s: export trace %s, batch %d: %v", spec.Service, tr.TraceID, b, err)
			}
		}
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Errorf("%s: shut down the tracer provider: %v", spec.Service, err)
	}
	if err := errors.Join(primary.err(), tee.err()); err != nil {
		t.Fatalf("%s: %v", spec.Service, err)
	}
	wantSpans, wantReq := 0, 0
	for _, tr := range spec.Traces {
		wantSpans += len(tr.Spans)
		wantReq += len(tr.batches())
	}
	if primary.spans != wantSpans || primary.requests != wantReq {
		t.Fatalf("%s: exported %d spans in %d requests, want %d in %d", spec.Service, primary.spans, primary.requests, wantSpans, wantReq)
	}
}

// fixedIDs gives the SDK the ids the spec names, one span at a time.
type fixedIDs struct {
	mu  sync.Mutex
	tid trace.TraceID
	sid trace.SpanID
}

func (f *fixedIDs) set(tid trace.TraceID, sid trace.SpanID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tid, f.sid = tid, sid
}

func (f *fixedIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tid, f.sid
}

func (f *fixedIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sid
}

// checkedExporter counts export requests and keeps every export error (the
// batch processor would only hand them to the global error handler).
type checkedExporter struct {
	sdktrace.SpanExporter
	mu              sync.Mutex
	requests, spans int
	errs            []error
}

func (c *checkedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	c.mu.Lock()
	c.requests++
	c.spans += len(spans)
	c.mu.Unlock()
	if err != nil {
		c.mu.Lock()
		c.errs = append(c.errs, fmt.Errorf("export of %d spans: %w", len(spans), err))
		c.mu.Unlock()
	}
	return err
}

func (c *checkedExporter) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.errs...)
}

// jsAgent runs scripts/jsagent/send.js, the OTel JS SDK sender.
type jsAgent struct {
	node, script, nodePath string
}

// jsAgentFor installs the JS SDK (scripts/jsagent/install.sh, cached) and
// returns the sender, or nil and why not when node or npm is missing or
// the install fails — which fails the test in CI (env CI set).
func jsAgentFor(t *testing.T) (*jsAgent, string) {
	t.Helper()
	unavailable := func(format string, args ...any) (*jsAgent, string) {
		msg := "OTel JS SDK senders not run: " + fmt.Sprintf(format, args...)
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " — CI must send through the JS SDK (.ci/run installs npm)")
		}
		return nil, msg
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return unavailable("node is not installed (apt-get install nodejs npm)")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return unavailable("npm is not installed (apt-get install npm)")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "scripts", "jsagent"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(dir, "install.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return unavailable("scripts/jsagent/install.sh: %v\n%s", err, stderr.String())
	}
	return &jsAgent{node: node, script: filepath.Join(dir, "send.js"), nodePath: strings.TrimSpace(string(out))}, ""
}

func (j *jsAgent) send(t *testing.T, spec senderSpec, endpoint, protocol, teeURL string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), spec.Service+".json")
	if err := os.WriteFile(path, mustJSON(t, spec), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, j.node, j.script, "--spec", path, "--endpoint", endpoint, "--protocol", protocol, "--tee", teeURL)
	cmd.Env = append(os.Environ(), "NODE_PATH="+j.nodePath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node send.js (%s, %s): %v\n%s%s", spec.Service, protocol, err, out, stderr.String())
	}
	var res struct{ Spans, Requests int }
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("node send.js (%s): %v\n%s", spec.Service, err, out)
	}
	wantSpans, wantReq := 0, 0
	for _, tr := range spec.Traces {
		wantSpans += len(tr.Spans)
		wantReq += len(tr.batches())
	}
	if res.Spans != wantSpans || res.Requests != wantReq {
		t.Fatalf("node send.js (%s): exported %d spans in %d requests, want %d in %d", spec.Service, res.Spans, res.Requests, wantSpans, wantReq)
	}
}

// ---- the tee: what the SDKs sent, as the file exporter writes it ------------

// otlpTee is an OTLP/HTTP endpoint (JSON or protobuf) that keeps what it
// receives.
type otlpTee struct {
	url string
	mu  sync.Mutex
	got []ptrace.Traces
}

type teeSpan struct {
	resource ptrace.ResourceSpans // its resource and schema URL (no spans)
	scope    ptrace.ScopeSpans    // its scope (no spans)
	span     ptrace.Span
}

func newOTLPTee(t *testing.T) *otlpTee {
	tee := &otlpTee{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := ptraceotlp.NewExportRequest()
		isJSON := strings.HasPrefix(r.Header.Get("Content-Type"), "application/json")
		if isJSON {
			err = req.UnmarshalJSON(body)
		} else {
			err = req.UnmarshalProto(body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		tee.mu.Lock()
		tee.got = append(tee.got, req.Traces())
		tee.mu.Unlock()
		resp := ptraceotlp.NewExportResponse()
		var b []byte
		if isJSON {
			w.Header().Set("Content-Type", "application/json")
			b, _ = resp.MarshalJSON()
		} else {
			w.Header().Set("Content-Type", "application/x-protobuf")
			b, _ = resp.MarshalProto()
		}
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	tee.url = srv.URL + "/v1/traces"
	return tee
}

// spans lists every span received with its resource and scope.
func (tee *otlpTee) spans() []teeSpan {
	tee.mu.Lock()
	defer tee.mu.Unlock()
	var out []teeSpan
	for _, td := range tee.got {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				ss := rs.ScopeSpans().At(j)
				for k := 0; k < ss.Spans().Len(); k++ {
					out = append(out, teeSpan{resource: rs, scope: ss, span: ss.Spans().At(k)})
				}
			}
		}
	}
	return out
}

// writeOTLPJSONL writes spans in the given order as the Collector's file
// exporter does (one ExportTraceServiceRequest per line, OTLP/JSON), one to
// three spans a line, each span under a copy of its resource and scope.
func writeOTLPJSONL(t *testing.T, path string, spans []teeSpan, rng *rand.Rand) {
	t.Helper()
	var buf bytes.Buffer
	m := ptrace.JSONMarshaler{}
	for i := 0; i < len(spans); {
		n := min(1+rng.IntN(3), len(spans)-i)
		td := ptrace.NewTraces()
		for _, s := range spans[i : i+n] {
			rs := td.ResourceSpans().AppendEmpty()
			s.resource.Resource().CopyTo(rs.Resource())
			rs.SetSchemaUrl(s.resource.SchemaUrl())
			ss := rs.ScopeSpans().AppendEmpty()
			s.scope.Scope().CopyTo(ss.Scope())
			ss.SetSchemaUrl(s.scope.SchemaUrl())
			s.span.CopyTo(ss.Spans().AppendEmpty())
		}
		b, err := m.MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
		i += n
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ---- small helpers ---------------------------------------------------------

func msOf(d time.Duration) float64 { return float64(d) / 1e6 }

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func compactJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return out.Bytes()
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// around shows b near byte i.
func around(b []byte, i int) string {
	lo, hi := max(i-120, 0), min(i+120, len(b))
	return "…" + string(b[lo:hi]) + "…"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// tableColumns finds where each column of a tabwriter table's header starts
// (in runes): a header word run separated by two or more spaces.
func tableColumns(header string) map[string]int {
	cols := map[string]int{}
	r := []rune(header)
	for i := 0; i < len(r); {
		for i < len(r) && r[i] == ' ' {
			i++
		}
		start := i
		for i < len(r) && !(r[i] == ' ' && (i+1 >= len(r) || r[i+1] == ' ')) {
			i++
		}
		if start < i {
			cols[string(r[start:i])] = start
		}
	}
	return cols
}

// tableCell is the text of a row under the named column: up to where the
// next column starts.
func tableCell(line string, cols map[string]int, name string) string {
	r := []rune(line)
	start := cols[name]
	end := len(r)
	for _, c := range cols {
		if c > start && c < end {
			end = c
		}
	}
	if start >= len(r) {
		return ""
	}
	return strings.TrimSpace(string(r[start:min(end, len(r))]))
}

func findNodes(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func nodeAttr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasClass(n *html.Node, class string) bool {
	return slices.Contains(strings.Fields(nodeAttr(n, "class")), class)
}

// text is a node's text with runs of white space made one space.
func nodeText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteByte(' ')
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}
