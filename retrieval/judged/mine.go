package judged

import (
	"bufio"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/loomwork/loomwork/retrieval"
)

// Alias maps an old documentation URL to a current file (aliases.tsv).
type Alias struct {
	OldPath   string // URL path under the docs prefix, e.g. "getting-started/"
	OldAnchor string // "*" for any anchor
	NewDoc    string // "docs/setup/x.md"
	NewAnchor string // "" or an anchor; "(same as old anchor)" keeps it
}

// sameAnchor is aliases.tsv's marker for "keep the old anchor".
const sameAnchor = "(same as old anchor)"

// ReadAliases reads a tab-separated alias file with the header
// old_path, old_anchor, new_doc, new_anchor (further columns ignored).
func ReadAliases(file string) ([]Alias, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("open aliases: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var out []Alias
	line := 0
	for sc.Scan() {
		line++
		t := sc.Text()
		if strings.TrimSpace(t) == "" {
			continue
		}
		cols := strings.Split(t, "\t")
		if line == 1 && cols[0] == "old_path" {
			continue
		}
		if len(cols) < 4 {
			return nil, fmt.Errorf("%s line %d: want at least 4 tab-separated columns, got %d", file, line, len(cols))
		}
		a := Alias{OldPath: cols[0], OldAnchor: cols[1], NewDoc: cols[2], NewAnchor: cols[3]}
		if a.OldPath == "" || a.NewDoc == "" {
			return nil, fmt.Errorf("%s line %d: old_path and new_doc must be set", file, line)
		}
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	return out, nil
}

// ReadMaintainers reads one login per line; blank lines and lines starting
// with # are ignored, a leading @ is dropped.
func ReadMaintainers(file string) ([]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read maintainers: %w", err)
	}
	var out []string
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.ContainsAny(line, " \t,") {
			return nil, fmt.Errorf("%s line %d: one login per line (got %q)", file, i+1, line)
		}
		out = append(out, strings.TrimPrefix(line, "@"))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no maintainer logins", file)
	}
	return out, nil
}

// Resolver maps documentation URLs to (doc, anchor) the way the shipped
// judgements were made: the site's URL scheme (p/ → docs/p.md or
// docs/p/index.md), aliases for moved pages, anchors checked against the
// headings that exist now (a vanished anchor becomes "").
type Resolver struct {
	prefix  *url.URL
	anchors map[string]map[string]bool // doc → anchors
	aliases []Alias
	skip    []string
}

// NewResolver builds a resolver over docs (as loaded by retrieval.LoadDocs
// with prefix "docs") for the site rooted at prefixURL.
func NewResolver(prefixURL string, docs []retrieval.Document, aliases []Alias, skip []string) (*Resolver, error) {
	u, err := url.Parse(prefixURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("docs URL prefix %q must be an absolute http(s) URL", prefixURL)
	}
	r := &Resolver{prefix: u, anchors: map[string]map[string]bool{}, aliases: aliases, skip: skip}
	for _, d := range docs {
		if d.Kind != retrieval.KindSection {
			continue
		}
		if r.anchors[d.Page] == nil {
			r.anchors[d.Page] = map[string]bool{}
		}
		if d.Anchor != "" {
			r.anchors[d.Page][d.Anchor] = true
		}
	}
	return r, nil
}

// reLink finds URLs in free text (Markdown links, bare URLs, <URLs>).
var reLink = regexp.MustCompile(`https?://[^\s)\]>"'<]+`)

// Links returns the URLs in text that point under the docs prefix.
func (r *Resolver) Links(text string) []string {
	var out []string
	for _, l := range reLink.FindAllString(text, -1) {
		l = strings.TrimRight(l, ".,;:!?*_`")
		if _, ok := r.relPath(l); ok {
			out = append(out, l)
		}
	}
	return out
}

// relPath returns the path of link under the prefix ("" for the root).
func (r *Resolver) relPath(link string) (string, bool) {
	u, err := url.Parse(link)
	if err != nil || !strings.EqualFold(u.Host, r.prefix.Host) {
		return "", false
	}
	pp := strings.TrimSuffix(r.prefix.Path, "/") + "/"
	p := u.Path
	if p+"/" == pp {
		return "", true
	}
	if !strings.HasPrefix(p, pp) {
		return "", false
	}
	return strings.Trim(strings.TrimPrefix(p, pp), "/"), true
}

