package journal

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/internal/stepdiff"
)

// The fields two journaled runs' steps are compared on. "tool" and
// "args_hash" are the names Compare gives a mismatch in (the replay's
// vocabulary), "result" is what CodeResultDiffers is about; a model call
// adds the answer it gave and the calls it asked for.
const (
	StepFieldModel     = "model"
	StepFieldAnswer    = "answer"
	StepFieldToolCalls = "tool_calls"
	StepFieldTool      = "tool"
	StepFieldArgsHash  = "args_hash"
	StepFieldResult    = "result"
	StepFieldError     = "is_error"
	StepFieldDocuments = "documents"
	StepFieldEvents    = "events"
)

// StepCodes is the journal's vocabulary for the differences between two
// runs: a step only the first run took is CodeMissing from the second, a
// step only the second took is CodeExtra, a tool call to another tool or
// with other arguments is CodeMismatch, another result CodeResultDiffers.
var StepCodes = stepdiff.Codes{
	OnlyA: CodeMissing,
	OnlyB: CodeExtra,
	Fields: map[string]string{
		StepFieldTool:     CodeMismatch,
		StepFieldArgsHash: CodeMismatch,
		StepFieldResult:   CodeResultDiffers,
		StepFieldError:    CodeResultDiffers,
	},
}

// StepsOf reads a run's steps: each model call (its model_response, with
// the model_request before it for timing) and each tool call (its
// tool_call with the effects and the tool_result that follow it), in
// journal order. A step's Ref is the sequence number of its first event.
//
// What a step is compared on never includes its step number, call id or
// request hash: those differ between two runs as soon as one step does
// (the request hash covers the whole conversation so far), and would mark
// every later step as different.
func StepsOf(run *Run) []stepdiff.Step {
	var out []stepdiff.Step
	var reqAt time.Time
	open := map[string]int{} // call id → index in out, awaiting its result
	for _, e := range run.Events {
		switch e.Kind {
		case KindModelRequest:
			reqAt = e.Time
		case KindModelResponse:
			var resp llm.Response
			_ = json.Unmarshal(e.Payload, &resp)
			st := stepdiff.Step{Kind: stepdiff.KindModel, Name: resp.Model, Ref: strconv.FormatInt(e.Seq, 10),
				Title: fmt.Sprintf("model_response (step %d)", e.Step)}
			st.Fields = addField(st.Fields, StepFieldModel, resp.Model)
			st.Fields = addField(st.Fields, StepFieldAnswer, resp.Message.Content)
			var calls []string
			for _, c := range resp.Message.ToolCalls {
				calls = append(calls, c.Name+"("+canonicalArgs(c.Arguments)+")")
			}
			st.Fields = addField(st.Fields, StepFieldToolCalls, strings.Join(calls, "\n"))
			if !reqAt.IsZero() {
				st.Info = append(st.Info, stepdiff.Field{Name: "duration", Value: fmtDuration(e.Time.Sub(reqAt))})
			}
			st.Info = append(st.Info, stepdiff.Field{Name: "tokens", Value: fmt.Sprintf("%d in / %d out", resp.Usage.InputTokens, resp.Usage.OutputTokens)})
			if e.Label != "" {
				st.Info = append(st.Info, stepdiff.Field{Name: "label", Value: e.Label})
			}
			reqAt = time.Time{}
			out = append(out, st)
		case KindToolCall:
			var c llm.ToolCall
			_ = json.Unmarshal(e.Payload, &c)
			st := stepdiff.Step{Kind: stepdiff.KindTool, Name: e.Tool, Ref: strconv.FormatInt(e.Seq, 10),
				Title: fmt.Sprintf("tool_call %s (step %d)", e.Tool, e.Step)}
			st.Fields = addField(st.Fields, StepFieldTool, e.Tool)
			if e.ArgsHash != "" {
				st.Fields = append(st.Fields, stepdiff.Field{Name: StepFieldArgsHash, Value: e.ArgsHash, Show: canonicalArgs(c.Arguments)})
			}
			st.Info = append(st.Info, stepdiff.Field{Name: "started", Value: e.Time.UTC().Format(time.RFC3339Nano)})
			open[e.CallID] = len(out)
			out = append(out, st)
		case KindEffect:
			if i, ok := open[e.CallID]; ok {
				out[i].Info = bumpEffects(out[i].Info)
			}
		case KindToolResult:
			i, ok := open[e.CallID]
			if !ok {
				continue
			}
			delete(open, e.CallID)
			var r ToolResult
			_ = json.Unmarshal(e.Payload, &r)
			st := &out[i]
			st.Fields = addField(st.Fields, StepFieldResult, r.Content)
			if r.IsError {
				st.Fields = append(st.Fields, stepdiff.Field{Name: StepFieldError, Value: "true"})
			}
			st.Fields = addField(st.Fields, StepFieldDocuments, strings.Join(r.Documents, "\n"))
			evs := make([]string, len(r.Events))
			for k, ev := range r.Events {
				evs[k] = ev.String()
			}
			st.Fields = addField(st.Fields, StepFieldEvents, strings.Join(evs, "\n"))
			for k, f := range st.Info {
				if f.Name == "started" {
					if t, err := time.Parse(time.RFC3339Nano, f.Value); err == nil {
						st.Info[k] = stepdiff.Field{Name: "duration", Value: fmtDuration(e.Time.Sub(t))}
					}
				}
			}
		}
	}
	// A tool call whose result never came (a crash) keeps its start time
	// as information; nothing else reads it.
	return out
}

// DiffRuns aligns the steps of runs a and b and lists their differences
// in the journal's vocabulary (StepCodes).
func DiffRuns(a, b *Run) stepdiff.Diff {
	return stepdiff.Compare(StepsOf(a), StepsOf(b), StepCodes)
}

func addField(fs []stepdiff.Field, name, value string) []stepdiff.Field {
	if value == "" {
		return fs
	}
	return append(fs, stepdiff.Field{Name: name, Value: value})
}

func bumpEffects(info []stepdiff.Field) []stepdiff.Field {
	for k, f := range info {
		if f.Name == "effects" {
			n, _ := strconv.Atoi(f.Value)
			info[k].Value = strconv.Itoa(n + 1)
			return info
		}
	}
	return append(info, stepdiff.Field{Name: "effects", Value: "1"})
}

// canonicalArgs is a call's arguments as canonical JSON (what the argument
// hash covers), or as written when they are not JSON.
func canonicalArgs(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	if c, err := Canonical(raw); err == nil {
		return string(c)
	}
	return string(raw)
}

func fmtDuration(d time.Duration) string {
	ms := float64(d.Microseconds()) / 1000
	if ms >= 1000 {
		return strconv.FormatFloat(ms/1000, 'f', 2, 64) + " s"
	}
	return strconv.FormatFloat(ms, 'f', 0, 64) + " ms"
}
