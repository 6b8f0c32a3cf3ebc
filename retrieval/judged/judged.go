// Package judged loads judged query sets — queries drawn from a project's
// closed issues, with relevance judgements mined from its tracker — and
// mines such sets for a new project from its docs and an issue export.
//
// The format is the one of the shipped mkdocs-material set (see its
// SOURCE.md): issues.jsonl (one closed issue per line), qrels.jsonl (one
// judgement per line; gold = a maintainer answered with the link, grade 2;
// silver = the asker had linked the page, grade 1), docs/ (Markdown) and an
// optional aliases.tsv mapping old URLs to current files.
package judged

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/retrieval"
)

// Comment is one comment of an issue thread (mining input).
type Comment struct {
	Author  string `json:"author"`
	Body    string `json:"body"`
	Created string `json:"created,omitempty"`
}

// Issue is one line of issues.jsonl.
type Issue struct {
	Number  int    `json:"issue"`
	URL     string `json:"url,omitempty"`
	Title   string `json:"title"`
	Body    string `json:"body"`
	State   string `json:"state,omitempty"`
	Created string `json:"created,omitempty"`
	// Author and Comments are read by mining; the shipped set has neither.
	Author   string    `json:"author,omitempty"`
	Comments []Comment `json:"comments,omitempty"`
	// DuplicateOf lists issues this one was closed as a duplicate of; the
	// retriever excludes them together with the issue itself.
	DuplicateOf []int `json:"duplicate_of,omitempty"`
}

// QueryText is what the retriever is asked: title and body.
func (i Issue) QueryText() string {
	if strings.TrimSpace(i.Body) == "" {
		return i.Title
	}
	return i.Title + "\n\n" + i.Body
}

// Kinds of judgement.
const (
	Gold   = "gold"
	Silver = "silver"
)

// Judgement is one line of qrels.jsonl.
type Judgement struct {
	QueryID    string  `json:"query_id"`
	Issue      int     `json:"issue"`
	Doc        string  `json:"doc"`
	Anchor     string  `json:"anchor"`
	Grade      int     `json:"grade"`
	Kind       string  `json:"kind"`
	Link       string  `json:"link"`
	AnsweredBy *string `json:"answered_by"`
}

// Query is a judged query: an issue and its judgements by kind.
type Query struct {
	ID     string
	Issue  int
	Text   string
	Gold   []Judgement
	Silver []Judgement
}

// Relevant returns the relevant pages for a kind ("gold", "silver", or ""
// for both) with their grades.
func (q Query) Relevant(kind string) map[string]int {
	m := map[string]int{}
	add := func(js []Judgement) {
		for _, j := range js {
			if j.Grade > m[j.Doc] {
				m[j.Doc] = j.Grade
			}
		}
	}
	if kind == "" || kind == Gold {
		add(q.Gold)
	}
	if kind == "" || kind == Silver {
		add(q.Silver)
	}
	return m
}

// Dataset is a loaded judged set.
type Dataset struct {
	Dir     string
	Issues  []Issue
	Qrels   []Judgement
	Queries []Query // sorted by issue number
	// QrelsPath is the judgements file read; QrelsSHA256 the SHA-256 of
	// its bytes (a saved reranker records which judgements trained it).
	QrelsPath   string
	QrelsSHA256 string
	docs        []retrieval.Document
}

// Load reads a judged set from dir. qrelsPath overrides dir/qrels.jsonl
// when not empty (e.g. the held-out judgements kept elsewhere).
func Load(dir, qrelsPath string) (*Dataset, error) {
	if qrelsPath == "" {
		qrelsPath = filepath.Join(dir, "qrels.jsonl")
	}
	issues, err := ReadIssues(filepath.Join(dir, "issues.jsonl"))
	if err != nil {
		return nil, err
	}
	qrels, err := ReadQrels(qrelsPath)
	if err != nil {
		return nil, err
	}
	docs, err := retrieval.LoadDocs(filepath.Join(dir, "docs"), "docs")
	if err != nil {
		return nil, fmt.Errorf("load dataset %s: %w", dir, err)
	}
	raw, err := os.ReadFile(qrelsPath)
	if err != nil {
		return nil, fmt.Errorf("load dataset %s: %w", dir, err)
	}
	sum := sha256.Sum256(raw)
	d := &Dataset{Dir: dir, Issues: issues, Qrels: qrels, QrelsPath: qrelsPath, QrelsSHA256: hex.EncodeToString(sum[:]), docs: docs}
	pages := map[string]bool{}
	for _, doc := range docs {
		pages[doc.Page] = true
	}
	byNum := map[int]Issue{}
	for _, is := range issues {
		byNum[is.Number] = is
	}
	qs := map[int]*Query{}
	for i, j := range qrels {
		where := fmt.Sprintf("%s line %d", qrelsPath, i+1)
		is, ok := byNum[j.Issue]
		if !ok {
			return nil, fmt.Errorf("%s: issue %d is not in issues.jsonl", where, j.Issue)
		}
		if !pages[j.Doc] {
			return nil, fmt.Errorf("%s: doc %q is not a Markdown page under %s/docs", where, j.Doc, dir)
		}
		q := qs[j.Issue]
		if q == nil {
			q = &Query{ID: j.QueryID, Issue: j.Issue, Text: is.QueryText()}
			qs[j.Issue] = q
		} else if q.ID != j.QueryID {
			return nil, fmt.Errorf("%s: issue %d has query_id %q, earlier lines say %q", where, j.Issue, j.QueryID, q.ID)
		}
		if j.Kind == Gold {
			q.Gold = append(q.Gold, j)
		} else {
			q.Silver = append(q.Silver, j)
		}
	}
	for _, q := range qs {
		d.Queries = append(d.Queries, *q)
	}
	sort.Slice(d.Queries, func(i, j int) bool { return d.Queries[i].Issue < d.Queries[j].Issue })
	return d, nil
}

