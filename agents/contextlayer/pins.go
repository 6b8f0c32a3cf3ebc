package contextlayer

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/loomwork/loomwork/agents/journal"

	"github.com/loomwork/loomwork/agents/llm"
)

// PinKey is the JSON key a tool result uses to mark facts that must survive
// compaction: {"_pin": ["INC-40721"], ...} or {"_pin": "deploy/prod.yaml"}.
const PinKey = "_pin"

// DefaultPinPatterns recognise facts an agent typically has to carry to the
// end of a run: ticket numbers (INC-40721), issue references (#1234), UUIDs,
// and slash paths with at least two components.
func DefaultPinPatterns() []*regexp.Regexp {
	return []*regexp.Regexp{
		regexp.MustCompile(`\b[A-Z][A-Z0-9]{1,9}-\d{2,9}\b`),
		regexp.MustCompile(`(?:^|[\s(\["'])#\d{2,7}\b`),
		regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`),
		regexp.MustCompile(`(?:^|[\s"'(=])((?:/[\w.-]+){2,}|[\w.-]+(?:/[\w.-]+){2,})`),
	}
}

// Pin is a fact kept verbatim through compaction (a journal type).
type Pin = journal.Pin

// collectPins scans the untouched conversation. It must run before any
// shrinking or summarising.
func collectPins(msgs []llm.Message, taskPins []string, patterns []*regexp.Regexp) []Pin {
	var pins []Pin
	seen := map[string]bool{}
	add := func(v, src string, explicit bool) {
		v = strings.TrimSpace(v)
		if v == "" || seen[v] {
			return
		}
		seen[v] = true
		pins = append(pins, Pin{Value: v, Source: src, Explicit: explicit})
	}
	for _, p := range taskPins {
		add(p, "task", true)
	}
	for i, m := range msgs {
		src := "message " + itoa(i)
		if m.Role == llm.RoleTool {
			src = "tool:" + m.ToolCallID
			for _, v := range explicitPins(m.Content) {
				add(v, src, true)
			}
		}
		for _, re := range patterns {
			for _, sub := range re.FindAllStringSubmatch(m.Content, -1) {
				v := sub[0]
				if len(sub) > 1 && sub[len(sub)-1] != "" {
					v = sub[len(sub)-1]
				}
				add(strings.TrimLeft(v, " \t\n(\"'[="), src, false)
			}
		}
	}
	// Explicit pins first, then in order of appearance.
	out := make([]Pin, 0, len(pins))
	for _, p := range pins {
		if p.Explicit {
			out = append(out, p)
		}
	}
	for _, p := range pins {
		if !p.Explicit {
			out = append(out, p)
		}
	}
	return out
}

// explicitPins finds _pin values anywhere in a JSON tool result.
func explicitPins(content string) []string {
	if !strings.Contains(content, PinKey) {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(content), &v); err != nil {
		return nil
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				if k == PinKey {
					switch p := e.(type) {
					case string:
						out = append(out, p)
					case []any:
						for _, s := range p {
							if s, ok := s.(string); ok {
								out = append(out, s)
							}
						}
					}
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

func itoa(i int) string {
	return strconv.Itoa(i)
}