// Resolve maps a link to a documentation file and anchor. ok is false with
// a reason when the link is not usable as a judgement.
func (r *Resolver) Resolve(link string) (doc, anchor string, ok bool, reason string) {
	link = strings.TrimRight(link, ".,;:!?*_`")
	rel, under := r.relPath(link)
	if !under {
		return "", "", false, "not under the docs prefix"
	}
	u, _ := url.Parse(link)
	frag := u.Fragment
	if i := strings.Index(frag, ":~:"); i >= 0 { // text fragment directive
		frag = frag[:i]
	}
	frag = strings.TrimRight(frag, ".,;:")
	if rel == "" {
		return "", "", false, "site root"
	}
	for _, s := range r.skip {
		if strings.HasPrefix(rel+"/", strings.TrimSuffix(s, "/")+"/") {
			return "", "", false, "skipped prefix " + s
		}
	}
	if strings.HasSuffix(rel, ".json") {
		return "", "", false, "not a page"
	}
	// Aliases: an exact old anchor first, then a wildcard.
	for _, pass := range []bool{true, false} {
		for _, a := range r.aliases {
			if strings.Trim(a.OldPath, "/") != rel {
				continue
			}
			if pass && a.OldAnchor != frag || !pass && a.OldAnchor != "*" {
				continue
			}
			anchor := a.NewAnchor
			if anchor == sameAnchor {
				anchor = frag
			}
			return a.NewDoc, r.existing(a.NewDoc, anchor), true, ""
		}
	}
	for _, cand := range []string{"docs/" + rel + ".md", "docs/" + rel + "/index.md"} {
		if _, ok := r.anchors[cand]; ok {
			return cand, r.existing(cand, frag), true, ""
		}
	}
	return "", "", false, "no page for " + rel
}

// existing returns anchor if the page has it. Links pasted into issues are
// sometimes cut short ("#navigation-in"): an anchor that is a prefix of
// exactly one existing anchor resolves to it. Otherwise a vanished anchor
// becomes "" (the judgement stays on the page).
func (r *Resolver) existing(doc, anchor string) string {
	if anchor == "" || r.anchors[doc][anchor] {
		return anchor
	}
	match := ""
	if len(anchor) >= 4 {
		for a := range r.anchors[doc] {
			if strings.HasPrefix(a, anchor) {
				if match != "" {
					return ""
				}
				match = a
			}
		}
	}
	return match
}

// MineConfig configures Mine.
type MineConfig struct {
	// DocsDir is the project's Markdown documentation folder.
	DocsDir string
	// DocsURLPrefix is where the site is published, e.g.
	// "https://squidfunk.github.io/mkdocs-material/".
	DocsURLPrefix string
	// Maintainers are the logins whose links count as gold answers.
	Maintainers []string
	// Issues is the issue export, with comments.
	Issues []Issue
	// Aliases maps old URLs to current files (optional).
	Aliases []Alias
	// Skip lists URL path prefixes never used as judgements (template
	// boilerplate such as "contributing/", the blog).
	Skip []string
	// IDPrefix names the queries: "<IDPrefix>-<issue>" (default "q").
	IDPrefix string
}

// Validate reports a configuration Mine cannot use.
func (c MineConfig) Validate() error {
	var errs []error
	if c.DocsDir == "" {
		errs = append(errs, errors.New("docs: folder must be set"))
	}
	if c.DocsURLPrefix == "" {
		errs = append(errs, errors.New("docs-url-prefix: must be set"))
	}
	if len(c.Maintainers) == 0 {
		errs = append(errs, errors.New("maintainers: at least one login is needed for gold judgements"))
	}
	if len(c.Issues) == 0 {
		errs = append(errs, errors.New("issues: none"))
	}
	return errors.Join(errs...)
}

// Unresolved is a documentation link that could not become a judgement.
type Unresolved struct {
	Issue  int    `json:"issue"`
	Link   string `json:"link"`
	Reason string `json:"reason"`
}

// MineResult is a mined judged set.
type MineResult struct {
	Qrels []Judgement
	// Issues are the input issues with every docs link replaced by
	// "[link]" and comments dropped, so a query cannot match its answer by
	// URL; duplicate marks are kept.
	Issues      []Issue
	Docs        []retrieval.Document
	QueryIssues int
	Gold        int
	Silver      int
	Unresolved  []Unresolved
}

var reDuplicateOf = regexp.MustCompile(`(?i)duplicate of #(\d+)`)

