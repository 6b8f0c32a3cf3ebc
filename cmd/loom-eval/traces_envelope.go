package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/loomwork/loomwork/store"
)

// tracesEnvelopeDetails is the part of a span's DETAILS column that comes
// from its OTLP envelope: only what sets the span apart from an ordinary
// sampled, in-process span (remote parent, not sampled, what its SDK
// dropped, links), so the tree stays readable. tracesPrintEnvelope lists
// the rest after the tree.
func tracesEnvelopeDetails(s store.Span) []string {
	var parts []string
	if remote, known := s.RemoteParent(); known && remote && s.ParentSpanID != "" {
		parts = append(parts, "parent=remote")
	}
	if s.Flags != 0 && s.Flags&store.FlagSampled == 0 {
		parts = append(parts, "not-sampled")
	}
	if d := tracesDropped(s); d != "" {
		parts = append(parts, "dropped="+d)
	}
	if len(s.Links) > 0 {
		parts = append(parts, fmt.Sprintf("links=%d", len(s.Links)))
	}
	return parts
}

// tracesDropped spells out a span's dropped counts, e.g.
// "3 attributes,1 event,1 attribute of link 1"; "" when none.
func tracesDropped(s store.Span) string {
	var parts []string
	add := func(n uint32, one, many, of string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+one+of)
		case n > 1:
			parts = append(parts, fmt.Sprintf("%d %s%s", n, many, of))
		}
	}
	add(s.DroppedAttributesCount, "attribute", "attributes", "")
	add(s.DroppedEventsCount, "event", "events", "")
	add(s.DroppedLinksCount, "link", "links", "")
	for _, e := range s.Events {
		add(e.DroppedAttributesCount, "attribute", "attributes", fmt.Sprintf(" of event %q", e.Name))
	}
	for i, l := range s.Links {
		add(l.DroppedAttributesCount, "attribute", "attributes", fmt.Sprintf(" of link %d", i+1))
	}
	return strings.Join(parts, ",")
}

// tracesPrintEnvelope prints what OTLP sent with the spans besides their
// attributes: span flags (counted per meaning), the instrumentation scopes
// with their versions, schema URLs and attributes, the resources' schema
// URLs, and every link with its flags. Nothing is printed for spans that
// carry none of it.
func tracesPrintEnvelope(w io.Writer, spans []store.Span) {
	e := collectEnvelope(spans)
	if e.ordinary() {
		return // nothing beyond the scope names the tree implies
	}
	e.print(w)
}

// envelopeScope is an instrumentation scope as the envelope table shows it.
type envelopeScope struct{ name, version, schema, attrs string }

// traceEnvelope is what OTLP sent with a trace's spans besides their
// attributes, counted.
type traceEnvelope struct {
	flags      map[string]int // spans per flags description
	scopes     map[envelopeScope]int
	scopeOrder []envelopeScope // in order of first appearance
	resSchemas map[string]int  // spans per "SERVICE\tSCHEMA URL"
	links      []string        // one tab-separated line per link
}

// collectEnvelope counts the spans' flags, scopes and resource schema
// URLs and lists their links.
func collectEnvelope(spans []store.Span) *traceEnvelope {
	e := &traceEnvelope{flags: map[string]int{}, scopes: map[envelopeScope]int{}, resSchemas: map[string]int{}}
	for _, s := range spans {
		f := "none sent"
		if s.Flags != 0 {
			f = fmt.Sprintf("%s (0x%x)", store.DescribeFlags(s.Flags), s.Flags)
			if s.ParentSpanID == "" {
				f += ", root"
			}
		}
		e.flags[f]++
		k := envelopeScope{s.ScopeName, s.ScopeVersion, s.ScopeSchemaURL, tracesAttrs(s.ScopeAttributes)}
		if s.ScopeDroppedAttributesCount > 0 {
			k.attrs = strings.TrimSpace(k.attrs + fmt.Sprintf(" (%d dropped)", s.ScopeDroppedAttributesCount))
		}
		if _, ok := e.scopes[k]; !ok {
			e.scopeOrder = append(e.scopeOrder, k)
		}
		e.scopes[k]++
		if s.ResourceSchemaURL != "" || s.ResourceDroppedAttributesCount > 0 {
			r := s.ResourceSchemaURL
			if r == "" {
				r = "(none)"
			}
			if s.ResourceDroppedAttributesCount > 0 {
				r += fmt.Sprintf(" (%d attributes dropped)", s.ResourceDroppedAttributesCount)
			}
			e.resSchemas[s.ServiceName+"\t"+r]++
		}
		e.links = append(e.links, envelopeLinks(s)...)
	}
	return e
}

