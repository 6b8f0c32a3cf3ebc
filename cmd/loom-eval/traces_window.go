package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/web"
)

// traces get reads a trace whole (GetTrace, the tree printed) when it has
// at most web.DefaultWindowSpans spans, or its store has no window
// capability; a bigger one, or any trace given --limit, --page-token or
// --all, is read a page of spans at a time in start order
// (store.WindowReader), its rollup from what the store keeps
// (rollup.Window, bounded as the API serves it): the first page carries
// it, and --all streams every
// span without holding the trace in memory.

// unscoper is a store that scopes its reads to a project (scopedStore).
type unscoper interface {
	unscoped() (store.Store, string)
}

func (s scopedStore) unscoped() (store.Store, string) { return s.Store, s.project }

// windowOf returns st's window capability, with ctx scoped as st scopes
// its own reads.
func windowOf(ctx context.Context, st store.Store) (store.WindowReader, context.Context, bool) {
	if u, ok := st.(unscoper); ok {
		var p string
		st, p = u.unscoped()
		ctx = store.WithProject(ctx, p)
	}
	w, ok := st.(store.WindowReader)
	return w, ctx, ok
}

// tracesGetWindowed prints trace id by window when it is big or paging
// was asked for, and reports whether it did.
func (m *Main) tracesGetWindowed(ctx context.Context, st store.Store, id string, pg tracesPaging, asJSON bool, pricesFile string) (bool, error) {
	w, wctx, ok := windowOf(ctx, st)
	if !ok {
		return false, nil
	}
	n, err := w.TraceSize(wctx, id)
	if err != nil || !(pg.set() || n > web.DefaultWindowSpans) {
		return false, err
	}
	prices, err := scorerLoadPrices(pricesFile)
	if err != nil {
		return true, err
	}
	out := m.Stdout
	if !asJSON {
		out = termSafe(m.Stdout)
	}
	return true, tracesGetWindow(wctx, out, w, id, pg, asJSON, prices)
}

// tracesPaging is traces get's paging flags.
type tracesPaging struct {
	limit int
	token string
	all   bool
}

func (p tracesPaging) set() bool { return p.limit != 0 || p.token != "" || p.all }

// tracesPagingFlags defines traces get's paging flags on fs.
func tracesPagingFlags(fs *flag.FlagSet) *tracesPaging {
	pg := &tracesPaging{}
	fs.IntVar(&pg.limit, "limit", 0, fmt.Sprintf("spans per page (1 to %d; default %d): print one page, in start order", store.MaxSpanPage, store.DefaultSpanPage))
	fs.StringVar(&pg.token, "page-token", "", "the next page of spans (printed after a page)")
	fs.BoolVar(&pg.all, "all", false, "print every span, a page at a time, without holding the trace in memory")
	return pg
}

// check is a usage error for a bad limit or token.
func (p tracesPaging) check() error {
	if _, err := store.PageLimit(p.limit); err != nil {
		return usageError("traces get: --%w", err)
	}
	if _, _, err := store.DecodeSpanToken(p.token); err != nil {
		return usageError("traces get: --page-token: %w", err)
	}
	return nil
}

// tracesGetWindow prints trace id by window: the rollup (on the first
// page) and one page of spans, or every span with --all.
func tracesGetWindow(ctx context.Context, out io.Writer, w store.WindowReader, id string, pg tracesPaging, asJSON bool, prices *pricing.Table) error {
	var ru *rollup.Rollup
	if pg.token == "" {
		r, _, err := rollup.Window(ctx, w, id, prices)
		if err != nil {
			return err
		}
		// Bounded as the API serves it: a million spans' full lists run to
		// hundreds of megabytes.
		r = r.Bounded(rollup.BoundedPath, rollup.BoundedCalls)
		ru = &r
	}
	if pg.all {
		return tracesStreamAll(ctx, out, w, id, ru, asJSON, prices)
	}
	page, err := w.SpanPage(ctx, id, pg.token, pg.limit)
	if err != nil {
		return err
	}
	if asJSON {
		return tracesWriteJSON(out, web.TraceResponse{TraceID: id, Rollup: ru, Spans: page.Spans, NextPageToken: page.NextPageToken})
	}
	if ru != nil {
		if err := writeRollupText(out, []rollup.Rollup{*ru}, prices); err != nil {
			return err
		}
		fmt.Fprintln(out)
	}
	tracesPrintFlat(out, page.Spans)
	if page.NextPageToken != "" {
		fmt.Fprintf(out, "\nMore spans: add --page-token %s (or --all)\n", page.NextPageToken)
	}
	return nil
}

// tracesStreamAll writes every span, a page at a time: as one JSON object
// (trace_id, rollup, spans) whose spans array is written as it is read,
// or as text lines after the rollup.
func tracesStreamAll(ctx context.Context, out io.Writer, w store.WindowReader, id string, ru *rollup.Rollup, asJSON bool, prices *pricing.Table) error {
	bw := bufio.NewWriter(out)
	if asJSON {
		head, _ := json.Marshal(struct {
			TraceID string         `json:"trace_id"`
			Rollup  *rollup.Rollup `json:"rollup"`
		}{id, ru})
		bw.Write(head[:len(head)-1])
		bw.WriteString(`,"spans":[`)
	} else if ru != nil {
		if err := writeRollupText(bw, []rollup.Rollup{*ru}, prices); err != nil {
			return err
		}
		fmt.Fprintln(bw)
	}
	n, tok := 0, ""
	for {
		page, err := w.SpanPage(ctx, id, tok, store.MaxSpanPage)
		if err != nil {
			return err
		}
		if asJSON {
			for i := range page.Spans {
				b, err := json.Marshal(&page.Spans[i])
				if err != nil {
					return fmt.Errorf("span %s: %w", page.Spans[i].SpanID, err)
				}
				if n > 0 {
					bw.WriteByte(',')
				}
				bw.Write(b)
				n++
			}
		} else {
			tracesPrintFlat(bw, page.Spans)
		}
		if tok = page.NextPageToken; tok == "" {
			break
		}
	}
	if asJSON {
		bw.WriteString("]}\n")
	}
	return bw.Flush()
}

// tracesPrintFlat prints spans one a line, in the order given (start
// order): start, duration, status, name, parent and details.
func tracesPrintFlat(w io.Writer, spans []store.Span) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "START\tDURATION\tSTATUS\tSPAN\tPARENT\tDETAILS")
	for i := range spans {
		s := &spans[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%s\t%s\n", s.StartTime.Format("15:04:05.000000"), tracesDur(s.Duration()), s.StatusCode,
			tracesClip(s.Name, 60), s.SpanID, s.ParentSpanID, tracesSpanDetails(*s))
	}
	tw.Flush()
}
