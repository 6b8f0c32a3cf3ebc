package retrieval

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Kind says what a document is.
type Kind string

// Document kinds.
const (
	KindSection Kind = "section"
	KindIssue   Kind = "issue"
)

// Document is one retrievable unit.
type Document struct {
	// ID is unique in the corpus: "docs/<path>.md#<anchor>" for a section
	// ("docs/<path>.md" for a page's preamble), "issue:<n>" for an issue.
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// Page is the documentation file ("docs/setup/x.md") for a section.
	Page string `json:"page,omitempty"`
	// Anchor is the section's heading id, empty for a page's preamble.
	Anchor string `json:"anchor,omitempty"`
	// Issue is the issue number for an issue document.
	Issue    int    `json:"issue,omitempty"`
	Title    string `json:"title"`
	Headings string `json:"headings,omitempty"`
	Body     string `json:"body"`
	// PathText is the page path as words ("setup setting up navigation").
	PathText string `json:"path_text,omitempty"`
}

// Unit is what a judgement names: the page for a section, the issue id for
// an issue. Rankings are collapsed to units for evaluation.
func (d Document) Unit() string {
	if d.Kind == KindSection {
		return d.Page
	}
	return d.ID
}

// Text is the document's full text (used by embedders and rerank APIs).
func (d Document) Text() string {
	var b strings.Builder
	b.WriteString(d.Title)
	if d.Headings != "" && d.Headings != d.Title {
		b.WriteString("\n")
		b.WriteString(d.Headings)
	}
	b.WriteString("\n")
	b.WriteString(d.Body)
	return b.String()
}

// IssueID is the document id of issue n.
func IssueID(n int) string { return "issue:" + strconv.Itoa(n) }

// IssueDocument makes the document for a closed issue.
func IssueDocument(number int, title, body string) Document {
	return Document{ID: IssueID(number), Kind: KindIssue, Issue: number, Title: title, Body: body}
}

// SectionDocuments splits one Markdown page into section documents. page is
// the file's path as judgements name it, e.g. "docs/setup/x.md".
func SectionDocuments(page string, src []byte) []Document {
	p := ParsePage(src)
	title := p.Title
	pathText := PathWords(page)
	var out []Document
	for _, s := range p.Sections {
		id := page
		if s.Anchor != "" {
			id += "#" + s.Anchor
		}
		out = append(out, Document{
			ID: id, Kind: KindSection, Page: page, Anchor: s.Anchor,
			Title: title, Headings: strings.Join(s.Trail, " > "),
			Body: s.Body, PathText: pathText,
		})
	}
	return out
}

// PathWords turns "docs/setup/setting-up-navigation.md" into
// "setup setting up navigation".
func PathWords(page string) string {
	p := strings.TrimPrefix(page, "docs/")
	p = strings.TrimSuffix(p, ".md")
	p = strings.TrimSuffix(p, "/index")
	if p == "index" {
		p = ""
	}
	return strings.Join(strings.FieldsFunc(p, func(r rune) bool {
		return r == '/' || r == '-' || r == '_' || r == '.'
	}), " ")
}

// LoadDocs reads every Markdown file under dir and splits it into sections.
// Page paths are "<prefix>/<relative path>", e.g. prefix "docs". Files are
// read in lexical order so the corpus (and its hash) is deterministic.
func LoadDocs(dir, prefix string) ([]Document, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk docs %s: %w", dir, err)
	}
	sort.Strings(files)
	var out []Document
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read doc: %w", err)
		}
		rel, err := filepath.Rel(dir, f)
		if err != nil {
			return nil, fmt.Errorf("relative path of %s: %w", f, err)
		}
		out = append(out, SectionDocuments(path.Join(prefix, filepath.ToSlash(rel)), src)...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("load docs %s: no Markdown files", dir)
	}
	return out, nil
}

// Corpus is an immutable set of documents with a content hash.
type Corpus struct {
	docs  []Document
	byID  map[string]int
	hash  string
	pages map[string]bool
}

// NewCorpus checks ids are unique and non-empty and computes the content hash.
func NewCorpus(docs []Document) (*Corpus, error) {
	c := &Corpus{docs: docs, byID: make(map[string]int, len(docs)), pages: map[string]bool{}}
	h := sha256.New()
	for i, d := range docs {
		if d.ID == "" {
			return nil, fmt.Errorf("new corpus: document %d has no id", i)
		}
		if _, dup := c.byID[d.ID]; dup {
			return nil, fmt.Errorf("new corpus: duplicate document id %q", d.ID)
		}
		c.byID[d.ID] = i
		if d.Kind == KindSection {
			c.pages[d.Page] = true
		}
		for _, f := range []string{d.ID, string(d.Kind), d.Page, d.Anchor, strconv.Itoa(d.Issue), d.Title, d.Headings, d.Body, d.PathText} {
			fmt.Fprintf(h, "%d:%s", len(f), f)
		}
	}
	c.hash = hex.EncodeToString(h.Sum(nil))
	return c, nil
}

// Docs returns the documents (do not modify).
func (c *Corpus) Docs() []Document { return c.docs }

// Len is the number of documents.
func (c *Corpus) Len() int { return len(c.docs) }

// Hash is the SHA-256 of the corpus content.
func (c *Corpus) Hash() string { return c.hash }

// Doc returns the document with the given id.
func (c *Corpus) Doc(id string) (Document, bool) {
	i, ok := c.byID[id]
	if !ok {
		return Document{}, false
	}
	return c.docs[i], true
}

// HasPage reports whether a documentation page is in the corpus.
func (c *Corpus) HasPage(page string) bool { return c.pages[page] }
