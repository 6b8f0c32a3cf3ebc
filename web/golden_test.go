package web

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden HTML files in testdata/")

// TestSpanPanelGoldenHTML pins the span panel's markup for a span whose
// client-sent strings carry markup: the file shows exactly how each is
// escaped. Regenerate with go test ./web -run Golden -update.
func TestSpanPanelGoldenHTML(t *testing.T) {
	spans := hostileTrace()
	for _, tc := range []struct {
		file string
		i    int
	}{{"span_panel_root.golden.html", 0}, {"span_panel_chat.golden.html", 1}, {"span_panel_tool.golden.html", 2}} {
		var buf bytes.Buffer
		if err := SpanPanel(spans[tc.i].TraceID, &spans[tc.i], 123.5).Render(context.Background(), &buf); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", tc.file)
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./web -run Golden -update)", err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s differs from the rendered panel (review, then -update):\n%s", path, buf.String())
		}
	}
}
