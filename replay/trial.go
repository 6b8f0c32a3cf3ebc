package replay

import (
	"fmt"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/datasets"
)

// TrialRecord converts a replay report into a trial record for `loom-eval score`.
// The label stays "scripted" for a journal of scripted answers (a scripted
// run is labelled so everywhere); a journal of live answers replayed
// becomes "replayed". Success means the run reproduced to its final answer:
// complete, without divergence, with a non-empty answer; evidence and tool
// expectations are the scorer's to judge. A diverged run keeps its trial
// (so a trials file names every case that was replayed) with the
// divergence in Trial.Divergence (see Diverged; a strict replay also sets
// it for a differing tool result). withTrace adds the replay's trace id,
// for runs whose spans were exported.
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
		Divergence:        Diverged(r, false),
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

// Diverged says why a replayed run did not reproduce its journal, as the
// trial's divergence field carries it: the divergence's code and message
// with the journal line, or, when strict, the first re-executed tool whose
// result differs (and how many more did). "" when the run reproduced.
//
// Strict is `loom-eval replay --strict` and the CI recipe: a differing tool
// result means retrieval or the sandbox now answers differently, and the
// trial's evidence is no longer what the journal recorded.
func Diverged(r *journal.ReplayReport, strict bool) string {
	if d := r.Divergence; d != nil {
		msg := d.Error()
		if r.DivergeLine > 0 {
			msg += fmt.Sprintf(" (journal line %d)", r.DivergeLine)
		}
		return msg
	}
	if strict && len(r.ResultDiffs) > 0 {
		d := r.ResultDiffs[0]
		msg := d.String()
		if d.Line > 0 {
			msg += fmt.Sprintf(" (journal line %d)", d.Line)
		}
		if n := len(r.ResultDiffs) - 1; n > 0 {
			msg += fmt.Sprintf("; %d more tool result(s) differ", n)
		}
		return msg
	}
	return ""
}

// FreshTrial is the trial record of a run just made (`loom-eval run`), not
// replayed: read from its journaled events like a rescore, labelled as its
// model answers are (scripted or live), with the graders' transcript
// inline (journal.TranscriptOf) and the run's trace id ("" when its spans
// went nowhere). journalFile is the JSONL file the trial's journal
// reference names (the run's export).
func FreshTrial(run journal.Run, traceID, journalFile string) (datasets.Trial, error) {
	rep, err := Rescore(run)
	if err != nil {
		return datasets.Trial{}, fmt.Errorf("trial of run %s: %w", run.ID, err)
	}
	rep.TraceID = traceID
	t := TrialRecord(&rep, traceID != "")
	if rep.Label == llm.LabelLive {
		t.ModelLabel = datasets.LabelLive
	}
	t.Journal = &datasets.JournalRef{Path: journalFile, RunID: run.ID}
	tr := journal.TranscriptOf(&run)
	t.Transcript = &tr
	return t, nil
}
