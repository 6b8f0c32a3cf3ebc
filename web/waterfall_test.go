package web

import (
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/scorer/rollup"
)

func TestTopCriticalMatchesAFullSort(t *testing.T) {
	var r rollup.Rollup
	for i := 0; i < 500; i++ {
		r.CriticalPath = append(r.CriticalPath, rollup.PathEntry{SpanID: itoa64(int64(i)), SelfMS: float64((i * 7919) % 97)})
	}
	want := append([]rollup.PathEntry(nil), r.CriticalPath...)
	sort.SliceStable(want, func(i, j int) bool { return want[i].SelfMS > want[j].SelfMS })
	for _, n := range []int{1, 12, 499, 500, 600} {
		got := topCritical(r, n)
		w := want[:min(n, len(want))]
		if len(got) != len(w) {
			t.Fatalf("n=%d: %d entries, want %d", n, len(got), len(w))
		}
		for i := range w {
			if got[i] != w[i] {
				t.Fatalf("n=%d: entry %d is %+v, want %+v", n, i, got[i], w[i])
			}
		}
	}
}

func TestAxisTicksAreRoundAndReadable(t *testing.T) {
	for _, tc := range []struct {
		total time.Duration
		want  []string
	}{
		{900 * time.Millisecond, []string{"0", "100 ms", "200 ms", "300 ms", "400 ms", "500 ms", "600 ms", "700 ms", "800 ms", "900 ms"}},
		{3600 * time.Millisecond, []string{"0", "0.5 s", "1.0 s", "1.5 s", "2.0 s", "2.5 s", "3.0 s", "3.5 s"}},
		{2500 * time.Millisecond, []string{"0", "0.5 s", "1.0 s", "1.5 s", "2.0 s", "2.5 s"}},
		{75 * time.Microsecond, []string{"0", "10 µs", "20 µs", "30 µs", "40 µs", "50 µs", "60 µs", "70 µs"}},
		{600 * time.Nanosecond, []string{"0", "100 ns", "200 ns", "300 ns", "400 ns", "500 ns", "600 ns"}},
		{time.Hour, []string{"0", "10 min", "20 min", "30 min", "40 min", "50 min", "60 min"}},
		{12 * time.Second, []string{"0", "2 s", "4 s", "6 s", "8 s", "10 s", "12 s"}},
		{1500 * time.Microsecond, []string{"0", "0.2 ms", "0.4 ms", "0.6 ms", "0.8 ms", "1.0 ms", "1.2 ms", "1.4 ms"}},
		{90 * time.Second, []string{"0", "10 s", "20 s", "30 s", "40 s", "50 s", "60 s", "70 s", "80 s", "90 s"}},
	} {
		a := axisFor(tc.total)
		var got []string
		for i, tk := range a.Ticks {
			got = append(got, tk.Label)
			if i > 0 && math.Abs(tk.Pct-a.Ticks[i-1].Pct-a.StepPct) > 1e-6 {
				t.Errorf("%v: tick %d at %.3f%%, not one step (%.3f%%) after the last", tc.total, i, tk.Pct, a.StepPct)
			}
			if tk.Pct > 100+1e-9 {
				t.Errorf("%v: tick %q past the end (%.3f%%)", tc.total, tk.Label, tk.Pct)
			}
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%v: ticks %q, want %q", tc.total, got, tc.want)
		}
	}
	if a := axisFor(0); len(a.Ticks) != 1 {
		t.Errorf("an instant trace: %+v", a)
	}
}

// A side label is placed from the bar's edge outward and capped to the
// room on that side, so it can never cover its bar; with no room on either
// side there is none.
func TestLabelsStayOffTheirBars(t *testing.T) {
	for _, tc := range []struct {
		off, width float64
		want       string
	}{{0, 10, "right"}, {80, 20, "left"}, {40, 5, "right"}, {60, 5, "left"}, {3, 94, ""}, {0, 100, ""}, {95, 0, "left"}} {
		r := Row{OffsetPct: tc.off, WidthPct: tc.width, Detail: "gpt-4o · 800→120 tok"}
		if got := labelPlacement(r); got != tc.want {
			t.Errorf("bar at %.0f%%+%.0f%%: label %q, want %q", tc.off, tc.width, got, tc.want)
		}
	}
}

// The service colours are graphics the eye must tell from the white track
// and from the selected row (WCAG 2.1 1.4.11: 3:1), and the dim text on
// the page meets the text minimum (4.5:1).
func TestServiceColoursContrast(t *testing.T) {
	css, err := os.ReadFile("static/app.css")
	if err != nil {
		t.Fatal(err)
	}
	svc := regexp.MustCompile(`\.svc-(\d+)\{--svc:(#[0-9a-f]{6})\}`).FindAllStringSubmatch(string(css), -1)
	if len(svc) != svcPalette {
		t.Fatalf("app.css defines %d service colours, svcPalette says %d", len(svc), svcPalette)
	}
	for _, m := range svc {
		for _, bg := range []string{"#ffffff", "#e3ebfd"} { // the track, a selected row
			if c := contrast(m[2], bg); c < 3 {
				t.Errorf("service colour %s (.svc-%s) on %s: contrast %.2f, want ≥ 3", m[2], m[1], bg, c)
			}
		}
	}
	for _, tc := range []struct{ fg, bg string }{{"#6b7385", "#ffffff"}, {"#3d4555", "#f1f3f7"}, {"#1d3f9c", "#e7edfb"}, {"#1b5e2a", "#e3f3e7"}, {"#6e4500", "#fff1dc"}, {"#3d4555", "#eceef1"}} {
		if !strings.Contains(string(css), tc.fg) {
			t.Errorf("app.css no longer uses %s on %s: update this test", tc.fg, tc.bg)
		}
		if c := contrast(tc.fg, tc.bg); c < 4.5 {
			t.Errorf("text %s on %s: contrast %.2f, want ≥ 4.5", tc.fg, tc.bg, c)
		}
	}
}

// contrast is the WCAG 2.1 contrast ratio of two #rrggbb colours.
func contrast(a, b string) float64 {
	lum := func(hex string) float64 {
		var rgb [3]float64
		for i := range rgb {
			v, _ := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
			c := float64(v) / 255
			if c <= 0.04045 {
				rgb[i] = c / 12.92
			} else {
				rgb[i] = math.Pow((c+0.055)/1.055, 2.4)
			}
		}
		return 0.2126*rgb[0] + 0.7152*rgb[1] + 0.0722*rgb[2]
	}
	la, lb := lum(a), lum(b)
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}
