package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// result is one run: one target, one sender count, one fresh ClickHouse.
type result struct {
	Target   string `json:"target"`
	Senders  int    `json:"senders"`
	Round    int    `json:"round"`
	Order    int    `json:"order"` // position in the interleaved sequence
	Database string `json:"database"`
	Dir      string `json:"dir"`
	LoadAvg  string `json:"loadavg_before"`

	Requests   int64  `json:"requests_ok"`
	Failed     int64  `json:"requests_failed"`
	FirstError string `json:"first_error,omitempty"`
	Acked      int64  `json:"acked_spans"`
	Rejected   int64  `json:"rejected_spans"`
	Stored     int64  `json:"stored_rows"`      // count() after the drain
	Distinct   int64  `json:"distinct_spans"`   // uniqExact(trace id, span id)
	Duplicates int64  `json:"duplicate_rows"`   // stored − distinct
	Lost       int64  `json:"lost_acked_spans"` // acked − distinct, if positive
	Complete   bool   `json:"drain_complete"`   // count() reached acked within -drain-timeout

	SendSeconds  float64 `json:"send_seconds"`  // first send → last answer
	DrainSeconds float64 `json:"drain_seconds"` // last answer → every acked span counted
	AckedPerSec  float64 `json:"acked_spans_per_s"`
	StoredPerSec float64 `json:"stored_spans_per_s"` // distinct / (first send → all stored)

	TargetCPUSeconds float64 `json:"target_cpu_s"`
	CHCPUSeconds     float64 `json:"clickhouse_cpu_s"`
	ClientCPUSeconds float64 `json:"client_cpu_s"`
	TargetCPUPerM    float64 `json:"target_cpu_s_per_M"`
	CHCPUPerM        float64 `json:"clickhouse_cpu_s_per_M"`
	ClientCPUPerM    float64 `json:"client_cpu_s_per_M"`
	OtherCores       float64 `json:"other_cores"` // machine busy minus the three, per second of the window
	TargetPeakRSS    int64   `json:"target_peak_rss_bytes"`
	CHPeakRSS        int64   `json:"clickhouse_peak_rss_bytes"`

	// MergedPerInserted is ClickHouse's MergedRows ÷ InsertedRows at the
	// end of the drain.
	MergedPerInserted float64 `json:"merged_rows_per_inserted_row"`

	DiskBytes             int64   `json:"disk_bytes"`
	BytesPerSpan          float64 `json:"bytes_per_span"`
	DiskBytesOptimized    int64   `json:"disk_bytes_optimized,omitempty"`
	BytesPerSpanOptimized float64 `json:"bytes_per_span_optimized,omitempty"`
}

type report struct {
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished,omitzero"`
	Commit    string    `json:"commit"`
	GoVersion string    `json:"go_version"`
	Cores     int       `json:"cores"`
	Load      loadInfo  `json:"load"`
	Options   options   `json:"options"`
	Runs      []result  `json:"runs"`
	// Retried lists runs that were run again because a process died.
	Retried []string `json:"retried,omitempty"`
}

func (r report) write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(r.markdown()), 0o644); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return nil
}

// markdown is the summary table (one row per target and sender count,
// runs joined with " · " in run order) and the per-run table.
func (r report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d runs, %s of sending each, commit %s, %d cores, processes in %s sessions, %s\n\n",
		len(r.Runs), r.Options.Duration, r.Commit, r.Cores, r.Options.Sessions, r.Started.Format("2006-01-02 15:04 MST"))
	b.WriteString(r.Load.describe())
	b.WriteString("\n\n")
	b.WriteString(r.paired())
	b.WriteString("\nBy target:\n\n")
	b.WriteString("| target | senders | stored spans/s | collector CPU-s/M | ClickHouse CPU-s/M | client CPU-s/M | collector peak RSS | B/span on disk | B/span after OPTIMIZE FINAL | lost · duplicated |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	type key struct {
		senders int
		target  string
	}
	var keys []key
	groups := map[key][]result{}
	for _, x := range r.Runs {
		k := key{x.Senders, x.Target}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], x)
	}
	for _, k := range keys {
		g := groups[k]
		var lost, dup int64
		for _, x := range g {
			lost += x.Lost
			dup += x.Duplicates
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %d · %d |\n",
			k.target, k.senders,
			join(g, func(x result) string { return thousands(x.StoredPerSec) }),
			span(g, func(x result) float64 { return x.TargetCPUPerM }, "%.1f"),
			span(g, func(x result) float64 { return x.CHCPUPerM }, "%.1f"),
			span(g, func(x result) float64 { return x.ClientCPUPerM }, "%.1f"),
			span(g, func(x result) float64 { return float64(x.TargetPeakRSS) / 1e6 }, "%.0f")+" MB",
			span(g, func(x result) float64 { return x.BytesPerSpan }, "%.0f"),
			span(g, func(x result) float64 { return x.BytesPerSpanOptimized }, "%.0f"),
			lost, dup)
	}
	b.WriteString("\nPer run, in the order run:\n\n")
	b.WriteString("| # | target | senders | acked | stored (distinct) | dup | failed req | send s | drain s | acked/s | stored/s | collector CPU-s | ClickHouse CPU-s | client CPU-s | other cores | peak RSS collector / ClickHouse | disk MB (after OPTIMIZE) | rows merged per row | load before |\n")
	b.WriteString("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, x := range r.Runs {
		done := ""
		if !x.Complete {
			done = " (drain timed out)"
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %d | %d%s | %d | %d | %.1f | %.2f | %s | %s | %.1f | %.1f | %.1f | %.2f | %.0f / %.0f MB | %.1f (%.1f) | %.1f | %s |\n",
			x.Order, x.Target, x.Senders, x.Acked, x.Distinct, done, x.Duplicates, x.Failed,
			x.SendSeconds, x.DrainSeconds, thousands(x.AckedPerSec), thousands(x.StoredPerSec),
			x.TargetCPUSeconds, x.CHCPUSeconds, x.ClientCPUSeconds, x.OtherCores,
			float64(x.TargetPeakRSS)/1e6, float64(x.CHPeakRSS)/1e6,
			float64(x.DiskBytes)/1e6, float64(x.DiskBytesOptimized)/1e6, x.MergedPerInserted, x.LoadAvg)
	}
	for _, s := range r.Retried {
		fmt.Fprintf(&b, "\nrun again: %s\n", s)
	}
	for _, x := range r.Runs {
		if x.FirstError != "" {
			fmt.Fprintf(&b, "\nrun %d (%s, %d senders): %d failed requests; first: %s\n", x.Order, x.Target, x.Senders, x.Failed, x.FirstError)
		}
	}
	return b.String()
}

func join(g []result, f func(result) string) string {
	parts := make([]string, len(g))
	for i, x := range g {
		parts[i] = f(x)
	}
	return strings.Join(parts, " · ")
}

// span prints the range of f over g ("a–b", or "a" when all agree).
func span(g []result, f func(result) float64, format string) string {
	vals := make([]float64, len(g))
	for i, x := range g {
		vals[i] = f(x)
	}
	lo, hi := fmt.Sprintf(format, slices.Min(vals)), fmt.Sprintf(format, slices.Max(vals))
	if lo == hi {
		return lo
	}
	return lo + "–" + hi
}

// thousands formats a rate as an integer with comma separators.
func thousands(x float64) string {
	s := fmt.Sprintf("%d", int64(x+0.5))
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}
