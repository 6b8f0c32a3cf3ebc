package result

import (
	"bytes"
	"encoding/json"
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const baselineDir = "../../../baselines/ablation"

func loadBaseline(t *testing.T) (*Report, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(baselineDir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("the committed report.json does not decode: %v", err)
	}
	return &r, b
}

// The committed result (written by loom-eval ablate --out before the format
// moved here) decodes with no unknown field and encodes back to the same
// bytes, and its Markdown and chart are the committed report.md and
// ndcg.svg: the format and its renderings did not change.
func TestTheCommittedResultRoundTripsByteForByte(t *testing.T) {
	r, want := loadBaseline(t)
	var got bytes.Buffer
	if err := r.WriteJSON(&got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("report.json re-encoded differs (%d bytes, want %d)", got.Len(), len(want))
	}
	for name, write := range map[string]func(*bytes.Buffer) error{
		"report.md": func(b *bytes.Buffer) error { return r.WriteMarkdown(b) },
		"ndcg.svg":  func(b *bytes.Buffer) error { return r.WriteSVG(b) },
	} {
		want, err := os.ReadFile(filepath.Join(baselineDir, name))
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := write(&got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s rendered from report.json differs from the committed one", name)
		}
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, m := range r.Modes {
		if !strings.Contains(text.String(), "\n"+m+" ") {
			t.Errorf("text report lacks a row for %s", m)
		}
	}
}

func TestTheChartEscapesWhatTheFileSays(t *testing.T) {
	r := &Report{Dataset: "<b>d</b>", Modes: []string{`<script>alert(1)</script>`}, Variants: []Variant{Excluded},
		Rows: []Row{{Variant: Excluded, Mode: `<script>alert(1)</script>`, Kind: "gold", N: 1, Metrics: map[string]Stat{"ndcg@10": {Mean: 0.5, Lo: 0.4, Hi: 0.6}}}}}
	var b strings.Builder
	if err := r.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "<script") || strings.Contains(b.String(), "<b>") {
		t.Errorf("unescaped report strings in the SVG:\n%s", b.String())
	}
	// No modes: an empty chart, not a panic.
	if err := (&Report{Variants: []Variant{Excluded}, Rows: r.Rows}).WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
}

// The format stands alone: readers (the web UI) link it without the search
// index, so it imports the standard library only.
func TestTheFormatImportsOnlyTheStandardLibrary(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") {
			t.Errorf("imports %s", imp)
		}
	}
}
