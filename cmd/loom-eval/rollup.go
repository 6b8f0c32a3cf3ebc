package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/loomwork/loomwork/collector/genai"
	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/store"
)

// runRollup reads OTLP/JSON (one ExportTraceServiceRequest per line, the
// Collector file exporter's format), maps it with the collector's GenAI
// mapping and prints one rollup per trace.
func (m *Main) runRollup(ctx context.Context, args []string) error {
	fs := m.newFlagSet("rollup", "rollup FILE [--format text|json] [--json] [--prices FILE]")
	out := m.addOutputFlags(fs, "text", "json")
	pricesPath := fs.String("prices", "", "price table JSON overriding the built-in one (see docs/scoring.md)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	format, err := out.Format()
	if err != nil {
		return err
	}
	pos := fs.Args()
	if len(pos) != 1 {
		return usageError("rollup: want exactly one FILE, got %d arguments", len(pos))
	}
	prices, err := scorerLoadPrices(*pricesPath)
	if err != nil {
		return err
	}
	spans, err := readOTLPJSON(pos[0])
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	rs := rollup.ComputeAll(spans, prices)
	if format == "json" {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rs)
	}
	return writeRollupText(termSafe(m.Stdout), rs, prices)
}

// scorerLoadPrices is the built-in price table, with the file at path (if
// any) applied over it; cmd opens the file, the scorer only parses. An
// unopenable or invalid file is a usage error (exit 2).
func scorerLoadPrices(path string) (*pricing.Table, error) {
	if path == "" {
		return pricing.Default(), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("open price table: %w", err)}
	}
	defer f.Close()
	t, err := pricing.ParseOverride(pricing.Default(), f, path)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	return t, nil
}

// readOTLPJSON reads an OTLP/JSON file (one document, or JSON Lines as the
// Collector's file exporter writes) with the collector's own decoder and
// GenAI mapping, so this path and ingest agree on every field. A malformed
// document or a span the mapping rejects is an error naming the file and
// line.
func readOTLPJSON(path string) ([]store.Span, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open traces: %w", err)
	}
	defer f.Close()
	spans, rejected, err := genai.ReadJSON(f, path, genai.Options{})
	if err != nil {
		return nil, err
	}
	if len(rejected) > 0 {
		return nil, fmt.Errorf("%s: %s", path, genai.RejectionSummary(rejected))
	}
	if len(spans) == 0 {
		return nil, fmt.Errorf("%s: no spans", path)
	}
	return spans, nil
}

func writeRollupText(w io.Writer, rs []rollup.Rollup, prices *pricing.Table) error {
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	for i, r := range rs {
		if i > 0 {
			p("\n")
		}
		p("trace %s  %q  start %s\n", r.TraceID, r.RootName, r.Start.Format("2006-01-02T15:04:05.000Z07:00"))
		p("  duration       %.3f ms", r.DurationMS)
		if r.AfterRootMS > 0 {
			p(" (%.3f ms after the root ended: async work)", r.AfterRootMS)
		}
		p("   critical path %.3f ms\n", r.CriticalPathMS)
		if len(r.Tops) > 1 {
			p("  fragments      %d:", len(r.Tops))
			for j, t := range r.Tops {
				if j > 0 {
					p(",")
				}
				why := "root"
				switch {
				case t.RemoteParent:
					why = "continues a remote parent"
				case t.Orphan:
					why = "parent not received"
				}
				p(" %q (%s, span %s)", t.Name, why, t.SpanID)
			}
			p("\n")
		}
		p("  spans          %d (model calls %d, failed %d; tool calls %d; errors %d)\n", r.SpanCount, r.ModelCalls, r.FailedModelCalls, r.ToolCalls, r.ErrorCount)
		p("  tokens         in %d (cache read %d, cache write %d)  out %d (reasoning %d)\n", r.TokensIn, r.CacheReadTokens, r.CacheCreationTokens, r.TokensOut, r.ReasoningTokens)
		if r.CostUSD != nil {
			p("  cost           $%.6f  (prices as of %s)\n", *r.CostUSD, prices.AsOf)
		} else {
			p("  cost           unknown: %s; priced part $%.6f\n", rollup.UnknownCostText(r.Calls), r.KnownCostUSD)
		}
		for _, mu := range r.Models {
			c := "unknown"
			if mu.CostUSD != nil {
				c = fmt.Sprintf("$%.6f", *mu.CostUSD)
			}
			p("    %-34s %3d calls  in %8d  out %7d  %s\n", mu.Model, mu.Calls, mu.TokensIn, mu.TokensOut, c)
		}
		// The spans a user should look at first: largest critical self time.
		// Idle time between fragments is no span: it is reported apart.
		var top []rollup.PathEntry
		idle := 0.0
		for _, e := range r.CriticalPath {
			if e.SpanID == "" {
				idle += e.SelfMS
				continue
			}
			top = append(top, e)
		}
		sort.SliceStable(top, func(a, b int) bool { return top[a].SelfMS > top[b].SelfMS })
		const show = 10
		p("  critical path  %d spans", len(top))
		if idle > 0 {
			p(" and %.3f ms idle between fragments", idle)
		}
		p("; by self time:\n")
		for j, e := range top {
			if j == show {
				p("    … %d more (use --json for all)\n", len(top)-show)
				break
			}
			share := 0.0
			if r.CriticalPathMS > 0 {
				share = 100 * e.SelfMS / r.CriticalPathMS
			}
			p("    %10.3f ms %5.1f%%  %-16s %s\n", e.SelfMS, share, e.SpanID, e.Name)
		}
		for _, n := range r.Notes {
			p("  note: %s\n", n)
		}
	}
	return bw.Flush()
}
