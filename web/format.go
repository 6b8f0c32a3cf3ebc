package web

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/loomwork/loomwork/retrieval/ablation/result"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/conversation"
	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/scorer/stats"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

func fmtMS(ms float64) string {
	switch {
	case ms >= 60000:
		return fmt.Sprintf("%.1f min", ms/60000)
	case ms >= 1000:
		return fmt.Sprintf("%.2f s", ms/1000)
	case ms >= 10:
		return fmt.Sprintf("%.0f ms", ms)
	default:
		return fmt.Sprintf("%.2f ms", ms)
	}
}

func fmtDur(d time.Duration) string { return fmtMS(float64(d) / 1e6) }

func fmtCost(c *float64) string {
	if c == nil {
		return "unknown"
	}
	if *c < 0.01 {
		return fmt.Sprintf("$%.5f", *c)
	}
	return fmt.Sprintf("$%.4f", *c)
}

func fmtInt(n int64) string {
	s := fmt.Sprint(n)
	if n < 10000 && n > -10000 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && c != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000")
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func barStyle(r Row) string {
	w := r.WidthPct
	if w < 0.15 {
		w = 0.15
	}
	return fmt.Sprintf("left:%.3f%%;width:%.3f%%", r.OffsetPct, w)
}

// indentStyle indents a row's name by its depth, 12px a level up to 16
// levels (deeper rows keep the name readable; data-depth still says it).
func indentStyle(depth int) string {
	return fmt.Sprintf("padding-left:%dpx", 4+min(depth, 16)*12)
}

// gridStyle sets the spacing of the track's grid lines (one per axis tick).
func gridStyle(a Axis) string { return fmt.Sprintf("--tick:%.4f%%", a.StepPct) }

func tickStyle(t Tick) string { return fmt.Sprintf("left:%.3f%%", t.Pct) }

// eventShown reports which of an event's attributes the conversation view
// shows: those of the inference-details event it read messages from.
func eventShown(e store.Event, c *conversation.Conversation) func(string) bool {
	return func(k string) bool {
		return e.Name == semconv.EventInferenceOperationDetails && c.ShowsEventAttribute(k)
	}
}

func countShown(a store.Attributes, shown func(string) bool) int {
	n := 0
	for k := range a {
		if shown(k) {
			n++
		}
	}
	return n
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// looksJSON reports whether an attribute value is a JSON object or array
// (shown pretty-printed).
func looksJSON(s string) bool {
	t := strings.TrimSpace(s)
	return len(t) > 1 && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t))
}

// isChatCall reports whether a span is a model call that would carry
// messages (not an embeddings call), so a view can say when it has none.
func isChatCall(s *store.Span) bool {
	return semconv.IsModelCallOperation(s.Operation) && s.Operation != semconv.OpEmbeddings
}

// roleClass is a message role's CSS class: the four roles the
// conventions name, anything else "other".
func roleClass(role string) string {
	switch role {
	case "system", "user", "assistant", "tool":
		return "role-" + role
	}
	return "role-other"
}

func roleName(role string) string {
	if role == "" {
		return "(no role)"
	}
	return role
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// traceURL builds a trace-page URL keeping the view state; span "" keeps
// the selected span.
func traceURL(id string, q waterfallQuery, page int, span string, toggle string) string {
	v := url.Values{}
	ids := make([]string, 0, len(q.Toggled)+1)
	for t := range q.Toggled {
		if t != toggle {
			ids = append(ids, t)
		}
	}
	if toggle != "" && !q.Toggled[toggle] {
		ids = append(ids, toggle)
	}
	sort.Strings(ids)
	if len(ids) > 0 {
		v.Set("t", strings.Join(ids, ","))
	}
	if q.Search != "" {
		v.Set("q", q.Search)
	}
	if span == "" {
		span = q.Selected
	}
	// Page 0 leaves the page to the server (the selected span's); a
	// selection with an explicit page 1 must say so, or it would jump.
	if page > 1 || (page == 1 && span != "") {
		v.Set("p", fmt.Sprint(page))
	}
	if span != "" {
		v.Set("span", span)
	}
	u := "/traces/" + url.PathEscape(id)
	if enc := v.Encode(); enc != "" {
		u += "?" + enc
	}
	return u
}

func rowsURL(id, parent string, q waterfallQuery) string {
	v := url.Values{"parent": {parent}}
	return "/traces/" + url.PathEscape(id) + "/rows?" + v.Encode()
}

// listURL rewrites one parameter of the list query.
func listURL(q url.Values, key, value string) string {
	v := url.Values{}
	for k, vs := range q {
		if k != key && k != "page_token" && len(vs) > 0 && vs[0] != "" {
			v[k] = vs
		}
	}
	if value != "" {
		v.Set(key, value)
	}
	return "/traces?" + v.Encode()
}

func sortURL(q url.Values, key string) string {
	v := url.Values{}
	for k, vs := range q {
		if k != "sort" && k != "asc" && k != "page_token" && len(vs) > 0 && vs[0] != "" {
			v[k] = vs
		}
	}
	v.Set("sort", key)
	if q.Get("sort") == key && q.Get("asc") != "true" {
		v.Set("asc", "true")
	}
	return "/traces?" + v.Encode()
}

// attrRows renders attribute values as display strings, sorted by key.
type attrRow struct{ Key, Value string }

func attrRows(a store.Attributes) []attrRow {
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]attrRow, 0, len(keys))
	for _, k := range keys {
		out = append(out, attrRow{k, displayValue(a[k])})
	}
	return out
}