// Mine derives judgements from an issue export: gold when a maintainer's
// comment links a documentation page, silver when the opening post already
// linked it. A page judged gold for an issue is not also listed as silver.
// A maintainer comment "Duplicate of #N" marks the issue a duplicate of N.
func Mine(cfg MineConfig) (*MineResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("mine: %w", err)
	}
	if cfg.IDPrefix == "" {
		cfg.IDPrefix = "q"
	}
	docs, err := retrieval.LoadDocs(cfg.DocsDir, "docs")
	if err != nil {
		return nil, fmt.Errorf("mine: %w", err)
	}
	res, err := NewResolver(cfg.DocsURLPrefix, docs, cfg.Aliases, cfg.Skip)
	if err != nil {
		return nil, fmt.Errorf("mine: %w", err)
	}
	maint := map[string]bool{}
	for _, m := range cfg.Maintainers {
		maint[strings.ToLower(strings.TrimPrefix(strings.TrimSpace(m), "@"))] = true
	}
	out := &MineResult{Docs: docs}
	issues := append([]Issue(nil), cfg.Issues...)
	sort.Slice(issues, func(i, j int) bool { return issues[i].Number < issues[j].Number })
	for _, is := range issues {
		type key struct{ doc, anchor string }
		judged := map[key]*Judgement{}
		var order []key
		add := func(link, kind string, by *string) {
			doc, anchor, ok, reason := res.Resolve(link)
			if !ok {
				out.Unresolved = append(out.Unresolved, Unresolved{Issue: is.Number, Link: link, Reason: reason})
				return
			}
			k := key{doc, anchor}
			if j, seen := judged[k]; seen {
				if kind == Gold && j.Kind == Silver {
					j.Kind, j.Grade, j.Link, j.AnsweredBy = Gold, 2, link, by
				}
				return
			}
			grade := 1
			if kind == Gold {
				grade = 2
			}
			judged[k] = &Judgement{QueryID: cfg.IDPrefix + "-" + strconv.Itoa(is.Number), Issue: is.Number, Doc: doc, Anchor: anchor,
				Grade: grade, Kind: kind, Link: link, AnsweredBy: by}
			order = append(order, k)
		}
		for _, c := range is.Comments {
			if !maint[strings.ToLower(strings.TrimPrefix(c.Author, "@"))] {
				continue
			}
			for _, l := range res.Links(c.Body) {
				by := c.Author
				add(l, Gold, &by)
			}
			for _, m := range reDuplicateOf.FindAllStringSubmatch(c.Body, -1) {
				if n, err := strconv.Atoi(m[1]); err == nil && n != is.Number && !containsInt(is.DuplicateOf, n) {
					is.DuplicateOf = append(is.DuplicateOf, n)
				}
			}
		}
		for _, l := range res.Links(is.Title + "\n" + is.Body) {
			add(l, Silver, nil)
		}
		// A page judged gold drops its silver judgements with another anchor.
		goldDocs := map[string]bool{}
		for _, k := range order {
			if judged[k].Kind == Gold {
				goldDocs[k.doc] = true
			}
		}
		n := 0
		for _, k := range order {
			j := judged[k]
			if j.Kind == Silver && goldDocs[k.doc] {
				continue
			}
			out.Qrels = append(out.Qrels, *j)
			n++
			if j.Kind == Gold {
				out.Gold++
			} else {
				out.Silver++
			}
		}
		if n > 0 {
			out.QueryIssues++
		}
		clean := is
		clean.Comments = nil
		clean.Author = ""
		clean.Title = replaceLinks(res, is.Title)
		clean.Body = replaceLinks(res, is.Body)
		out.Issues = append(out.Issues, clean)
	}
	return out, nil
}

func containsInt(xs []int, n int) bool {
	for _, x := range xs {
		if x == n {
			return true
		}
	}
	return false
}

func replaceLinks(r *Resolver, s string) string {
	return reLink.ReplaceAllStringFunc(s, func(l string) string {
		trimmed := strings.TrimRight(l, ".,;:!?*_`")
		if _, ok := r.relPath(trimmed); ok {
			return "[link]" + l[len(trimmed):]
		}
		return l
	})
}

// WriteDataset writes a mined set as a dataset folder ablate can read:
// qrels.jsonl, issues.jsonl and a copy of the Markdown docs under docs/.
func (m *MineResult) WriteDataset(dir, docsDir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := writeJSONL(filepath.Join(dir, "qrels.jsonl"), m.Qrels); err != nil {
		return err
	}
	if err := writeJSONL(filepath.Join(dir, "issues.jsonl"), m.Issues); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, d := range m.Docs {
		if seen[d.Page] {
			continue
		}
		seen[d.Page] = true
		rel := strings.TrimPrefix(d.Page, "docs/")
		src, err := os.ReadFile(filepath.Join(docsDir, filepath.FromSlash(rel)))
		if err != nil {
			return fmt.Errorf("copy doc: %w", err)
		}
		dst := filepath.Join(dir, "docs", filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("copy doc: %w", err)
		}
		if err := os.WriteFile(dst, src, 0o644); err != nil {
			return fmt.Errorf("copy doc: %w", err)
		}
	}
	return nil
}

func writeJSONL[T any](file string, rows []T) error {
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("create %s: %w", file, err)
	}
	w := bufio.NewWriter(f)
	for _, r := range rows {
		b, err := jsonMarshalNoEscape(r)
		if err != nil {
			f.Close()
			return fmt.Errorf("encode %s: %w", file, err)
		}
		w.Write(b)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", file, err)
	}
	return f.Close()
}

// ResolveCheck re-resolves every judgement's link and reports the lines
// whose (doc, anchor) differ — how well the mining rules reproduce a set.
func ResolveCheck(r *Resolver, qrels []Judgement) (agree int, diffs []string) {
	for _, j := range qrels {
		doc, anchor, ok, reason := r.Resolve(j.Link)
		if ok && doc == j.Doc && anchor == j.Anchor {
			agree++
			continue
		}
		if !ok {
			diffs = append(diffs, fmt.Sprintf("issue %d %s: unresolved (%s), judged %s#%s", j.Issue, j.Link, reason, j.Doc, j.Anchor))
		} else {
			diffs = append(diffs, fmt.Sprintf("issue %d %s: resolved %s#%s, judged %s#%s", j.Issue, j.Link, doc, anchor, j.Doc, j.Anchor))
		}
	}
	return agree, diffs
}
