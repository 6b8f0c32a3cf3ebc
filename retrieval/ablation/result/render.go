package result

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func f3(x float64) string { return fmt.Sprintf("%.3f", x) }

func ci(s Stat) string { return fmt.Sprintf("%.3f [%.3f, %.3f]", s.Mean, s.Lo, s.Hi) }

func signed(s Stat) string { return fmt.Sprintf("%+.3f [%+.3f, %+.3f]", s.Mean, s.Lo, s.Hi) }

// WriteText writes aligned plain-text tables.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Retrieval ablation: %s — %d queries (%d with gold, %d with silver judgements), seed %d, %d bootstrap resamples\n\n",
		r.Dataset, r.Queries.Total, r.Queries.Gold, r.Queries.Silver, r.Seed, r.Bootstrap)
	for _, line := range r.protocolLines() {
		fmt.Fprintln(tw, line)
	}
	if len(r.protocolLines()) > 0 {
		fmt.Fprintln(tw)
	}
	for _, v := range r.Variants {
		for _, kind := range Kinds {
			fmt.Fprintf(tw, "%s judgements, own issue %s (mean [95%% CI])\n", kind, variantWords(v))
			fmt.Fprintf(tw, "mode\tn\t%s\t\n", strings.Join(MetricNames, "\t"))
			for _, m := range r.Modes {
				row, ok := r.Row(v, m, kind)
				if !ok {
					continue
				}
				cells := []string{m, fmt.Sprint(row.N)}
				for _, name := range MetricNames {
					cells = append(cells, ci(row.Metrics[name]))
				}
				fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
			}
			fmt.Fprintln(tw)
		}
	}
	fmt.Fprintln(tw, "latency per query (in-process, timed on the search service itself)\nvariant\tmode\tp50 ms\tp95 ms\tmean ms\t")
	for _, l := range r.Latency {
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\t\n", l.Variant, l.Mode, l.P50, l.P95, l.Mean)
	}
	fmt.Fprintln(tw)
	if len(r.Deltas) > 0 {
		fmt.Fprintln(tw, "paired nDCG@10 difference to the baseline (mean [95% CI])\nvariant\tkind\tmode\tΔ vs baseline\t")
		for _, d := range r.Deltas {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s (vs %s)\t\n", d.Variant, d.Kind, d.Mode, signed(d.Delta), d.Baseline)
		}
		fmt.Fprintln(tw)
	}
	if len(r.StatsEffect) > 0 {
		fmt.Fprintln(tw, "fitted statistics: own issue held out vs included (both exclude it from the results)\nkind\tmode\tn\tnDCG@10 held out\tnDCG@10 full stats\tΔ full − held out [95% CI]\ttop 10 changed\t")
		for _, e := range r.StatsEffect {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t\n", e.Kind, e.Mode, e.N, f3(e.HeldOut), f3(e.Full), signed(e.Delta), e.Changed)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintln(tw, "per-query nDCG@10 wins/losses/ties (A vs B) and failures (no relevant page in top 10)\nvariant\tkind\tA vs B\tA wins\tB wins\tties\tonly A fails\tonly B fails\tboth fail\t")
	for i, wl := range r.WinLoss {
		fr := r.Failures[i]
		fmt.Fprintf(tw, "%s\t%s\t%s vs %s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", wl.Variant, wl.Kind, wl.A, wl.B, wl.Wins, wl.Losses, wl.Ties, len(fr.OnlyA), len(fr.OnlyB), fr.Both)
	}
	fmt.Fprintln(tw)
	if len(r.Leakage) > 0 {
		fmt.Fprintln(tw, "leakage: own issue left in the corpus\nkind\tmode\town issue @1\town issue in top 10\tnDCG@10 excluded\tnDCG@10 leaky\tleaky, question credited\t")
		for _, l := range r.Leakage {
			fmt.Fprintf(tw, "%s\t%s\t%.0f%%\t%.0f%%\t%s\t%s\t%s\t\n", l.Kind, l.Mode, 100*l.OwnAt1, 100*l.OwnAt10, f3(l.Excluded), f3(l.Leaky), f3(l.Credited))
		}
		fmt.Fprintln(tw)
	}
	for _, ri := range []*RerankInfo{r.Reranker, r.RerankerFullStats} {
		if ri == nil {
			continue
		}
		fmt.Fprintf(tw, "learned reranker folds (trained on silver, split by issue; %s)\nfold\ttrain queries\teval queries\texamples\tpositives\tloss\t\n", statisticsWords(ri.Statistics))
		for _, f := range ri.Folds {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.3f\t\n", f.Name, f.TrainQueries, f.EvalQueries, f.Examples, f.Positives, f.FinalLoss)
		}
		fmt.Fprintln(tw)
	}
	if len(r.Environment) > 0 {
		keys := make([]string, 0, len(r.Environment))
		for k := range r.Environment {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(tw, "%s:\t%s\t\n", k, r.Environment[k])
		}
	}
	return tw.Flush()
}

func variantWords(v Variant) string {
	switch v {
	case Leaky:
		return "left in (leaky)"
	case FullStats:
		return "excluded from the results, in the fitted statistics"
	}
	return "excluded"
}

// variantLabel is variantWords short enough for the chart's legend.
func variantLabel(v Variant) string {
	if v == FullStats {
		return "excluded, full stats"
	}
	return variantWords(v)
}

func statisticsWords(s string) string {
	switch s {
	case "held-out":
		return "candidates on statistics without the training query's issue"
	case "full":
		return "candidates on statistics of the whole corpus"
	}
	return "candidate statistics not recorded"
}

// protocolLines say how the statistics were fitted and, for a saved
// reranker, what it was trained on and how many of this set's queries
// were left out for it.
func (r *Report) protocolLines() []string {
	var out []string
	if st := r.Statistics; st != nil {
		dense := fmt.Sprintf("LSA refitted in %d folds of the judged queries' issues (%s left out of each fit), each query ranked by the fit without its own", st.LSAFolds, foldSizes(st.LSAFoldIssues))
		if st.Dense != "lsa-folds" {
			dense = "the embedder is not fitted on the corpus"
		}
		out = append(out, fmt.Sprintf("Own issue excluded from the results and from the fitted statistics: BM25 per query (index without the issue and its duplicates), %s. Built in %.0f ms (index) + %.0f ms (fits); holding out per query took %.0f ms.",
			dense, st.IndexMS, st.FitMS, st.HoldOutMS))
	}
	if sr := r.SavedReranker; sr != nil {
		p := sr.TrainedOn
		out = append(out, fmt.Sprintf("Saved reranker %s, not retrained: trained on %s (fold %s, %d queries, %s judgements, seed %d, %s statistics, embedder %s).",
			sr.File, p.Dataset, p.Fold, sr.TrainedQueries, p.Judgements, p.Seed, p.Statistics, p.Embedder))
		var ids []string
		for i, o := range sr.Overlap {
			if i == 12 {
				ids = append(ids, fmt.Sprintf("… and %d more (all in the JSON report's saved_reranker.overlap)", len(sr.Overlap)-i))
				break
			}
			ids = append(ids, o.QueryID)
		}
		switch {
		case len(sr.Overlap) == 0:
			out = append(out, fmt.Sprintf("None of this set's %d judged queries was in its training set.", sr.JudgedQueries))
		case sr.KeptOverlap:
			out = append(out, fmt.Sprintf("%d of this set's %d judged queries were in its training set and are INCLUDED (--keep-trained): the rerank numbers are leaky. Overlap: %s.", len(sr.Overlap), sr.JudgedQueries, strings.Join(ids, ", ")))
		default:
			out = append(out, fmt.Sprintf("%d of this set's %d judged queries were in its training set and are excluded from every mode's metrics (%d scored). Excluded: %s.", len(sr.Overlap), sr.JudgedQueries, r.Queries.Total, strings.Join(ids, ", ")))
		}
	}
	return out
}

// foldSizes says how many issues each fold holds: "15/15/14 issues", or
// for many folds the range.
func foldSizes(xs []int) string {
	if len(xs) == 0 {
		return "no issues"
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	switch {
	case lo == hi && len(xs) > 8:
		return fmt.Sprintf("%d issues each", lo)
	case len(xs) > 8:
		return fmt.Sprintf("%d–%d issues", lo, hi)
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, "/") + " issues"
}

// WriteMarkdown writes the report as Markdown tables.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Dataset `%s`: %d judged queries (%d with gold, %d with silver judgements); seed %d; %d bootstrap resamples; 95%% percentile intervals in brackets.\n\n",
		r.Dataset, r.Queries.Total, r.Queries.Gold, r.Queries.Silver, r.Seed, r.Bootstrap)
	for _, line := range r.protocolLines() {
		b.WriteString(line + "\n\n")
	}
	for _, v := range r.Variants {
		for _, kind := range Kinds {
			fmt.Fprintf(&b, "**%s**, own issue %s\n\n", kind, variantWords(v))
			b.WriteString("| mode | n | " + strings.Join(MetricNames, " | ") + " |\n")
			b.WriteString("|---|---:|" + strings.Repeat("---|", len(MetricNames)) + "\n")
			for _, m := range r.Modes {
				row, ok := r.Row(v, m, kind)
				if !ok {
					continue
				}
				fmt.Fprintf(&b, "| %s | %d |", m, row.N)
				for _, name := range MetricNames {
					s := row.Metrics[name]
					fmt.Fprintf(&b, " %.3f <sub>[%.2f, %.2f]</sub> |", s.Mean, s.Lo, s.Hi)
				}
				b.WriteString("\n")
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("**Latency per query** (in-process, wall clock, timed on the search service itself)\n\n| variant | mode | p50 ms | p95 ms | mean ms |\n|---|---|---:|---:|---:|\n")
	for _, l := range r.Latency {
		fmt.Fprintf(&b, "| %s | %s | %.2f | %.2f | %.2f |\n", l.Variant, l.Mode, l.P50, l.P95, l.Mean)
	}
	b.WriteString("\n")
	if len(r.Deltas) > 0 {
		b.WriteString("**Paired nDCG@10 difference to the baseline**\n\n| variant | kind | mode | Δ nDCG@10 [95% CI] |\n|---|---|---|---|\n")
		for _, d := range r.Deltas {
			fmt.Fprintf(&b, "| %s | %s | %s − %s | %s |\n", d.Variant, d.Kind, d.Mode, d.Baseline, signed(d.Delta))
		}
		b.WriteString("\n")
	}
	if len(r.StatsEffect) > 0 {
		b.WriteString("**Fitted statistics: own issue held out vs included** (both exclude it from the results)\n\n| kind | mode | n | nDCG@10 held out | nDCG@10 full stats | Δ full − held out [95% CI] | top 10 changed |\n|---|---|---:|---:|---:|---|---:|\n")
		for _, e := range r.StatsEffect {
			fmt.Fprintf(&b, "| %s | %s | %d | %.3f | %.3f | %s | %d |\n", e.Kind, e.Mode, e.N, e.HeldOut, e.Full, signed(e.Delta), e.Changed)
		}
		b.WriteString("\n")
	}
	b.WriteString("**Per-query wins and failures** (wins by nDCG@10; a failure is no relevant page in the top 10)\n\n| variant | kind | A vs B | A wins | B wins | ties | only A fails | only B fails | both fail |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n")
	for i, wl := range r.WinLoss {
		fr := r.Failures[i]
		fmt.Fprintf(&b, "| %s | %s | %s vs %s | %d | %d | %d | %d | %d | %d |\n", wl.Variant, wl.Kind, wl.A, wl.B, wl.Wins, wl.Losses, wl.Ties, len(fr.OnlyA), len(fr.OnlyB), fr.Both)
	}
	b.WriteString("\n")
	if len(r.Leakage) > 0 {
		b.WriteString("**Leakage** (own issue left in the corpus)\n\n| kind | mode | own issue @1 | own issue in top 10 | nDCG@10 excluded | nDCG@10 leaky | leaky, question credited as relevant |\n|---|---|---:|---:|---:|---:|---:|\n")
		for _, l := range r.Leakage {
			fmt.Fprintf(&b, "| %s | %s | %.0f%% | %.0f%% | %.3f | %.3f | %.3f |\n", l.Kind, l.Mode, 100*l.OwnAt1, 100*l.OwnAt10, l.Excluded, l.Leaky, l.Credited)
		}
		b.WriteString("\n")
	}
	for _, ri := range []*RerankInfo{r.Reranker, r.RerankerFullStats} {
		if ri == nil {
			continue
		}
		fmt.Fprintf(&b, "**Learned reranker folds** (trained on silver only, split by issue; %s)\n\n| fold | train queries | eval queries | examples | positives | final loss |\n|---|---:|---:|---:|---:|---:|\n", statisticsWords(ri.Statistics))
		for _, f := range ri.Folds {
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %.3f |\n", f.Name, f.TrainQueries, f.EvalQueries, f.Examples, f.Positives, f.FinalLoss)
		}
		b.WriteString("\n")
	}
	if len(r.Environment) > 0 {
		keys := make([]string, 0, len(r.Environment))
		for k := range r.Environment {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("| environment | |\n|---|---|\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "| %s | %s |\n", k, r.Environment[k])
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
