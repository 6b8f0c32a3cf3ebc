package datasets

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func strp(s string) *string { return &s }

func versionCases() []Case {
	return []Case{
		{ID: "refund-annual", Task: "Can I get a refund on an annual plan? <b>&", ExpectedTools: []string{"search_docs"}, Tags: []string{TagFromTracesForTest}},
		{ID: "reset-password", Task: "How do I reset my password?",
			Graders: Graders{{Type: GraderContains, Value: strp("Settings"), IgnoreCase: true}}},
	}
}

// TagFromTracesForTest is a tag as the trace-to-case path writes it.
const TagFromTracesForTest = "from-traces"

func commit(t *testing.T, r Registry, name string, ch Change) Version {
	t.Helper()
	v, err := r.Commit(name, ch)
	if err != nil {
		t.Fatalf("commit %s on %d: %v", name, ch.Parent, err)
	}
	return v
}

func TestRegistryCommitsVersionsThatReadBackAsCommitted(t *testing.T) {
	r := Registry{Dir: t.TempDir()}
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	v1 := commit(t, r, "support", Change{Cases: versionCases(), Author: "ana", Note: "first cut",
		Sources: map[string][]string{"refund-annual": {"bb", "aa"}}, Now: now})
	if v1.Number != 1 || v1.Parent != 0 || v1.Cases != 2 || !reflect.DeepEqual(v1.Added, []string{"refund-annual", "reset-password"}) {
		t.Fatalf("v1 = %+v", v1)
	}
	if !reflect.DeepEqual(v1.Sources["refund-annual"], []string{"aa", "bb"}) {
		t.Fatalf("sources %v, want sorted trace ids", v1.Sources)
	}
	data, err := os.ReadFile(r.CasesPath("support", 1))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != v1.SHA256 {
		t.Fatalf("recorded digest %s is not the file's", v1.SHA256)
	}
	if !bytes.Contains(data, []byte("<b>&")) {
		t.Fatalf("cases.jsonl escapes HTML characters:\n%s", data)
	}
	got, cases, err := r.Open("support", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, v1) {
		t.Fatalf("opened %+v, committed %+v", got, v1)
	}
	want := versionCases()
	for i := range want {
		want[i].Line = i + 1
	}
	if !reflect.DeepEqual(cases, want) {
		t.Fatalf("cases read back differ:\n got %+v\nwant %+v", cases, want)
	}

	// Version 2: one added, one changed, one removed.
	next := []Case{cases[0], {ID: "cancel", Task: "How do I cancel?"}}
	next[0].Task = "Refund on an annual plan?"
	v2 := commit(t, r, "support", Change{Parent: 1, Cases: next, Now: now.Add(time.Hour)})
	if v2.Number != 2 || v2.Parent != 1 || !reflect.DeepEqual(v2.Added, []string{"cancel"}) ||
		!reflect.DeepEqual(v2.Changed, []string{"refund-annual"}) || !reflect.DeepEqual(v2.Removed, []string{"reset-password"}) {
		t.Fatalf("v2 = %+v", v2)
	}
	// Version 1 is unchanged by version 2.
	if _, old, err := r.Open("support", 1); err != nil || len(old) != 2 || old[0].Task != want[0].Task {
		t.Fatalf("version 1 after version 2: %v %+v", err, old)
	}
	vs, err := r.Versions("support")
	if err != nil || len(vs) != 2 || vs[0].Number != 1 || vs[1].Number != 2 {
		t.Fatalf("versions %+v, %v", vs, err)
	}
}

func TestRegistryRefusesAStaleParentAndWritesNothing(t *testing.T) {
	r := Registry{Dir: t.TempDir()}
	commit(t, r, "support", Change{Cases: versionCases()})
	commit(t, r, "support", Change{Parent: 1, Cases: versionCases()[:1]})
	_, err := r.Commit("support", Change{Parent: 1, Cases: versionCases()[1:]})
	var se *StaleParentError
	if !errors.Is(err, ErrStaleParent) || !errors.As(err, &se) || se.Latest != 2 || se.Parent != 1 {
		t.Fatalf("commit on a stale parent: %v", err)
	}
	// A new dataset must say so: parent 0 on a dataset that exists is stale too.
	if _, err := r.Commit("support", Change{Cases: versionCases()}); !errors.Is(err, ErrStaleParent) {
		t.Fatalf("commit of a 'new' dataset over an existing one: %v", err)
	}
	if _, err := r.Commit("support", Change{Parent: 2, Cases: versionCases()[:1]}); !errors.Is(err, ErrNoChange) {
		t.Fatalf("a commit that changes nothing: %v", err)
	}
	if n, _ := r.Latest("support"); n != 2 {
		t.Fatalf("latest %d after refused commits, want 2", n)
	}
	assertNoTemp(t, filepath.Join(r.Dir, "support"))
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".commit-") {
			t.Errorf("temporary folder %s left behind", e.Name())
		}
	}
}

