// Package texttable lays out a human table of text columns within a width:
// columns are separated by two spaces, values too long for their column
// are cut with an ellipsis, and when even that does not fit, the columns
// that matter least are left out. A leaf on the standard library.
package texttable

import (
	"io"
	"strings"
	"unicode/utf8"
)

// Column is one column of a table.
type Column struct {
	Header string
	// Min is the narrowest a value may be cut to (an ellipsis included);
	// 0: the column's values are never cut (it is shown whole or left out).
	Min int
	// Drop orders the columns left out when cutting is not enough: the
	// highest goes first; 0: never left out.
	Drop int
}

// Sep is what separates two columns.
const Sep = "  "

// Fit returns the columns shown (their indexes in cols, in order) and each
// one's width, for rows (one cell per column) within width; width <= 0 is
// no limit. A table that cannot fit even with every droppable column out
// and every cut made is returned that way, wider than width.
func Fit(cols []Column, rows [][]string, width int) (shown, widths []int) {
	natural := make([]int, len(cols))
	for i, c := range cols {
		natural[i] = utf8.RuneCountInString(c.Header)
		for _, r := range rows {
			if i < len(r) {
				natural[i] = max(natural[i], utf8.RuneCountInString(r[i]))
			}
		}
	}
	for i := range cols {
		shown = append(shown, i)
	}
	for {
		widths = make([]int, len(shown))
		for j, i := range shown {
			widths[j] = natural[i]
		}
		if width <= 0 || cut(cols, shown, widths, width) {
			return shown, widths
		}
		drop := -1
		for j, i := range shown {
			if cols[i].Drop > 0 && (drop < 0 || cols[i].Drop > cols[shown[drop]].Drop) {
				drop = j
			}
		}
		if drop < 0 {
			return shown, widths
		}
		shown = append(shown[:drop:drop], shown[drop+1:]...)
	}
}

// cut narrows the widest cuttable column, one character at a time, until
// the table fits width; it reports whether it does.
func cut(cols []Column, shown, widths []int, width int) bool {
	total := len(Sep) * (len(shown) - 1)
	for _, w := range widths {
		total += w
	}
	for total > width {
		widest := -1
		for j, i := range shown {
			if c := cols[i]; c.Min > 0 && widths[j] > max(c.Min, utf8.RuneCountInString(c.Header)) &&
				(widest < 0 || widths[j] > widths[widest]) {
				widest = j
			}
		}
		if widest < 0 {
			return false
		}
		widths[widest]--
		total--
	}
	return true
}

// Clip cuts s to n characters, the last an ellipsis when it had to cut.
func Clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:n-1]), " ") + "…"
}

// Write writes the header and rows of the columns that fit width (see
// Fit), each value cut to its column and padded; lines carry no trailing
// spaces.
func Write(w io.Writer, cols []Column, rows [][]string, width int) error {
	shown, widths := Fit(cols, rows, width)
	header := make([]string, len(cols))
	for i, c := range cols {
		header[i] = c.Header
	}
	var b strings.Builder
	for _, r := range append([][]string{header}, rows...) {
		line := make([]string, len(shown))
		for j, i := range shown {
			cell := ""
			if i < len(r) {
				cell = r[i]
			}
			cell = Clip(cell, widths[j])
			line[j] = cell + strings.Repeat(" ", widths[j]-utf8.RuneCountInString(cell))
		}
		b.WriteString(strings.TrimRight(strings.Join(line, Sep), " "))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}
