package web

import (
	"fmt"
	"strings"

	"github.com/loomwork/loomwork/store"
)

// droppedParts lists what the sender's SDK dropped from s under its limits
// ("2 attributes", "1 event", `1 attribute of event "retry"`, ...), empty
// when nothing was: a reader must know that a span is incomplete.
func droppedParts(s *store.Span) []string {
	var out []string
	count := func(n uint32, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmtInt(int64(n)) + " " + many
	}
	if s.DroppedAttributesCount > 0 {
		out = append(out, count(s.DroppedAttributesCount, "attribute", "attributes"))
	}
	if s.DroppedEventsCount > 0 {
		out = append(out, count(s.DroppedEventsCount, "event", "events"))
	}
	if s.DroppedLinksCount > 0 {
		out = append(out, count(s.DroppedLinksCount, "link", "links"))
	}
	for _, e := range s.Events {
		if e.DroppedAttributesCount > 0 {
			out = append(out, fmt.Sprintf("%s of event %q", count(e.DroppedAttributesCount, "attribute", "attributes"), e.Name))
		}
	}
	for i, l := range s.Links {
		if l.DroppedAttributesCount > 0 {
			out = append(out, fmt.Sprintf("%s of link %d", count(l.DroppedAttributesCount, "attribute", "attributes"), i+1))
		}
	}
	return out
}

// flagParts is store.DescribeFlags as separate words for chips.
func flagParts(f uint32) []string {
	if d := store.DescribeFlags(f); d != "" {
		return strings.Split(d, ", ")
	}
	return nil
}

// hexFlags shows flags as OTLP's fixed32 field, e.g. 0x00000301.
func hexFlags(f uint32) string { return fmt.Sprintf("0x%08x", f) }

// parentLocality says where a span's parent ran, as far as the sender said.
func parentLocality(s *store.Span) string {
	remote, known := s.RemoteParent()
	switch {
	case !known:
		return ""
	case s.ParentSpanID == "":
		return "no parent (root)"
	case remote:
		return "remote: the parent ran in another process"
	default:
		return "local: the parent ran in this process"
	}
}