// Corpus is the documentation sections plus every issue.
func (d *Dataset) Corpus() (*retrieval.Corpus, error) {
	docs := append([]retrieval.Document(nil), d.docs...)
	for _, is := range d.Issues {
		docs = append(docs, retrieval.IssueDocument(is.Number, is.Title, is.Body))
	}
	c, err := retrieval.NewCorpus(docs)
	if err != nil {
		return nil, fmt.Errorf("corpus of %s: %w", d.Dir, err)
	}
	return c, nil
}

// Duplicates maps an issue to the issues it was marked a duplicate of.
func (d *Dataset) Duplicates() map[int][]int {
	m := map[int][]int{}
	for _, is := range d.Issues {
		if len(is.DuplicateOf) > 0 {
			m[is.Number] = append([]int(nil), is.DuplicateOf...)
		}
	}
	return m
}

// ReadIssues reads an issues JSONL file. Unknown fields are allowed (issue
// exports carry many); a missing or repeated issue number, or a line that
// is not JSON, is an error naming the line.
func ReadIssues(path string) ([]Issue, error) {
	var out []Issue
	seen := map[int]int{}
	err := readJSONL(path, func(line int, raw []byte) error {
		var is Issue
		if err := json.Unmarshal(raw, &is); err != nil {
			return err
		}
		if is.Number <= 0 {
			return errors.New(`field "issue": must be a positive issue number`)
		}
		if prev, dup := seen[is.Number]; dup {
			return fmt.Errorf(`field "issue": issue %d already on line %d`, is.Number, prev)
		}
		if strings.TrimSpace(is.Title) == "" && strings.TrimSpace(is.Body) == "" {
			return fmt.Errorf("issue %d has neither title nor body", is.Number)
		}
		for k, c := range is.Comments {
			if c.Author == "" {
				return fmt.Errorf(`comments[%d]: field "author" is empty`, k)
			}
		}
		seen[is.Number] = line
		out = append(out, is)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadQrels reads a qrels JSONL file strictly: unknown fields, a missing
// field, a grade that does not match the kind, or a repeated (issue, doc,
// anchor) are errors naming the line.
func ReadQrels(path string) ([]Judgement, error) {
	var out []Judgement
	seen := map[string]int{}
	err := readJSONL(path, func(line int, raw []byte) error {
		j, err := ParseJudgement(raw)
		if err != nil {
			return err
		}
		key := fmt.Sprintf("%d\x00%s\x00%s", j.Issue, j.Doc, j.Anchor)
		if prev, dup := seen[key]; dup {
			return fmt.Errorf("judgement (issue %d, %s#%s) already on line %d", j.Issue, j.Doc, j.Anchor, prev)
		}
		seen[key] = line
		out = append(out, j)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ParseJudgement decodes and checks one qrels line.
func ParseJudgement(raw []byte) (Judgement, error) {
	var j Judgement
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return j, err
	}
	if dec.More() {
		return j, errors.New("trailing data after the JSON object")
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(raw, &present); err != nil {
		return j, err
	}
	for _, f := range []string{"query_id", "issue", "doc", "grade", "kind"} {
		if _, ok := present[f]; !ok {
			return j, fmt.Errorf("field %q is missing", f)
		}
	}
	switch {
	case j.QueryID == "":
		return j, errors.New(`field "query_id" is empty`)
	case j.Issue <= 0:
		return j, fmt.Errorf(`field "issue": must be positive (got %d)`, j.Issue)
	case !strings.HasPrefix(j.Doc, "docs/") || !strings.HasSuffix(j.Doc, ".md") || strings.Contains(j.Doc, ".."):
		return j, fmt.Errorf(`field "doc": %q is not a docs/….md path`, j.Doc)
	case j.Kind != Gold && j.Kind != Silver:
		return j, fmt.Errorf(`field "kind": %q is neither "gold" nor "silver"`, j.Kind)
	case j.Kind == Gold && j.Grade != 2, j.Kind == Silver && j.Grade != 1:
		return j, fmt.Errorf(`field "grade": %d does not match kind %q (gold is 2, silver 1)`, j.Grade, j.Kind)
	}
	return j, nil
}

// readJSONL calls fn for each non-blank line, wrapping its error with the
// file and line.
func readJSONL(path string, fn func(line int, raw []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	return scanJSONL(path, f, fn)
}

func scanJSONL(name string, r io.Reader, fn func(line int, raw []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		if err := fn(line, raw); err != nil {
			return fmt.Errorf("%s line %d: %w", name, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s after line %d: %w", name, line, err)
	}
	return nil
}

// jsonMarshalNoEscape encodes v without escaping <, > and & (issue text is
// full of them).
func jsonMarshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
