package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/journal"
)

// Event is a step's lifecycle event as the distiller reads it: a workflow
// step event, or an agent run's tool result, policy decision or finish
// translated by FromJournal.
type Event struct {
	Step string `json:"step"`
	// Kind is started, failed, retried, succeeded, approval_required or
	// denied.
	Kind string `json:"kind"`
	// Detail carries what the run recorded: "error", "remedy", "outcome",
	// "decision".
	Detail map[string]string `json:"detail,omitempty"`
	// Ref points back into the journal ("run-42#7"), for provenance.
	Ref string `json:"ref,omitempty"`
}

// Salience of distilled records: procedures change behaviour most, policy
// boundaries are facts that stay true, episodes are what happened once.
const (
	SalienceProcedure = 0.90
	SalienceBoundary  = 0.85
	SalienceEpisode   = 0.70
)

// Distill turns a finished run's events into candidate records (the write
// policy still decides what is kept):
//
//   - a step that failed and later succeeded gives a procedure, "when STEP
//     fails, REMEDY", with the remedy the success recorded, or the generic
//     "retry the step" when it recorded none;
//   - a success that recorded an outcome gives an episode, "run RUN: STEP
//     -> OUTCOME";
//   - an approval_required or denied step gives a semantic fact, "policy
//     boundary: STEP -> DECISION".
//
// Records are returned in event order and keyed by kind, run and step.
func Distill(events []Event, runID string, at time.Time) []Record {
	var out []Record
	failed := map[string]string{} // step -> ref of its first failure
	seen := map[string]bool{}
	add := func(r Record) {
		if seen[r.Key] {
			return
		}
		seen[r.Key] = true
		r.SourceRuns = []string{runID}
		r.Written = at
		out = append(out, r)
	}
	for _, e := range events {
		switch e.Kind {
		case "failed":
			if _, ok := failed[e.Step]; !ok {
				failed[e.Step] = e.Ref
			}
		case "succeeded":
			if ref, ok := failed[e.Step]; ok {
				remedy := strings.TrimSpace(e.Detail["remedy"])
				if remedy == "" {
					remedy = "retry the step"
				}
				add(Record{Key: fmt.Sprintf("proc-%s-%s", runID, e.Step), Kind: Procedural, Salience: SalienceProcedure,
					Text: fmt.Sprintf("when %s fails, %s", e.Step, remedy), Provenance: joinRefs(ref, e.Ref)})
				delete(failed, e.Step)
			}
			if o := strings.TrimSpace(e.Detail["outcome"]); o != "" {
				add(Record{Key: fmt.Sprintf("ep-%s-%s", runID, e.Step), Kind: Episodic, Salience: SalienceEpisode,
					Text: fmt.Sprintf("run %s: %s -> %s", runID, e.Step, o), Provenance: e.Ref})
			}
		case "approval_required", "denied":
			d := e.Detail["decision"]
			if d == "" {
				d = e.Kind
			}
			add(Record{Key: fmt.Sprintf("sem-%s-%s", runID, e.Step), Kind: Semantic, Salience: SalienceBoundary,
				Text: fmt.Sprintf("policy boundary: %s -> %s", e.Step, d), Provenance: e.Ref})
		}
	}
	return out
}

func joinRefs(refs ...string) string {
	var keep []string
	for _, r := range refs {
		if r != "" {
			keep = append(keep, r)
		}
	}
	return strings.Join(keep, ",")
}