// envelopeLinks are s's links, one line each.
func envelopeLinks(s store.Span) []string {
	var links []string
	for _, l := range s.Links {
		line := fmt.Sprintf("%s\t%s/%s\t%s", tracesClip(s.Name, 40), l.TraceID, l.SpanID, store.DescribeFlags(l.Flags))
		if a := tracesAttrs(l.Attributes); a != "" {
			line += "\t" + a
		} else {
			line += "\t"
		}
		if l.DroppedAttributesCount > 0 {
			line += fmt.Sprintf(" (%d attributes dropped)", l.DroppedAttributesCount)
		}
		links = append(links, line)
	}
	return links
}

// ordinary reports whether the envelope holds nothing beyond the scope
// names the tree implies.
func (e *traceEnvelope) ordinary() bool {
	return len(e.flags) == 1 && e.flags["none sent"] > 0 && len(e.resSchemas) == 0 && len(e.links) == 0 &&
		len(e.scopeOrder) == 1 && e.scopeOrder[0].schema == "" && e.scopeOrder[0].attrs == ""
}

// print writes the envelope's tables: span flags, instrumentation scopes,
// and (when there are any) resource schema URLs and links.
func (e *traceEnvelope) print(w io.Writer) {
	fmt.Fprintln(w, "\nSpan flags")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, k := range sortedCounts(e.flags) {
		fmt.Fprintf(tw, "  %d span(s)\t%s\n", e.flags[k], k)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nInstrumentation scopes")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  SCOPE\tVERSION\tSCHEMA URL\tATTRIBUTES\tSPANS")
	for _, k := range e.scopeOrder {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\n", dash(k.name), dash(k.version), dash(k.schema), dash(k.attrs), e.scopes[k])
	}
	tw.Flush()
	if len(e.resSchemas) > 0 {
		fmt.Fprintln(w, "\nResource schema URLs")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  SERVICE\tSCHEMA URL\tSPANS")
		for _, k := range sortedCounts(e.resSchemas) {
			fmt.Fprintf(tw, "  %s\t%d\n", k, e.resSchemas[k])
		}
		tw.Flush()
	}
	if len(e.links) > 0 {
		fmt.Fprintln(w, "\nLinks")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  FROM SPAN\tTO TRACE/SPAN\tFLAGS\tATTRIBUTES")
		for _, l := range e.links {
			fmt.Fprintln(tw, "  "+l)
		}
		tw.Flush()
	}
}

// sortedCounts is counts' keys, sorted.
func sortedCounts(counts map[string]int) []string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// tracesAttrs renders attributes as sorted key=value pairs.
func tracesAttrs(a store.Attributes) string {
	if len(a) == 0 {
		return ""
	}
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := a[k]
		if s, ok := v.(string); ok {
			parts[i] = k + "=" + tracesClip(s, 60)
			continue
		}
		b, err := store.Attributes{k: v}.MarshalJSON()
		if err != nil {
			parts[i] = fmt.Sprintf("%s=%v", k, v)
			continue
		}
		parts[i] = k + "=" + strings.TrimSuffix(strings.TrimPrefix(string(b), `{"`+k+`":`), "}")
	}
	return strings.Join(parts, " ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