func TestRegistryConcurrentCommitsOnOneParentOneWins(t *testing.T) {
	r := Registry{Dir: t.TempDir()}
	commit(t, r, "support", Change{Cases: versionCases()})
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs := append(versionCases(), Case{ID: "extra", Task: strings.Repeat("x", i+1)})
			_, errs[i] = r.Commit("support", Change{Parent: 1, Cases: cs})
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrStaleParent):
			t.Errorf("committer %d: %v, want a stale parent", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d committers won on one parent, want exactly 1", won)
	}
	vs, err := r.Versions("support")
	if err != nil || len(vs) != 2 {
		t.Fatalf("versions after the race: %d, %v", len(vs), err)
	}
	// The winner's record and its cases agree.
	if _, _, err := r.Open("support", 2); err != nil {
		t.Fatal(err)
	}
	assertNoTemp(t, filepath.Join(r.Dir, "support"))
}

func TestRegistryRefusesBadInputNamingIt(t *testing.T) {
	r := Registry{Dir: t.TempDir()}
	for _, name := range []string{"", "Support", "../x", "a/b", ".hidden", "a..b", strings.Repeat("a", 65)} {
		if _, err := r.Commit(name, Change{Cases: versionCases()}); err == nil || !strings.Contains(err.Error(), "dataset name") {
			t.Errorf("name %q: %v", name, err)
		}
	}
	cases := []struct {
		name  string
		cases []Case
		want  string
	}{
		{"empty", nil, "at least one case"},
		{"no task", []Case{{ID: "a"}}, `"task"`},
		{"duplicate id", []Case{{ID: "a", Task: "t"}, {ID: "a", Task: "u"}}, "duplicate"},
		{"escaping grader file", []Case{{ID: "a", Task: "t", Graders: Graders{{Type: GraderCode, File: "../../etc/x.py", Source: []byte("x")}}}}, "inside the case file's folder"},
		{"unloaded grader", []Case{{ID: "a", Task: "t", Graders: Graders{{Type: GraderCode, File: "g.py"}}}}, "not loaded"},
	}
	for _, c := range cases {
		_, err := r.Commit("support", Change{Cases: c.cases})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	if names, _ := r.Names(); len(names) != 0 {
		t.Fatalf("refused commits left datasets %v", names)
	}
	if _, _, err := r.Open("nothing", 0); !errors.Is(err, ErrDatasetNotFound) {
		t.Fatalf("open of a missing dataset: %v", err)
	}
	commit(t, r, "support", Change{Cases: versionCases()})
	if _, _, err := r.Open("support", 7); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("open of a missing version: %v", err)
	}
}

func TestRegistryDetectsAnEditedVersion(t *testing.T) {
	r := Registry{Dir: t.TempDir()}
	commit(t, r, "support", Change{Cases: versionCases()})
	p := r.CasesPath("support", 1)
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, bytes.Replace(b, []byte("password"), []byte("passw0rd"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Open("support", 1); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("open of an edited version: %v", err)
	}
	// Nor can a change be made on it.
	if _, err := r.Commit("support", Change{Parent: 1, Cases: versionCases()[:1]}); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("commit on an edited version: %v", err)
	}
}

func TestRegistryVersionCarriesItsCodeGraders(t *testing.T) {
	r := Registry{Dir: t.TempDir()}
	src := []byte("def grade(transcript, outcome):\n    return {'passed': True}\n")
	cs := []Case{{ID: "a", Task: "t", Graders: Graders{{Type: GraderCode, File: "graders/a.py", Source: src}}}}
	v := commit(t, r, "code", Change{Cases: cs})
	if len(v.Files) != 1 || v.Files[0].Path != "graders/a.py" {
		t.Fatalf("files %+v", v.Files)
	}
	// The version folder stands alone: LoadCases on its cases.jsonl finds the grader.
	got, err := LoadCases(r.CasesPath("code", 1))
	if err != nil || !bytes.Equal(got[0].Graders[0].Source, src) {
		t.Fatalf("LoadCases of the version: %v", err)
	}
}