// FromJournal reads a finished run's journal as distiller events:
//
//   - workflow step events as they are (a step's result object may carry
//     "remedy" and "outcome"; its error is the failure);
//   - an agent's tool results: an error result is a failure of the tool, a
//     later good result of the same tool its success (the remedy is the
//     arguments-hash-free statement "call TOOL again with different
//     arguments" only when the run recorded nothing better);
//   - policy decisions other than allow as boundaries;
//   - run_finished as the outcome of the step "answer": the task's first
//     line, the answer's first line and the ids it cites — what a later
//     run on a related task can recognise and reuse.
func FromJournal(run journal.Run) ([]Event, error) {
	var out []Event
	task := ""
	for _, e := range run.Events {
		ref := fmt.Sprintf("%s#%d", run.ID, e.Seq)
		switch e.Kind {
		case journal.KindRunStarted:
			var p journal.RunStarted
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				return nil, fmt.Errorf("distill %s: run_started seq %d: %w", run.ID, e.Seq, err)
			}
			task = p.Input
		case journal.KindStep:
			var p struct {
				Step   string          `json:"step"`
				Event  string          `json:"event"`
				Result json.RawMessage `json:"result"`
				Error  string          `json:"error"`
			}
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				return nil, fmt.Errorf("distill %s: step event seq %d: %w", run.ID, e.Seq, err)
			}
			d := map[string]string{}
			if p.Error != "" {
				d["error"] = p.Error
			}
			var res map[string]any
			if len(p.Result) > 0 && json.Unmarshal(p.Result, &res) == nil {
				for _, k := range []string{"remedy", "outcome"} {
					if s, ok := res[k].(string); ok {
						d[k] = s
					}
				}
			}
			out = append(out, Event{Step: p.Step, Kind: p.Event, Detail: d, Ref: ref})
		case journal.KindToolResult:
			var p journal.ToolResult
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				return nil, fmt.Errorf("distill %s: tool_result seq %d: %w", run.ID, e.Seq, err)
			}
			if p.IsError {
				out = append(out, Event{Step: e.Tool, Kind: "failed", Detail: map[string]string{"error": clip(p.Content, 200)}, Ref: ref})
			} else {
				out = append(out, Event{Step: e.Tool, Kind: "succeeded", Detail: map[string]string{"remedy": "call " + e.Tool + " again with corrected arguments"}, Ref: ref})
			}
		case journal.KindDecision:
			// The policy guard's record nests the verdict; other
			// authorizers may put the decision at the top level.
			var p struct {
				Decision string `json:"decision"`
				Verdict  struct {
					Decision string `json:"decision"`
				} `json:"verdict"`
			}
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				continue // a decision payload is any JSON value; a non-object has no boundary to learn
			}
			if p.Decision == "" {
				p.Decision = p.Verdict.Decision
			}
			switch p.Decision {
			case "deny":
				out = append(out, Event{Step: e.Tool, Kind: "denied", Detail: map[string]string{"decision": "deny"}, Ref: ref})
			case "require_approval":
				out = append(out, Event{Step: e.Tool, Kind: "approval_required", Detail: map[string]string{"decision": "require_approval"}, Ref: ref})
			}
		case journal.KindRunFinished:
			var p journal.RunFinished
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				return nil, fmt.Errorf("distill %s: run_finished seq %d: %w", run.ID, e.Seq, err)
			}
			outcome := clip(firstLine(p.Answer), 300)
			if t := clip(firstLine(task), 200); t != "" {
				outcome = fmt.Sprintf("task %q: %s", t, outcome)
			}
			if ids := citedIDs(p.Answer, p.Citations); len(ids) > 0 {
				outcome += " [" + strings.Join(ids, "] [") + "]"
			}
			if strings.TrimSpace(p.Answer) != "" && !p.StepLimitReached {
				out = append(out, Event{Step: "answer", Kind: "succeeded", Detail: map[string]string{"outcome": outcome}, Ref: ref})
			}
		}
	}
	return out, nil
}

// Distilled is one record a finished run yielded and what the write
// policy did with it.
type Distilled struct {
	Key      string  `json:"key"`
	Kind     Kind    `json:"kind"`
	Salience float64 `json:"salience"`
	Text     string  `json:"text"`
	Outcome  Outcome `json:"outcome"`
	// Into is the record now holding the knowledge (the existing one's key
	// on a merge).
	Into string `json:"into,omitempty"`
}

// DistillRun distills a finished run's journal (FromJournal, Distill, the
// records written at at) into scope through the write policy, and says
// what happened to each record, in the order Distill returns them. It
// stops at the first write that fails.
func (s *Store) DistillRun(ctx context.Context, scope Scope, run journal.Run, at time.Time) ([]Distilled, error) {
	evs, err := FromJournal(run)
	if err != nil {
		return nil, err
	}
	var out []Distilled
	for _, r := range Distill(evs, run.ID, at) {
		o, into, err := s.Write(ctx, scope, r)
		if err != nil {
			return nil, err
		}
		out = append(out, Distilled{Key: r.Key, Kind: r.Kind, Salience: r.Salience, Text: r.Text, Outcome: o, Into: into})
	}
	return out, nil
}

var bracketID = regexp.MustCompile(`\[([^\[\]\s]+)\]`)

// citedIDs are the ids an answer cites, as precisely as it cites them:
// the bracketed ids in its text that name a recorded citation (a section
// "page#anchor" of a cited page, not just the page), else the recorded
// citations; at most five. Bracketed words that are no citation (a quoted
// "[SuperFences]") are not ids.
func citedIDs(answer string, citations []string) []string {
	var ids []string
	for _, m := range bracketID.FindAllStringSubmatch(answer, -1) {
		page, _, _ := strings.Cut(m[1], "#")
		if slices.Contains(citations, page) && !slices.Contains(ids, m[1]) {
			ids = append(ids, m[1])
		}
	}
	if len(ids) == 0 {
		ids = citations
	}
	return ids[:min(len(ids), 5)]
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
