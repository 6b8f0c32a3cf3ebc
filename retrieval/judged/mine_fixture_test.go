package judged

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func mineFixture(t *testing.T) *MineResult {
	t.Helper()
	dir := "testdata/mine"
	issues, err := ReadIssues(filepath.Join(dir, "issues.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	maint, err := ReadMaintainers(filepath.Join(dir, "maintainers.txt"))
	if err != nil {
		t.Fatal(err)
	}
	aliases, err := ReadAliases(filepath.Join(dir, "aliases.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Mine(MineConfig{DocsDir: filepath.Join(dir, "docs"), DocsURLPrefix: "https://example.org/proj/",
		Maintainers: maint, Issues: issues, Aliases: aliases, Skip: []string{"contributing/", "blog/"}, IDPrefix: "px"})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestMineFindsGoldAndSilverAsSourceMdDescribes(t *testing.T) {
	res := mineFixture(t)
	var b bytes.Buffer
	for _, j := range res.Qrels {
		line, _ := jsonMarshalNoEscape(j)
		b.Write(line)
		b.WriteByte('\n')
	}
	golden := filepath.Join("testdata", "mine", "want_qrels.jsonl")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if b.String() != string(want) {
		t.Errorf("mined qrels differ from %s:\ngot:\n%s\nwant:\n%s", golden, b.String(), want)
	}
	// The behaviours the golden file encodes, spelled out.
	byIssue := map[int][]Judgement{}
	for _, j := range res.Qrels {
		byIssue[j.Issue] = append(byIssue[j.Issue], j)
	}
	if js := byIssue[1]; len(js) != 1 || js[0].Kind != Gold || js[0].Anchor != "primary-color" || *js[0].AnsweredBy != "squidlike" {
		t.Errorf("issue 1 (maintainer linked the page): %+v", js)
	}
	if js := byIssue[2]; len(js) != 1 || js[0].Kind != Gold || js[0].Anchor != "line-numbers" {
		t.Errorf("issue 2 (asker linked a section, maintainer answered with the same page): %+v", js)
	}
	if len(byIssue[3]) != 0 {
		t.Errorf("issue 3: a non-maintainer's link became a judgement: %+v", byIssue[3])
	}
	if len(byIssue[4]) != 0 {
		t.Errorf("issue 4: template/root/blog links became judgements: %+v", byIssue[4])
	}
	if js := byIssue[5]; len(js) != 2 || js[0].Doc != "docs/reference/code-blocks.md" || js[0].Anchor != "" || js[1].Anchor != "primary-color" {
		t.Errorf("issue 5 (old URLs through aliases): %+v", js)
	}
	if js := byIssue[7]; len(js) != 1 || js[0].Kind != Silver || js[0].Doc != "docs/setup/changing-the-colors.md" || js[0].Anchor != "" {
		t.Errorf("issue 7 (vanished anchor, search query, text fragment): %+v", js)
	}
	if res.Gold != 4 || res.Silver != 1 || res.QueryIssues != 4 {
		t.Errorf("counts gold %d silver %d queries %d", res.Gold, res.Silver, res.QueryIssues)
	}
	reasons := map[string]bool{}
	for _, u := range res.Unresolved {
		reasons[u.Reason] = true
	}
	for _, want := range []string{"site root", "skipped prefix contributing/", "skipped prefix blog/", "not a page", "no page for setup/nowhere"} {
		if !reasons[want] {
			t.Errorf("unresolved reasons %v lack %q", reasons, want)
		}
	}
}

func TestMinedIssuesHideDocsLinksAndKeepDuplicates(t *testing.T) {
	res := mineFixture(t)
	for _, is := range res.Issues {
		if strings.Contains(is.Body, "example.org/proj") || len(is.Comments) != 0 {
			t.Errorf("issue %d still carries a docs link or comments: %q", is.Number, is.Body)
		}
		if is.Number == 6 && (len(is.DuplicateOf) != 1 || is.DuplicateOf[0] != 1) {
			t.Errorf("issue 6 duplicate_of = %v, want [1]", is.DuplicateOf)
		}
	}
	if !strings.Contains(res.Issues[1].Body, "I followed [[link]]([link]) and it fails.") {
		t.Errorf("issue 2 body = %q", res.Issues[1].Body)
	}
}

func TestMinedDatasetLoadsAsAJudgedSet(t *testing.T) {
	res := mineFixture(t)
	out := t.TempDir()
	if err := res.WriteDataset(out, "testdata/mine/docs"); err != nil {
		t.Fatal(err)
	}
	ds, err := Load(out, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Queries) != 4 || ds.Duplicates()[6][0] != 1 {
		t.Errorf("loaded %d queries, duplicates %v", len(ds.Queries), ds.Duplicates())
	}
	if _, err := ds.Corpus(); err != nil {
		t.Fatal(err)
	}
}

func TestMineConfigNamesWhatIsMissing(t *testing.T) {
	_, err := Mine(MineConfig{})
	for _, want := range []string{"docs:", "docs-url-prefix:", "maintainers:", "issues:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}
