package journal

import (
	"encoding/json"
	"fmt"

	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/datasets"
)

// FileTool is the tool whose calls write workspace files: a successful
// call's {"path", "content"} arguments become a transcript file (the
// coding agent's write_file).
const FileTool = "write_file"

// TranscriptOf reads what a run did, as graders see it: the task
// (run_started input), every tool call with its result in journal order,
// the files it wrote (successful write_file calls; the last write of a
// path wins), its model calls, and the final answer with its citations.
func TranscriptOf(run *Run) datasets.Transcript {
	tr := datasets.Transcript{Source: fmt.Sprintf("journal %s run %s", run.File, run.ID)}
	pending := map[string]int{} // call id → index in tr.ToolCalls, awaiting its result
	for _, e := range run.Events {
		switch e.Kind {
		case KindRunStarted:
			var rs RunStarted
			if json.Unmarshal(e.Payload, &rs) == nil {
				tr.Task = rs.Input
			}
		case KindModelResponse:
			tr.Steps++
		case KindToolCall:
			var c llm.ToolCall
			if json.Unmarshal(e.Payload, &c) != nil {
				continue
			}
			name := c.Name
			if name == "" {
				name = e.Tool
			}
			pending[e.CallID] = len(tr.ToolCalls)
			tr.ToolCalls = append(tr.ToolCalls, datasets.ToolCall{Name: name, Arguments: c.Arguments})
		case KindToolResult:
			var r ToolResult
			if json.Unmarshal(e.Payload, &r) != nil {
				continue
			}
			i, ok := pending[e.CallID]
			if !ok {
				continue
			}
			delete(pending, e.CallID)
			tc := &tr.ToolCalls[i]
			tc.Result, tc.IsError = r.Content, r.IsError
			if tc.Name == FileTool && !r.IsError {
				var a struct {
					Path    *string `json:"path"`
					Content *string `json:"content"`
				}
				if json.Unmarshal(tc.Arguments, &a) == nil && a.Path != nil && a.Content != nil {
					if tr.Files == nil {
						tr.Files = map[string]string{}
					}
					tr.Files[*a.Path] = *a.Content
				}
			}
		case KindRunFinished:
			var f RunFinished
			if json.Unmarshal(e.Payload, &f) == nil {
				tr.Answer, tr.Citations = f.Answer, f.Citations
			}
		}
	}
	return tr
}
