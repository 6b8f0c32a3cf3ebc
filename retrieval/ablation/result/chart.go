package result

import (
	"fmt"
	"html"
	"io"
	"path/filepath"
	"strings"
)

// WriteSVG draws nDCG@10 per mode as grouped bars (one bar per judgement
// kind and variant) with the bootstrap intervals as whiskers. Every string
// from the report is escaped: the web UI serves this for files it did not
// write.
func (r *Report) WriteSVG(w io.Writer) error {
	type series struct {
		v     Variant
		kind  string
		color string
		label string
	}
	palette := map[string][3]string{"gold": {"#c98a00", "#e3b54a", "#f0d28c"}, "silver": {"#5b6f8a", "#8a9bb3", "#b9c6d8"}}
	shade := map[Variant]int{Excluded: 0, FullStats: 1, Leaky: 2}
	var ss []series
	for _, kind := range Kinds {
		for _, v := range r.Variants {
			if len(r.Modes) == 0 {
				break
			}
			if _, ok := r.Row(v, r.Modes[0], kind); !ok {
				continue
			}
			ss = append(ss, series{v, kind, palette[kind][shade[v]], fmt.Sprintf("%s, own issue %s", kind, variantLabel(v))})
		}
	}
	const (
		left, right, bottom = 60.0, 20.0, 90.0
		plotH               = 300.0
		barW, gap           = 18.0, 26.0
	)
	top := 50.0
	if r.SavedReranker != nil {
		top += 16 // a line saying what the saved reranker's overlap was
	}
	groupW := float64(len(ss))*barW + gap
	width := left + right + groupW*float64(len(r.Modes))
	if width < 520 {
		width = 520
	}
	height := top + plotH + bottom
	y := func(v float64) float64 { return top + plotH*(1-v) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15" font-weight="bold">nDCG@10 by retrieval mode — %s</text>`+"\n", left, html.EscapeString(r.Dataset))
	fmt.Fprintf(&b, `<text x="%.0f" y="38" fill="#555">%d queries (%d gold, %d silver); whiskers: 95%% bootstrap CI, seed %d</text>`+"\n", left, r.Queries.Total, r.Queries.Gold, r.Queries.Silver, r.Seed)
	if sr := r.SavedReranker; sr != nil {
		what := "excluded"
		if sr.KeptOverlap {
			what = "INCLUDED (leaky)"
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="54" fill="#555">saved reranker %s: %d of %d judged queries were in its training set, %s</text>`+"\n",
			left, html.EscapeString(filepath.Base(sr.File)), len(sr.Overlap), sr.JudgedQueries, what)
	}
	for t := 0; t <= 10; t += 2 {
		v := float64(t) / 10
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, width-right, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end" fill="#555">%.1f</text>`+"\n", left-6, y(v)+4, v)
	}
	for mi, m := range r.Modes {
		gx := left + gap/2 + float64(mi)*groupW
		for si, s := range ss {
			row, ok := r.Row(s.v, m, s.kind)
			if !ok {
				continue
			}
			st := row.Metrics["ndcg@10"]
			x := gx + float64(si)*barW
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %.3f [%.3f, %.3f]</title></rect>`+"\n",
				x, y(st.Mean), barW-2, plotH*st.Mean, s.color, html.EscapeString(m), html.EscapeString(s.label), st.Mean, st.Lo, st.Hi)
			cx := x + (barW-2)/2
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#222"/>`+"\n", cx, cx, y(st.Lo), y(st.Hi))
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#222"/>`+"\n", cx-4, cx+4, y(st.Lo), y(st.Lo))
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#222"/>`+"\n", cx-4, cx+4, y(st.Hi), y(st.Hi))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", gx+float64(len(ss))*barW/2, top+plotH+18, html.EscapeString(m))
	}
	fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#222"/>`+"\n", left, width-right, y(0), y(0))
	for si, s := range ss {
		lx := left + float64(si%2)*230
		ly := top + plotH + 44 + float64(si/2)*18
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="12" height="12" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n", lx, ly-10, s.color, lx+18, ly, html.EscapeString(s.label))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
