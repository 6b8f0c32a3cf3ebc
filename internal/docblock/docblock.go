// Package docblock keeps a generated block of a documentation file — the
// text between a begin and an end marker, such as a table a test computes
// or a file the binary embeds — in step with what generates it: Replace
// rewrites the block, Check fails a test when the block is stale and, when
// the test's update flag is set, rewrites it instead.
//
// A leaf on the standard library (it does not import testing: Check takes
// the two methods of testing.TB it uses), so the tests of any package and
// the binary's own commands can share it.
package docblock

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

// span is where the body between begin and end stands in doc: doc[i:k].
// The first begin and the first end count; it is an error if either is
// missing or the end does not follow the begin.
func span(doc []byte, begin, end string) (i, k int, err error) {
	b := bytes.Index(doc, []byte(begin))
	if b < 0 {
		return 0, 0, fmt.Errorf("no begin marker %q", strings.TrimSpace(begin))
	}
	k = bytes.Index(doc, []byte(end))
	if k < 0 {
		return 0, 0, fmt.Errorf("no end marker %q", strings.TrimSpace(end))
	}
	i = b + len(begin)
	if k < i {
		return 0, 0, fmt.Errorf("the end marker %q stands before the begin marker %q", strings.TrimSpace(end), strings.TrimSpace(begin))
	}
	return i, k, nil
}

// Body is what stands between begin and end in doc (the markers excluded).
func Body(doc []byte, begin, end string) ([]byte, error) {
	i, k, err := span(doc, begin, end)
	if err != nil {
		return nil, err
	}
	return doc[i:k], nil
}

// Replace returns doc with what stands between begin and end replaced by
// body; the markers and everything outside them are kept. Its error names
// the marker that is missing or out of order.
func Replace(doc []byte, begin, end string, body []byte) ([]byte, error) {
	i, k, err := span(doc, begin, end)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, i+len(body)+len(doc)-k)
	out = append(out, doc[:i]...)
	out = append(out, body...)
	return append(out, doc[k:]...), nil
}

// T is the part of testing.TB that Check uses.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Check is a test's half: the block between begin and end of the file at
// path must be want. With update it rewrites the block to want instead.
// On a mismatch it fails with regen, the command that rewrites the block
// (e.g. "go test ./agents/policy -run TestDefaultPolicyInDocs
// -update-docs"), and what the block should hold.
func Check(t T, path, begin, end string, want []byte, update bool, regen string) {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v", err)
		return
	}
	if update {
		out, err := Replace(doc, begin, end, want)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
			return
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatalf("%v", err)
		}
		return
	}
	got, err := Body(doc, begin, end)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: the block after %q is stale; regenerate it with\n\n\t%s\n\nIt should read:\n%s", path, strings.TrimSpace(begin), regen, want)
	}
}
