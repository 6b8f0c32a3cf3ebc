package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeSecurityTable rewrites only what stands between the security-eval
// markers (twice the same), and a doc without them is a usage error that
// names the file and the missing marker, with the file left alone.
func TestWriteSecurityTableBetweenMarkers(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "policy.md")
	before := "# Policy\n\n" + secevBegin + "\nold table\n" + secevEnd + "\n\nAfter.\n"
	if err := os.WriteFile(doc, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "# Policy\n\n" + secevBegin + "\n\n| new |\n" + secevEnd + "\n\nAfter.\n"
	for range 2 {
		if err := writeSecurityTable(doc, "| new |"); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(doc); string(b) != want {
			t.Fatalf("the doc reads:\n%s\nwant:\n%s", b, want)
		}
	}

	bare := filepath.Join(t.TempDir(), "bare.md")
	if err := os.WriteFile(bare, []byte("# No markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := writeSecurityTable(bare, "| new |")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitUsage || !strings.Contains(err.Error(), "security-eval: "+bare+": no begin marker") {
		t.Fatalf("a doc without markers: %v; want a usage error naming the file and the marker", err)
	}
	if b, _ := os.ReadFile(bare); string(b) != "# No markers\n" {
		t.Fatalf("the doc without markers was written:\n%s", b)
	}
}
