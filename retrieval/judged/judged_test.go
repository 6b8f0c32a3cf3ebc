package judged

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadQrelsNamesFileLineAndField(t *testing.T) {
	cases := map[string]string{
		`{"query_id":"q-1","issue":1,"doc":"docs/a.md","anchor":"","grade":2,"kind":"gold","link":"","answered_by":"m"}` + "\n" +
			`{"query_id":"q-1","issue":1,"doc":"docs/a.md","anchor":"","grade":2,"kind":"gold","link":"","answered_by":"m"}`: "line 2: judgement (issue 1, docs/a.md#) already on line 1",
		`{"query_id":"q","issue":1,"doc":"docs/a.md","grade":1,"kind":"gold"}`:             `line 1: field "grade": 1 does not match kind "gold"`,
		`{"query_id":"q","issue":1,"doc":"docs/a.md","grade":1,"kind":"bronze"}`:           `field "kind": "bronze"`,
		`{"query_id":"q","issue":1,"doc":"../etc/passwd","grade":1,"kind":"silver"}`:       `field "doc"`,
		`{"query_id":"q","issue":1,"doc":"docs/a.md","grade":1,"kind":"silver","extra":1}`: `unknown field "extra"`,
		`{"query_id":"q","doc":"docs/a.md","grade":1,"kind":"silver"}`:                     `field "issue" is missing`,
		"\n\n{not json": "line 3:",
	}
	for body, want := range cases {
		p := filepath.Join(t.TempDir(), "qrels.jsonl")
		os.WriteFile(p, []byte(body), 0o644)
		_, err := ReadQrels(p)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("qrels %q: error %v, want file name and %q", body, err, want)
		}
	}
}

func TestReadIssuesRejectsRepeatedNumbers(t *testing.T) {
	p := filepath.Join(t.TempDir(), "issues.jsonl")
	os.WriteFile(p, []byte(`{"issue":3,"title":"a","body":""}`+"\n"+`{"issue":3,"title":"b","body":""}`+"\n"), 0o644)
	if _, err := ReadIssues(p); err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "already on line 1") {
		t.Errorf("error = %v", err)
	}
}

func TestLoadRejectsAJudgementOnAMissingPage(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "docs"), 0o755)
	os.WriteFile(filepath.Join(dir, "docs", "a.md"), []byte("# A\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "issues.jsonl"), []byte(`{"issue":1,"title":"t","body":"b"}`+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "qrels.jsonl"), []byte(`{"query_id":"q-1","issue":1,"doc":"docs/b.md","anchor":"","grade":1,"kind":"silver","link":"","answered_by":null}`+"\n"), 0o644)
	if _, err := Load(dir, ""); err == nil || !strings.Contains(err.Error(), `line 1: doc "docs/b.md" is not a Markdown page`) {
		t.Errorf("error = %v", err)
	}
}

func TestShippedDatasetLoads(t *testing.T) {
	ds, err := Load(shippedDir(t), "")
	if err != nil {
		t.Fatal(err)
	}
	gold, silver := 0, 0
	for _, q := range ds.Queries {
		gold += len(q.Gold)
		silver += len(q.Silver)
	}
	// SOURCE.md: 85 pairs over 75 query issues (17 gold), 274 issues.
	if len(ds.Qrels) != 85 || len(ds.Queries) != 75 || gold != 17 || silver != 68 || len(ds.Issues) != 274 {
		t.Errorf("pairs %d queries %d gold %d silver %d issues %d", len(ds.Qrels), len(ds.Queries), gold, silver, len(ds.Issues))
	}
}

func FuzzParseJudgement(f *testing.F) {
	f.Add([]byte(`{"query_id":"q","issue":1,"doc":"docs/a.md","anchor":"x","grade":2,"kind":"gold","link":"u","answered_by":"m"}`))
	f.Add([]byte(`{"issue":-1}`))
	f.Add([]byte(`{"query_id":"q","issue":1,"doc":"docs/a.md","grade":1,"kind":"silver"} x`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		j, err := ParseJudgement(raw)
		if err == nil && (j.Issue <= 0 || (j.Kind != Gold && j.Kind != Silver)) {
			t.Fatalf("accepted invalid judgement %+v", j)
		}
	})
}

func FuzzResolve(f *testing.F) {
	f.Add("https://example.org/proj/setup/changing-the-colors/?h=x#primary-color:~:text=y")
	f.Add("http://example.org/proj/")
	f.Add("https://example.org/proj/%zz")
	f.Fuzz(func(t *testing.T, link string) {
		r, err := NewResolver("https://example.org/proj/", nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Resolve(link)
		r.Links(link)
	})
}
