// Package policy is authorization outside the model: rules as data (a JSON
// file) matching tool and scope patterns, the decision order of the
// reference design (a matching deny is terminal; a write whose arguments
// are tainted requires approval even when a rule allows it; then allow;
// otherwise deny), taint as a closure over derivation (Tracker), an
// approval queue, a hash-chained append-only audit log (AuditLog, Verify),
// a deterministic injection detector (Scan) that is a signal on spans and
// never the boundary, and the runtime Guard that puts all of it between
// the model's tool calls and the tools: every decision is a span and a
// journal event, so a replay re-checks it.
//
// docs/policy.md describes the rule file, the decision order, the audit
// format and the measured decision latency.
package policy

import (
	"fmt"
	"sort"
	"strings"
)

// Tracker is the taint set: values (named by id) marked untrusted with
// their origin, and values derived from others. A value is tainted when it
// was marked untrusted or any of its sources is tainted (the closure).
type Tracker struct {
	origin  map[string]string   // untrusted id → origin
	sources map[string][]string // derived id → ids it was derived from
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{origin: map[string]string{}, sources: map[string][]string{}}
}

// MarkUntrusted marks id as content from an untrusted origin (e.g.
// "tool:search_docs", "doc:docs/x.md#a").
func (t *Tracker) MarkUntrusted(id, origin string) { t.origin[id] = origin }

// Propagate records that derived was computed from sources.
func (t *Tracker) Propagate(sources []string, derived string) {
	t.sources[derived] = append(t.sources[derived], sources...)
}

// IsTainted reports whether id is untrusted or derived from an untrusted
// value.
func (t *Tracker) IsTainted(id string) bool { return t.chain(id, map[string]bool{}) != "" }

// TaintedIDs lists every tainted id, sorted.
func (t *Tracker) TaintedIDs() []string {
	seen := map[string]bool{}
	var out []string
	add := func(id string) {
		if !seen[id] && t.IsTainted(id) {
			seen[id] = true
			out = append(out, id)
		}
	}
	for id := range t.origin {
		add(id)
	}
	for id := range t.sources {
		add(id)
	}
	sort.Strings(out)
	return out
}

// Origin is id's origin chain: its origin when it was marked untrusted,
// "derived from SRC (CHAIN)" when it inherits taint, "" when clean.
func (t *Tracker) Origin(id string) string { return t.chain(id, map[string]bool{}) }

func (t *Tracker) chain(id string, visiting map[string]bool) string {
	if o, ok := t.origin[id]; ok {
		return o
	}
	if visiting[id] {
		return ""
	}
	visiting[id] = true
	defer delete(visiting, id)
	for _, s := range t.sources[id] {
		if c := t.chain(s, visiting); c != "" {
			return fmt.Sprintf("derived from %s (%s)", s, c)
		}
	}
	return ""
}

// String summarises the tracker (for debugging and logs).
func (t *Tracker) String() string { return strings.Join(t.TaintedIDs(), ",") }
