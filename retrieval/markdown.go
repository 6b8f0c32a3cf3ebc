package retrieval

import (
	"bytes"
	"regexp"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// Section is one heading-delimited part of a Markdown page.
type Section struct {
	// Anchor is the heading id mkdocs renders for the section's heading; it is
	// empty for the text before the first heading.
	Anchor string
	// Level is the heading level (1–6), 0 for the preamble.
	Level int
	// Heading is the heading text with markup removed.
	Heading string
	// Trail is the chain of enclosing headings, outermost first, ending with
	// Heading.
	Trail []string
	// Body is the Markdown between this heading and the next one.
	Body string
}

// Page is a parsed Markdown page.
type Page struct {
	// Title is the front-matter title, else the first level-1 heading.
	Title    string
	Sections []Section
}

var (
	// Python-Markdown (which mkdocs uses) needs no space after the hashes.
	reATXHeading   = regexp.MustCompile(`^(#{1,6})(.*?)[ \t#]*$`)
	reAttrList     = regexp.MustCompile(`\{\s*:?\s*([^}]*)\}\s*$`)
	reAttrID       = regexp.MustCompile(`(?:^|\s)(?:#([^\s}]+)|id\s*=\s*"?([^\s"}]+)"?)`)
	reMdSetting    = regexp.MustCompile(`<!--\s*md:setting\s+(\S+)\s*-->`)
	reMdOption     = regexp.MustCompile(`<!--\s*md:option\s+(\S+)\s*-->`)
	reHTMLComment  = regexp.MustCompile(`<!--.*?-->`)
	reHTMLTag      = regexp.MustCompile(`</?[a-zA-Z][^>]*>`)
	reMdLink       = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)|\[([^\]]*)\]\[[^\]]*\]`)
	reSlugDrop     = regexp.MustCompile(`[^\w\s-]`)
	reSlugCollapse = regexp.MustCompile(`[-\s]+`)
	reFrontTitle   = regexp.MustCompile(`(?m)^title:\s*(.+?)\s*$`)
)

// Slugify turns heading text into the id Python-Markdown's toc extension
// gives it (mkdocs's default): NFKD, ASCII only, drop everything that is not
// a word character, space or hyphen, lower-case, runs of spaces and hyphens
// become one hyphen.
func Slugify(s string) string {
	s = norm.NFKD.String(s)
	var b strings.Builder
	for _, r := range s {
		if r < unicode.MaxASCII {
			b.WriteRune(r)
		}
	}
	s = reSlugDrop.ReplaceAllString(b.String(), "")
	s = strings.ToLower(strings.TrimSpace(s))
	return reSlugCollapse.ReplaceAllString(s, "-")
}

// headingID returns the anchor and the display text of an ATX heading's text,
// following how the mkdocs-material docs are rendered: an attribute list
// `{ #id }` or `{ id=x }` wins, then `<!-- md:setting X -->` gives X and
// `<!-- md:option X -->` gives +X, else the slug of the visible text.
func headingID(raw string) (anchor, text string) {
	id := ""
	if m := reAttrList.FindStringSubmatchIndex(raw); m != nil {
		attrs := raw[m[2]:m[3]]
		if am := reAttrID.FindStringSubmatch(attrs); am != nil {
			id = am[1]
			if id == "" {
				id = am[2]
			}
		}
		raw = strings.TrimSpace(raw[:m[0]])
	}
	if m := reMdSetting.FindStringSubmatch(raw); m != nil {
		if id == "" {
			id = m[1]
		}
		raw = strings.TrimSpace(reMdSetting.ReplaceAllString(raw, m[1]))
	}
	if m := reMdOption.FindStringSubmatch(raw); m != nil {
		if id == "" {
			id = "+" + m[1]
		}
		raw = strings.TrimSpace(reMdOption.ReplaceAllString(raw, m[1]))
	}
	text = plainInline(raw)
	if id == "" {
		id = Slugify(text)
	}
	return id, text
}

// plainInline strips inline Markdown/HTML markup from a single line.
func plainInline(s string) string {
	s = reHTMLComment.ReplaceAllString(s, "")
	s = reHTMLTag.ReplaceAllString(s, "")
	s = reMdLink.ReplaceAllStringFunc(s, func(m string) string {
		sm := reMdLink.FindStringSubmatch(m)
		if sm[1] != "" {
			return sm[1]
		}
		return sm[2]
	})
	s = strings.NewReplacer("`", "", "**", "", "__", "", "*", "").Replace(s)
	return strings.Join(strings.Fields(s), " ")
}

// ParsePage splits a Markdown page into sections at ATX headings, skipping
// headings inside fenced code blocks and the YAML front matter. Duplicate
// anchors get the _1, _2 suffixes Python-Markdown gives them.
func ParsePage(src []byte) Page {
	src = bytes.ReplaceAll(src, []byte("\r\n"), []byte("\n"))
	var page Page
	lines := strings.Split(string(src), "\n")
	i := 0
	if len(lines) > 0 && strings.TrimSpace(lines[0]) == "---" {
		for j := 1; j < len(lines); j++ {
			if t := strings.TrimSpace(lines[j]); t == "---" || t == "..." {
				fm := strings.Join(lines[1:j], "\n")
				if m := reFrontTitle.FindStringSubmatch(fm); m != nil {
					page.Title = strings.Trim(m[1], `"'`)
				}
				i = j + 1
				break
			}
		}
	}
	cur := Section{}
	var body []string
	var trail []string // trail[level-1]
	seen := map[string]bool{}
	fence := ""
	flush := func() {
		cur.Body = strings.TrimSpace(strings.Join(body, "\n"))
		if cur.Level > 0 || cur.Body != "" {
			page.Sections = append(page.Sections, cur)
		}
		body = body[:0]
	}
	for ; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimLeft(line, " \t")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, fence[:1])) == "" {
				fence = ""
			}
			body = append(body, line)
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			n := 0
			for n < len(trimmed) && trimmed[n] == trimmed[0] {
				n++
			}
			fence = trimmed[:n]
			body = append(body, line)
			continue
		}
		m := reATXHeading.FindStringSubmatch(line)
		if m == nil {
			body = append(body, line)
			continue
		}
		flush()
		level := len(m[1])
		anchor, text := headingID(strings.TrimSpace(m[2]))
		anchor = uniqueID(anchor, seen)
		if level > len(trail) {
			trail = append(trail, make([]string, level-len(trail))...)
		}
		trail = trail[:level]
		trail[level-1] = text
		var tr []string
		for _, t := range trail {
			if t != "" {
				tr = append(tr, t)
			}
		}
		cur = Section{Anchor: anchor, Level: level, Heading: text, Trail: tr}
		if level == 1 && page.Title == "" {
			page.Title = text
		}
	}
	flush()
	return page
}

var reIDCount = regexp.MustCompile(`^(.*)_([0-9]+)$`)

// uniqueID makes id unique the way Python-Markdown's toc does: an empty or
// taken id gets "_1", and an id already ending in "_N" counts up.
func uniqueID(id string, used map[string]bool) string {
	for used[id] || id == "" {
		if m := reIDCount.FindStringSubmatch(id); m != nil {
			n := 0
			for _, c := range m[2] {
				n = n*10 + int(c-'0')
				if n > 1<<20 {
					break
				}
			}
			id = m[1] + "_" + itoa(n+1)
		} else {
			id += "_1"
		}
	}
	used[id] = true
	return id
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}
