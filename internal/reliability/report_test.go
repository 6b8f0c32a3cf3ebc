package reliability

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var reportPath = flag.String("reliability.report", "", "write the figures table into this Markdown file (relative paths are from the module root), between the figures markers")

// storeCounts is what a store holds of one run, read back after the run.
type storeCounts struct {
	Rows     uint64 // rows in the spans table
	Distinct uint64 // distinct (trace_id, span_id)
	Foreign  int    // spans that are none of the run's
}

// counts is one row's span accounting.
type counts struct {
	Sent, Acked, Stored, Duplicated, Lost, NeverStored int64
}

// tally compares what the senders sent and had acknowledged with what the
// store holds (stored: key → rows).
func tally(recs []exportRecord, stored map[uint64]int) counts {
	var c counts
	seen := make(map[uint64]bool, len(stored))
	for _, r := range recs {
		for i := range r.n {
			k := r.first + uint64(i)
			c.Sent++
			n := stored[k]
			if r.acked {
				c.Acked++
				if n == 0 {
					c.Lost++
				}
			}
			if n == 0 {
				c.NeverStored++
				continue
			}
			if !seen[k] {
				seen[k] = true
				c.Stored++
				c.Duplicated += int64(n - 1)
			}
		}
	}
	return c
}

// rowResult is one line of the figures table.
type rowResult struct {
	Row      string // as in the table, scaled
	Scale    string // how it was scaled relative to the issue
	Setup    string // serve's flags that matter, the exporter
	C        counts
	HasSpans bool // C is meaningful (raw-request rows count requests instead)
	Mem      memStats
	Tries    string // every gRPC attempt the senders made, by outcome
	Finals   string // what ExportSpans (or the raw call) returned
	Notes    []string
	Failures []string
	Took     time.Duration
}

var (
	resultsMu sync.Mutex
	results   []*rowResult
)

// newRow registers a row; check adds the failures.
func newRow(t *testing.T, row, scale, setup string) *rowResult {
	r := &rowResult{Row: row, Scale: scale, Setup: setup}
	start := time.Now()
	resultsMu.Lock()
	results = append(results, r)
	resultsMu.Unlock()
	t.Cleanup(func() {
		r.Took = time.Since(start)
		t.Logf("%s — %s\n  sent %d, acked %d, stored %d, duplicated %d, lost among acked %d, never stored %d\n  serve RSS: VmHWM %s, max sampled VmRSS %s, idle %s\n  attempts: %s\n  returned: %s\n  notes: %s\n  failures: %s",
			r.Row, r.Setup, r.C.Sent, r.C.Acked, r.C.Stored, r.C.Duplicated, r.C.Lost, r.C.NeverStored,
			mib(r.Mem.HWM), mib(r.Mem.MaxRSS), mib(r.Mem.IdleRSS), r.Tries, r.Finals, strings.Join(r.Notes, "; "), strings.Join(r.Failures, "; "))
	})
	return r
}

// check records a failed target of the issue (the test fails, the row
// goes on so every figure is measured).
func (r *rowResult) check(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	msg := fmt.Sprintf(format, args...)
	r.Failures = append(r.Failures, msg)
	t.Error(msg)
}

// open records a target of the issue this build does not meet yet: it is
// written into the row's failures column as OPEN, logged, and listed as
// open in docs/reliability.md, but does not fail the test (the issue stays
// open on it). Only for targets named in that list; every loss or
// duplication check stays a hard check.
func (r *rowResult) open(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	msg := "OPEN: " + fmt.Sprintf(format, args...)
	r.Failures = append(r.Failures, msg)
	t.Log(msg)
}

func (r *rowResult) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// spanTargets are the targets every sender row shares: zero lost among
// the acknowledged, zero duplicated.
func (r *rowResult) spanTargets(t *testing.T) {
	t.Helper()
	r.check(t, r.C.Lost == 0, "%s acknowledged spans are not in the store (want 0)", commas(r.C.Lost))
	r.check(t, r.C.Duplicated == 0, "%s spans are stored more than once (want 0)", commas(r.C.Duplicated))
	r.check(t, r.C.Acked > 0, "no span was acknowledged")
}

func mib(b int64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%d MiB", (b+(1<<19))>>20)
}

func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

const (
	markBegin = "<!-- figures: begin (written by the suite; do not edit by hand) -->"
	markEnd   = "<!-- figures: end -->"
)

// writeReport puts the table between the markers of path.
func writeReport(path string, features serveFeatures) error {
	if !filepath.IsAbs(path) {
		root, err := moduleRoot()
		if err != nil {
			return err
		}
		path = filepath.Join(root, path)
	}
	var b strings.Builder
	rev, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	dirty, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	d := ""
	if len(bytes.TrimSpace(dirty)) > 0 {
		d = " (with uncommitted changes)"
	}
	fmt.Fprintf(&b, "Measured %s on commit %s%s, %d cores (GOMAXPROCS), %s; serve with a spool: %v.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), strings.TrimSpace(string(rev)), d, runtime.GOMAXPROCS(0), runtime.Version(), features.Spool)
	b.WriteString("| row (scaled) | setup | sent | acked | stored | dup. | lost among acked | never stored | serve RSS: VmHWM · max sampled · idle | what the senders saw (every attempt) | result |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |\n")
	resultsMu.Lock()
	defer resultsMu.Unlock()
	for _, r := range results {
		if r.Tries == "" {
			r.Tries = "—"
		}
		if r.Finals == "" {
			r.Finals = "—"
		}
		num := func(n int64) string {
			if !r.HasSpans {
				return "—"
			}
			return commas(n)
		}
		res := "**pass**"
		if len(r.Failures) > 0 {
			res = "**fail**: " + strings.Join(r.Failures, "; ")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s · %s · %s | %s | %s |\n",
			cell(r.Row), cell(r.Setup), num(r.C.Sent), num(r.C.Acked), num(r.C.Stored), num(r.C.Duplicated), num(r.C.Lost), num(r.C.NeverStored),
			mib(r.Mem.HWM), mib(r.Mem.MaxRSS), mib(r.Mem.IdleRSS), cell(r.Tries), cell(res))
	}
	b.WriteString("\nPer row: how it is scaled from the issue, what ExportSpans returned to the application, and notes.\n\n")
	for _, r := range results {
		fmt.Fprintf(&b, "- **%s** (%s). Scale: %s. Returned: %s.", cell(r.Row), r.Took.Round(time.Second), r.Scale, r.Finals)
		if len(r.Notes) > 0 {
			fmt.Fprintf(&b, " %s.", strings.Join(r.Notes, "; "))
		}
		b.WriteString("\n")
	}
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	i, j := strings.Index(s, markBegin), strings.Index(s, markEnd)
	if i < 0 || j < i {
		s = strings.TrimRight(s, "\n") + "\n\n" + markBegin + "\n" + markEnd + "\n"
		i, j = strings.Index(s, markBegin), strings.Index(s, markEnd)
	}
	s = s[:i+len(markBegin)] + "\n" + b.String() + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
