package scorer

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// Derived is what a trace says about a trial: the facts ScoreTrial fills in
// for fields a trial with inline (or stored) spans leaves out.
type Derived struct {
	Success           bool
	SuccessFrom       string // "attribute loomwork.task.success on span X" or "root status ..."
	ToolsCalled       []string
	EvidenceRetrieved []string
	EvidenceCited     []string
	ModelLabel        string
	Model             string
	Rollup            rollup.Rollup
}

// DeriveFromTrace reads a trial's facts from its spans:
//   - tools: every execute_tool span's gen_ai.tool.name (else the name after
//     "execute_tool "), in start order, repeats kept;
//   - evidence retrieved: the union of every span's RetrievedDocs
//     (gen_ai.retrieval.documents), in first-seen start order;
//   - evidence cited: the union of every span's CitedDocs (loomwork.citations);
//   - success: loomwork.task.success (semconv.AttrTaskSuccess, a bool an
//     agent sets to say whether it accomplished the task) on the root if set
//     (else on the latest-ending span that sets it), otherwise the root's
//     status (error → failed, ok or unset → succeeded);
//   - model label: "scripted" if any span carries loomwork.model.label =
//     scripted (a scripted run is never reported as live), otherwise that
//     label if one is set, otherwise "live" when the trace made model calls;
//   - duration, cost and tokens: the rollup's.
func DeriveFromTrace(spans []store.Span, prices *pricing.Table) (Derived, error) {
	var d Derived
	if len(spans) == 0 {
		return d, errors.New("derive trial: trace has no spans")
	}
	for i := range spans {
		if spans[i].TraceID != spans[0].TraceID {
			return d, fmt.Errorf("derive trial: spans belong to traces %s and %s", spans[0].TraceID, spans[i].TraceID)
		}
	}
	order := make([]int, len(spans))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return spans[order[a]].StartTime.Before(spans[order[b]].StartTime) })

	root := RootSpan(spans)
	if root < 0 {
		root = order[0]
	}

	seenR, seenC := map[string]bool{}, map[string]bool{}
	labels := map[string]bool{}
	models := map[string]int{}
	attrSpan := -1
	for _, i := range order {
		s := &spans[i]
		if s.Operation == semconv.OpExecuteTool {
			name := s.ToolName
			if name == "" {
				name = strings.TrimSpace(strings.TrimPrefix(s.Name, semconv.OpExecuteTool))
			}
			if name == "" {
				name = "(unnamed tool)"
			}
			d.ToolsCalled = append(d.ToolsCalled, name)
		}
		for _, doc := range s.RetrievedDocs {
			if !seenR[doc] {
				seenR[doc] = true
				d.EvidenceRetrieved = append(d.EvidenceRetrieved, doc)
			}
		}
		for _, doc := range s.CitedDocs {
			if !seenC[doc] {
				seenC[doc] = true
				d.EvidenceCited = append(d.EvidenceCited, doc)
			}
		}
		if l, ok := s.Attributes.String(semconv.AttrModelLabel); ok && l != "" {
			labels[l] = true
		}
		if semconv.IsModelCallOperation(s.Operation) {
			m := s.ResponseModel
			if m == "" {
				m = s.RequestModel
			}
			if m != "" {
				models[m]++
			}
		}
		if _, ok := s.Attributes[semconv.AttrTaskSuccess].(bool); ok {
			if attrSpan < 0 || i == root || (attrSpan != root && s.EndTime.After(spans[attrSpan].EndTime)) {
				attrSpan = i
			}
		}
	}
	switch {
	case attrSpan >= 0:
		d.Success = spans[attrSpan].Attributes[semconv.AttrTaskSuccess].(bool)
		d.SuccessFrom = fmt.Sprintf("attribute %s on span %s", semconv.AttrTaskSuccess, spans[attrSpan].SpanID)
	default:
		d.Success = !spans[root].IsError()
		d.SuccessFrom = fmt.Sprintf("status %q of root span %s", spans[root].StatusCode, spans[root].SpanID)
	}
	switch {
	case labels[datasets.LabelScripted]:
		d.ModelLabel = datasets.LabelScripted
	case len(labels) > 0:
		var ls []string
		for l := range labels {
			ls = append(ls, l)
		}
		sort.Strings(ls)
		d.ModelLabel = strings.Join(ls, "+")
	case len(models) > 0:
		d.ModelLabel = datasets.LabelLive
	default:
		d.ModelLabel = "unknown"
	}
	best := 0
	for m, n := range models {
		if n > best || (n == best && m < d.Model) {
			d.Model, best = m, n
		}
	}
	d.Rollup = rollup.Compute(spans, prices)
	return d, nil
}

// RootSpan is the index of a trace's root: the longest span without a
// parent in the trace (a trace cut at its root has several; the longest
// is the operation; on equal lengths the earliest start), -1 when there is
// none (no spans, or every span names a parent in the trace). The trial
// facts, the graders' transcript and traces → cases all read the root
// this way.
func RootSpan(spans []store.Span) int {
	ids := make(map[string]bool, len(spans))
	for i := range spans {
		ids[spans[i].SpanID] = true
	}
	root := -1
	for i := range spans {
		s := &spans[i]
		if s.ParentSpanID != "" && ids[s.ParentSpanID] {
			continue
		}
		if root < 0 || s.Duration() > spans[root].Duration() ||
			(s.Duration() == spans[root].Duration() && s.StartTime.Before(spans[root].StartTime)) {
			root = i
		}
	}
	return root
}
