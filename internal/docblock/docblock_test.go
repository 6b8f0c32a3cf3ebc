package docblock_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/internal/docblock"
)

const begin, end = "<!-- table:begin -->\n", "<!-- table:end -->"

const doc = "# Title\n\nBefore.\n\n" + begin + "| old |\n" + end + "\n\nAfter.\n"

// Replace rewrites only the body; doing it twice changes nothing more.
func TestReplace(t *testing.T) {
	body := []byte("| new |\n| row |\n")
	once, err := docblock.Replace([]byte(doc), begin, end, body)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Title\n\nBefore.\n\n" + begin + "| new |\n| row |\n" + end + "\n\nAfter.\n"
	if string(once) != want {
		t.Fatalf("Replace:\n%s\nwant:\n%s", once, want)
	}
	twice, err := docblock.Replace(once, begin, end, body)
	if err != nil || string(twice) != string(once) {
		t.Fatalf("Replace again: %v\n%s", err, twice)
	}
	if got, err := docblock.Body(once, begin, end); err != nil || string(got) != string(body) {
		t.Fatalf("Body: %q, %v", got, err)
	}
	empty, err := docblock.Replace(once, begin, end, nil)
	if err != nil || string(empty) != "# Title\n\nBefore.\n\n"+begin+end+"\n\nAfter.\n" {
		t.Fatalf("Replace with nothing: %v\n%s", err, empty)
	}
}

// The error names the marker that is missing or out of order.
func TestReplaceMarkers(t *testing.T) {
	for _, c := range []struct{ name, doc, begin, end, want string }{
		{"missing begin", "text\n" + end + "\n", begin, end, `no begin marker "<!-- table:begin -->"`},
		{"missing end", begin + "text\n", begin, end, `no end marker "<!-- table:end -->"`},
		{"neither", "text\n", begin, end, `no begin marker "<!-- table:begin -->"`},
		{"end before begin", end + "\ntext\n" + begin, begin, end, `the end marker "<!-- table:end -->" stands before the begin marker "<!-- table:begin -->"`},
		// An end found inside the begin marker makes no block either.
		{"overlapping", "<!-- a -->", "<!-- a -->", "a -->", `the end marker "a -->" stands before the begin marker "<!-- a -->"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, e := c.begin, c.end
			out, err := docblock.Replace([]byte(c.doc), b, e, []byte("x"))
			if err == nil || err.Error() != c.want {
				t.Fatalf("Replace: %q, %v; want the error %q", out, err, c.want)
			}
			if _, err := docblock.Body([]byte(c.doc), b, e); err == nil || err.Error() != c.want {
				t.Fatalf("Body: %v; want the error %q", err, c.want)
			}
		})
	}
}

// fakeT records what Check reports.
type fakeT struct{ fatal []string }

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.fatal = append(f.fatal, fmt.Sprintf(format, args...))
}

func writeDoc(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const regen = "go test ./somewhere -run TestTableInDocs -update-docs"

// Check passes on an up-to-date block, fails on a stale one naming the
// command that regenerates it, and with update rewrites the block.
func TestCheck(t *testing.T) {
	path := writeDoc(t)
	var ft fakeT
	docblock.Check(&ft, path, begin, end, []byte("| old |\n"), false, regen)
	if ft.fatal != nil {
		t.Fatalf("an up-to-date block failed: %q", ft.fatal)
	}

	docblock.Check(&ft, path, begin, end, []byte("| new |\n"), false, regen)
	if len(ft.fatal) != 1 || !strings.Contains(ft.fatal[0], "\t"+regen+"\n") || !strings.HasSuffix(ft.fatal[0], "| new |\n") ||
		!strings.Contains(ft.fatal[0], path) {
		t.Fatalf("a stale block: %q; want one failure naming the file, %q and the block", ft.fatal, regen)
	}
	if b, _ := os.ReadFile(path); string(b) != doc {
		t.Fatal("Check without update wrote the file")
	}

	ft = fakeT{}
	docblock.Check(&ft, path, begin, end, []byte("| new |\n"), true, regen)
	docblock.Check(&ft, path, begin, end, []byte("| new |\n"), false, regen)
	if ft.fatal != nil {
		t.Fatalf("after update: %q", ft.fatal)
	}
	if b, _ := os.ReadFile(path); string(b) != strings.Replace(doc, "| old |", "| new |", 1) {
		t.Fatalf("update wrote:\n%s", b)
	}
}

// Check fails, without writing, on a file without the markers and on a
// file that is not there.
func TestCheckFailures(t *testing.T) {
	path := writeDoc(t)
	for _, update := range []bool{false, true} {
		var ft fakeT
		docblock.Check(&ft, path, "<!-- other:begin -->", end, []byte("x"), update, regen)
		if len(ft.fatal) != 1 || !strings.Contains(ft.fatal[0], `no begin marker "<!-- other:begin -->"`) {
			t.Fatalf("update %v, no begin marker: %q", update, ft.fatal)
		}
		ft = fakeT{}
		docblock.Check(&ft, filepath.Join(t.TempDir(), "missing.md"), begin, end, []byte("x"), update, regen)
		if len(ft.fatal) != 1 {
			t.Fatalf("update %v, no file: %q", update, ft.fatal)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != doc {
		t.Fatal("a failed Check wrote the file")
	}
}
