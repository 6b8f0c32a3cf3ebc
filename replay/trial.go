package replay

import (
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/datasets"
)

// TrialRecord converts a replay report into a trial record for `loom-eval score`.
// The label stays "scripted" for a journal of scripted answers (a scripted
// run is labelled so everywhere); a journal of live answers replayed
// becomes "replayed". Success means the run reproduced to its final answer:
// complete, without divergence, with a non-empty answer; evidence and tool
// expectations are the scorer's to judge. withTrace adds the replay's
// trace id, for runs whose spans were exported.
func TrialRecord(r *journal.ReplayReport, withTrace bool) datasets.Trial {
	caseID := r.CaseID
	if caseID == "" {
		caseID = r.RunID
	}
	label := datasets.LabelReplayed
	if r.Label == llm.LabelScripted {
		label = datasets.LabelScripted
	}
	success := r.Complete && r.Divergence == nil && r.Answer != ""
	t := datasets.Trial{
		CaseID: caseID, Trial: r.Trial, ModelLabel: label, Model: r.Model, Agent: r.Agent,
		Journal:           &datasets.JournalRef{Path: r.File, RunID: r.RunID},
		Success:           &success,
		ToolsCalled:       r.ToolsCalled,
		EvidenceRetrieved: r.Documents,
		EvidenceCited:     r.Citations,
	}
	if withTrace && r.TraceID != "" {
		t.TraceID = r.TraceID
	}
	if r.Complete {
		d := r.DurationMS
		t.DurationMS = &d
	}
	tokens := r.Usage.InputTokens + r.Usage.OutputTokens
	t.Tokens = &tokens
	return t
}
