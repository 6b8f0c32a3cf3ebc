package grade

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The comparison of a solution's result with the expected value is
// Python's == on plain values, computed in Go: it is held to Python's own
// answer on pairs of values encoded by loomwork_values.py itself.
func TestValuesEqualAgreesWithPython(t *testing.T) {
	if _, err := os.Stat(Python); err != nil {
		t.Fatalf("%s: %v (the code graders need it)", Python, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "loomwork_values.py"), values, 0o644); err != nil {
		t.Fatal(err)
	}
	prog := `import json, sys
sys.path.insert(0, sys.argv[1])
import loomwork_values as V
nan = float("nan")
vals = [None, True, False, 0, 1, 2, -1, 2.0, 1.0, 0.0, -0.0, 0.5, 2**53, 2**53 + 1, float(2**53), 10**30, 1e30,
        float("inf"), -float("inf"), nan, "", "a", "1", b"", b"a", [], [1], [1.0], [True], (1,), (), [1, 2], [2, 1],
        {1, 2}, {2, 1}, frozenset({1, 2}), {1.0, 2}, set(), {}, {"a": 1}, {"a": 1.0}, {1: "a"}, {1.0: "a"}, {True: "a"},
        {"a": [1, {2}]}, {"a": [1, {2.0}]}, [[1, [2]], (3,)], [[1, [2]], [3]], [nan]]
out = []
for a in vals:
    for b in vals:
        out.append([V.encode(a), V.encode(b), a == b])
print(json.dumps(out))
`
	cmd := exec.Command(Python, "-I", "-c", prog, dir)
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var pairs [][3]json.RawMessage
	if err := json.Unmarshal(stdout, &pairs); err != nil {
		t.Fatal(err)
	}
	for _, p := range pairs {
		a, err := decodeValue(p[0])
		if err != nil {
			t.Fatalf("%s: %v", p[0], err)
		}
		b, err := decodeValue(p[1])
		if err != nil {
			t.Fatalf("%s: %v", p[1], err)
		}
		var want bool
		if err := json.Unmarshal(p[2], &want); err != nil {
			t.Fatal(err)
		}
		// Python's list == short-cuts on identity, so [nan] == [nan] is
		// True there for one object; a result is never the same object as
		// the expected value, so NaN equals nothing here.
		if strings.Contains(string(p[0]), "nan") && strings.Contains(string(p[1]), "nan") {
			want = false
		}
		// A bool is never a number here (True == 1 in Python): a task that
		// wants a count must not be answered with True.
		if strings.Contains(string(p[0]), `"bool"`) != strings.Contains(string(p[1]), `"bool"`) {
			want = false
		}
		if got := valuesEqual(a, b); got != want {
			t.Errorf("%s == %s: Go says %v, Python %v", p[0], p[1], got, want)
		}
	}
	if len(pairs) < 2000 {
		t.Fatalf("%d pairs compared", len(pairs))
	}
}

func TestReadResultsIsStrict(t *testing.T) {
	good := resultPrefix + `{"imported":true}` + "\n" + resultPrefix + `{"i":0,"value":1,"shown":"1"}` + "\n" + resultPrefix + `{"done":1}` + "\n"
	if rs, tamper := readResults(good); tamper != "" || len(rs) != 3 {
		t.Fatalf("the driver's own lines: %v %q", rs, tamper)
	}
	for name, stdout := range map[string]string{
		"a line of its own":     "hello\n" + good,
		"an unknown field":      resultPrefix + `{"imported":true,"passed":true}` + "\n",
		"two objects on a line": resultPrefix + `{"imported":true}{"done":0}` + "\n",
		"not JSON":              resultPrefix + `{` + "\n",
	} {
		if _, tamper := readResults(stdout); tamper == "" {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzDecodeValue: a value decodeValue accepts equals itself (unless it
// holds a NaN), equality is symmetric, and its JSON round trip decodes to
// an equal value; nothing it is given makes it panic.
func FuzzDecodeValue(f *testing.F) {
	for _, s := range []string{`null`, `1`, `"a"`, `["bool",true]`, `["float","nan"]`, `["float","1e400"]`, `["list",[1,["tuple",[2]]]]`,
		`["set",[1,["float","1.0"]]]`, `["dict",[[1,"a"],[["float","1.0"],"b"]]]`, `["bytes","zz"]`, `1.5`, `["list"]`, `[]`, `{"a":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, err := decodeValue(raw)
		if err != nil {
			return
		}
		nan := strings.Contains(string(raw), "nan") || strings.Contains(strings.ToLower(string(raw)), "nan")
		if !nan && !valuesEqual(v, v) {
			t.Fatalf("%s does not equal itself", raw)
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: re-encode: %v", raw, err)
		}
		w, err := decodeValue(again)
		if err != nil {
			t.Fatalf("%s re-encoded as %s does not decode: %v", raw, again, err)
		}
		if valuesEqual(v, w) != valuesEqual(w, v) {
			t.Fatalf("%s: equality is not symmetric", raw)
		}
		if !nan && !valuesEqual(v, w) {
			t.Fatalf("%s and its round trip %s differ", raw, again)
		}
	})
}

// FuzzReadResults: the result channel's reader never panics, and when it
// accepts a stdout every non-empty line of it was a result line.
func FuzzReadResults(f *testing.F) {
	f.Add(resultPrefix + `{"imported":true}` + "\n" + resultPrefix + `{"i":0,"value":1}` + "\n" + resultPrefix + `{"done":1}`)
	f.Add("LOOMWORK-GRADE x {}\n")
	f.Add(resultPrefix + `{"i":-1,"raised":["a"]}`)
	f.Fuzz(func(t *testing.T, stdout string) {
		rs, tamper := readResults(stdout)
		if tamper != "" {
			return
		}
		n := 0
		for _, line := range strings.Split(stdout, "\n") {
			if line == "" {
				continue
			}
			n++
			if !strings.HasPrefix(line, resultPrefix) {
				t.Fatalf("accepted a line that is not a result: %q", line)
			}
		}
		if n != len(rs) {
			t.Fatalf("%d lines, %d results", n, len(rs))
		}
	})
}
