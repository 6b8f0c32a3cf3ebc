package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/loomwork/loomwork/internal/docblock"
)

// The comparison of the two targets: rounds are paired (each round runs
// both, on the same machine minutes apart, in alternating order), so the
// ratio serve ÷ peer is taken round by round, and its 95% interval is a
// t interval on the logarithms of the per-round ratios (n − 1 degrees of
// freedom), exponentiated: a geometric mean ratio with its interval.

// ratioCI is the geometric mean of xs (ratios) and its 95% t interval;
// lo and hi are NaN with fewer than two ratios.
func ratioCI(xs []float64) (gm, lo, hi float64) {
	n := len(xs)
	if n == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	logs := make([]float64, n)
	mean := 0.0
	for i, x := range xs {
		logs[i] = math.Log(x)
		mean += logs[i]
	}
	mean /= float64(n)
	if n < 2 {
		return math.Exp(mean), math.NaN(), math.NaN()
	}
	ss := 0.0
	for _, l := range logs {
		ss += (l - mean) * (l - mean)
	}
	se := math.Sqrt(ss/float64(n-1)) / math.Sqrt(float64(n))
	t := t975(n - 1)
	return math.Exp(mean), math.Exp(mean - t*se), math.Exp(mean + t*se)
}

// t975 is the 97.5th percentile of Student's t with df degrees of freedom.
func t975(df int) float64 {
	table := []float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	if df >= 1 && df <= len(table) {
		return table[df-1]
	}
	return 1.96 + 2.4/float64(df) // within 0.005 of the exact value for df > 30
}

// pair is one round's two runs of one sender count.
type pair struct {
	senders, round int
	peer, serve    result
}

func (r report) pairs() []pair {
	var out []pair
	type key struct{ s, r int }
	seen := map[key]*pair{}
	var order []key
	for _, x := range r.Runs {
		k := key{x.Senders, x.Round}
		p := seen[k]
		if p == nil {
			p = &pair{senders: x.Senders, round: x.Round}
			seen[k] = p
			order = append(order, k)
		}
		switch x.Target {
		case "peer":
			p.peer = x
		case "serve":
			p.serve = x
		}
	}
	for _, k := range order {
		if p := seen[k]; p.peer.Target != "" && p.serve.Target != "" {
			out = append(out, *p)
		}
	}
	return out
}

func cpuPerM(x result) float64 { return x.TargetCPUPerM + x.CHCPUPerM }

func optimizedBytes(x result) float64 {
	if x.BytesPerSpanOptimized > 0 {
		return x.BytesPerSpanOptimized
	}
	return x.BytesPerSpan
}

// paired is the round-by-round table and the ratios with their
// intervals, per sender count.
func (r report) paired() string {
	ps := r.pairs()
	if len(ps) == 0 {
		return "(no round ran both targets: no ratios)\n"
	}
	var b strings.Builder
	b.WriteString("| senders | round | order | stored spans/s peer · serve | ratio | CPU-s/M spans (collector + ClickHouse) peer · serve | ratio | B/span after OPTIMIZE FINAL peer · serve | ratio | collector peak RSS peer · serve | ratio |\n")
	b.WriteString("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, p := range ps {
		order := "peer first"
		if p.serve.Order < p.peer.Order {
			order = "serve first"
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %s · %s | %.2f | %.1f · %.1f | %.2f | %.1f · %.1f | %.2f | %.0f · %.0f MB | %.2f |\n",
			p.senders, p.round, order,
			thousands(p.peer.StoredPerSec), thousands(p.serve.StoredPerSec), p.serve.StoredPerSec/p.peer.StoredPerSec,
			cpuPerM(p.peer), cpuPerM(p.serve), cpuPerM(p.serve)/cpuPerM(p.peer),
			optimizedBytes(p.peer), optimizedBytes(p.serve), optimizedBytes(p.serve)/optimizedBytes(p.peer),
			float64(p.peer.TargetPeakRSS)/1e6, float64(p.serve.TargetPeakRSS)/1e6, float64(p.serve.TargetPeakRSS)/float64(p.peer.TargetPeakRSS))
	}
	b.WriteString("\nserve ÷ peer, geometric mean of the rounds' ratios with a 95% t interval on their logarithms:\n\n")
	b.WriteString("| senders | rounds | stored spans/s | CPU per span | bytes on disk per span | collector peak RSS |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: |\n")
	var senders []int
	for _, p := range ps {
		if !slices.Contains(senders, p.senders) {
			senders = append(senders, p.senders)
		}
	}
	for _, s := range senders {
		var rate, cpu, disk, rss []float64
		for _, p := range ps {
			if p.senders != s {
				continue
			}
			rate = append(rate, p.serve.StoredPerSec/p.peer.StoredPerSec)
			cpu = append(cpu, cpuPerM(p.serve)/cpuPerM(p.peer))
			disk = append(disk, optimizedBytes(p.serve)/optimizedBytes(p.peer))
			rss = append(rss, float64(p.serve.TargetPeakRSS)/float64(p.peer.TargetPeakRSS))
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %s | %s | %s |\n", s, len(rate), ciString(rate), ciString(cpu), ciString(disk), ciString(rss))
	}
	return b.String()
}

func ciString(xs []float64) string {
	gm, lo, hi := ratioCI(xs)
	if math.IsNaN(lo) {
		return fmt.Sprintf("%.2f×", gm)
	}
	return fmt.Sprintf("**%.2f×** (%.2f–%.2f)", gm, lo, hi)
}

func (in loadInfo) describe() string {
	if in.Name == "templated" {
		return fmt.Sprintf("Load: templated (issue 17's): %d templates of %d agenttrace spans, %d bytes each.", in.Requests, in.RequestSpans, in.RequestBytes)
	}
	return fmt.Sprintf("Load: agent (varied agent traffic): a pool of %d traces, %d spans, %.0f MB encoded (%d B/span); spans per trace median %d, 90th percentile %d, max %d; requests of ≥ %d spans (mean %.0f), %.0f KB on average.",
		in.PoolTraces, in.PoolSpans, float64(in.PoolBytes)/1e6, in.PoolBytes/max(1, in.PoolSpans),
		in.TraceSpansP50, in.TraceSpansP90, in.TraceSpansMax, in.RequestSpans, in.MeanSpans, float64(in.RequestBytes)/1e3)
}

// Markers of the generated part of a Markdown file (-doc).
const (
	docBegin = "<!-- throughput:begin -->"
	docEnd   = "<!-- throughput:end -->"
)

// spliceDoc replaces what lies between the marker lines in path with md
// (docblock.Replace, the markers anchored to whole lines: a marker quoted
// inside a line of text is not one).
func spliceDoc(path, md string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("-doc: %w", err)
	}
	// A newline in front, so a marker on the first line is a line too.
	out, err := docblock.Replace(append([]byte("\n"), b...), "\n"+docBegin+"\n", "\n"+docEnd+"\n", []byte("\n"+md))
	if err != nil {
		return fmt.Errorf("-doc %s: %w", path, err)
	}
	if err := os.WriteFile(path, out[1:], 0o644); err != nil {
		return fmt.Errorf("-doc: %w", err)
	}
	return nil
}
