package retrieval

import (
	"strings"
	"testing"
)

func TestSlugifyMatchesPythonMarkdownToc(t *testing.T) {
	cases := map[string]string{
		"Navigation tabs":            "navigation-tabs",
		"Setup and theme structure":  "setup-and-theme-structure",
		"Upgrading from 4.x to 5.x":  "upgrading-from-4x-to-5x",
		"  Built-in privacy plugin ": "built-in-privacy-plugin",
		"Color palette -- toggle":    "color-palette-toggle",
		"Café & crème":               "cafe-creme",
		"What's new?":                "whats-new",
		"snake_case stays":           "snake_case-stays",
	}
	for in, want := range cases {
		if got := Slugify(in); got != want {
			t.Errorf("Slugify(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParsePageAnchorsFollowMkdocsMaterialConventions(t *testing.T) {
	src := `---
title: Front title
---

Intro text.

# Page heading

## Configuration

### Navigation path <small>Breadcrumbs</small> { id=navigation-path }

#### <!-- md:setting config.links_attr_map -->

#### <!-- md:option toc.integrate -->

### Overriding blocks <small>recommended</small> { #overriding-blocks data-toc-label="Overriding blocks" }

## Configuration

## Configuration

#

` + "```yaml\n# not a heading\n```\n" + `
### After the fence
`
	p := ParsePage([]byte(src))
	if p.Title != "Front title" {
		t.Errorf("title = %q, want the front-matter title", p.Title)
	}
	var anchors []string
	for _, s := range p.Sections {
		anchors = append(anchors, s.Anchor)
	}
	want := []string{"", "page-heading", "configuration", "navigation-path", "config.links_attr_map", "+toc.integrate", "overriding-blocks", "configuration_1", "configuration_2", "_1", "after-the-fence"}
	if strings.Join(anchors, " ") != strings.Join(want, " ") {
		t.Fatalf("anchors = %q\nwant      %q", anchors, want)
	}
	last := p.Sections[len(p.Sections)-2]
	if !strings.Contains(last.Body, "# not a heading") {
		t.Errorf("fenced code lost from the body: %q", last.Body)
	}
	if got := strings.Join(p.Sections[4].Trail, " > "); got != "Page heading > Configuration > Navigation path Breadcrumbs > config.links_attr_map" {
		t.Errorf("trail = %q", got)
	}
}

func TestSectionDocumentsKeepPageAndAnchor(t *testing.T) {
	docs := SectionDocuments("docs/setup/setting-up-navigation.md", []byte("# Setting up navigation\n\nintro\n\n## Navigation tabs\n\ntabs text\n"))
	if len(docs) != 2 {
		t.Fatalf("got %d sections, want 2", len(docs))
	}
	d := docs[1]
	if d.ID != "docs/setup/setting-up-navigation.md#navigation-tabs" || d.Page != "docs/setup/setting-up-navigation.md" || d.Anchor != "navigation-tabs" {
		t.Errorf("section = %+v", d)
	}
	if d.PathText != "setup setting up navigation" || d.Unit() != d.Page {
		t.Errorf("path text %q, unit %q", d.PathText, d.Unit())
	}
}

func FuzzParsePage(f *testing.F) {
	f.Add([]byte("# A\n\ntext\n## B { #b }\n"))
	f.Add([]byte("---\ntitle: x\n---\n```\n# no\n```\n### <!-- md:setting a.b -->\n"))
	f.Add([]byte("#### <!-- md:option x -->{ id= }\n~~~~\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		p := ParsePage(src)
		seen := map[string]bool{}
		for _, s := range p.Sections {
			if s.Level > 0 && seen[s.Anchor] {
				t.Fatalf("duplicate anchor %q", s.Anchor)
			}
			seen[s.Anchor] = true
		}
	})
}