func displayValue(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case nil:
		return "null"
	default:
		b, err := json.Marshal(store.Attributes{"v": t})
		if err != nil {
			return fmt.Sprint(t)
		}
		s := string(b)
		return s[len(`{"v":`) : len(s)-1]
	}
}

// isMessages reports whether an attribute holds captured GenAI content.
func isMessages(key string) bool {
	switch key {
	case semconv.AttrInputMessages, semconv.AttrOutputMessages, semconv.AttrSystemInstructions,
		semconv.AttrToolCallArguments, semconv.AttrToolCallResult:
		return true
	}
	return strings.HasPrefix(key, semconv.AttrPromptPrefix) || strings.HasPrefix(key, semconv.AttrCompletionPrefix)
}

func prettyJSON(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the template escapes; \u003c would only hide what was sent
	enc.SetIndent("", "  ")
	if enc.Encode(v) != nil {
		return s
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func critical(r Row) bool { return r.CritSelfMS > 0 }

func selfPct(self, total float64) string {
	if total <= 0 {
		return "0%"
	}
	return fmt.Sprintf("%.1f%%", 100*self/total)
}

func joinStrings(s []string) string { return strings.Join(s, ", ") }

func fmtUSD(f float64) string { return fmtCost(&f) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func citeTitle(ev Evidence, d string) string {
	if contains(ev.CitedNotRetrieved, d) {
		return "cited but never retrieved in this trace"
	}
	return "retrieved and cited"
}

// asyncText is how every view words the part of a trace's duration after
// its root ended: "+200 ms async".
func asyncText(afterRoot time.Duration) string { return "+" + fmtDur(afterRoot) + " async" }

// msDur turns a rollup's milliseconds back into a duration.
func msDur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// durationTitle is the one sentence that says what a trace's duration
// covers (the list, the trace page).
func durationTitle(d, afterRoot time.Duration, fragments int64) string {
	t := "from the first span's start to the last span's end"
	if afterRoot > 0 {
		t += fmt.Sprintf("; %s of it after the root span ended (async work outliving the root)", fmtDur(afterRoot))
	}
	if fragments > 1 {
		t += fmt.Sprintf("; %d fragments (spans without a parent in the trace)", fragments)
	}
	return t
}

func critSelfOf(v TraceView, span string) float64 {
	total := 0.0
	for _, e := range v.Rollup.CriticalPath {
		if e.SpanID == span {
			total += e.SelfMS
		}
	}
	return total
}

// topCritical returns the n critical-path entries with the most self time,
// most first (ties in path order), in one pass without copying the path: a
// 100k-span trace's path has tens of thousands of entries and this runs on
// every page view.
func topCritical(r rollup.Rollup, n int) []rollup.PathEntry {
	top := make([]rollup.PathEntry, 0, n+1)
	for _, e := range r.CriticalPath {
		if len(top) == n && e.SelfMS <= top[n-1].SelfMS {
			continue
		}
		k := len(top)
		for k > 0 && top[k-1].SelfMS < e.SelfMS {
			k--
		}
		top = append(top, rollup.PathEntry{})
		copy(top[k+1:], top[k:])
		top[k] = e
		if len(top) > n {
			top = top[:n]
		}
	}
	return top
}

func metricCell(m map[string]result.Stat, key string) string {
	s, ok := m[key]
	if !ok {
		return "—"
	}
	return fmt.Sprintf("%.3f [%.3f, %.3f]", s.Mean, s.Lo, s.Hi)
}

func interval(iv *stats.Interval) string {
	if iv == nil {
		return "—"
	}
	return fmt.Sprintf("%.3f [%.3f, %.3f]", iv.Estimate, iv.Lower, iv.Upper)
}

func signedInterval(iv *stats.Interval) string {
	if iv == nil {
		return "—"
	}
	return fmt.Sprintf("%+.3f [%+.3f, %+.3f]", iv.Estimate, iv.Lower, iv.Upper)
}

// mdeText is a minimum detectable drop; above 1 (or unknown) no drop on a
// [0, 1] rate can be shown with so few cases.
func mdeText(p *float64) string {
	if p == nil || *p > 1 {
		return "none (too few cases)"
	}
	return fmt.Sprintf("%.3f", *p)
}

func pctLevel(iv *stats.Interval) string {
	if iv == nil {
		return ""
	}
	return fmt.Sprintf("%.0f%%", 100*iv.Level)
}

func kvals(kv []scorer.KValue) string {
	var parts []string
	for _, v := range kv {
		parts = append(parts, fmt.Sprintf("@%d %.2f", v.K, v.Value))
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, " · ")
}

func fracPtr(f *float64) string {
	if f == nil {
		return "—"
	}
	return fmt.Sprintf("%.2f", *f)
}

func pctPtr(f *float64) string {
	if f == nil {
		return "—"
	}
	return fmt.Sprintf("%+.1f%%", *f)
}

func signedUSDp(f *float64) string {
	if f == nil {
		return "unknown"
	}
	return fmt.Sprintf("%+.5f", *f)
}

func signedMSp(f *float64) string {
	if f == nil {
		return "—"
	}
	return fmt.Sprintf("%+.0f ms", *f)
}

func prettyAny(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func graderRequired(g scorer.GraderRates) string {
	switch {
	case g.Required:
		return "required"
	case g.RequiredIn == 0:
		return "optional"
	default:
		return fmt.Sprintf("in %d of %d cases", g.RequiredIn, g.Cases)
	}
}
