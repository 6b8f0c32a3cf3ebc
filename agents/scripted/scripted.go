// Package scripted is a deterministic model for tests, baselines and demos.
// It answers from a script — a list of assistant turns, each text and/or
// tool calls with token usage — or from a function, and labels every answer
// "scripted" (provider "scripted") so a scripted run is never mistaken for
// a live one in journals, spans or reports.
//
// The turn answered is chosen by the conversation, not by a call counter:
// a request with n assistant messages gets turn n. So a run resumed in a
// new process after a crash gets the same answers as the run that crashed.
// The model also checks that the conversation is the one the script
// expects — earlier assistant turns as scripted, every tool call answered,
// plus any per-turn expectations — and fails with a clear error otherwise.
package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/loomwork/loomwork/agents/llm"
)

// DefaultModel is the response model name when a script names none.
const DefaultModel = "scripted"

// Errors, matched with errors.Is.
var (
	ErrExhausted = errors.New("script exhausted")
	ErrDiverged  = errors.New("conversation diverged from the script")
)

// Script is a scripted conversation.
type Script struct {
	// Model is reported as the response model. Default "scripted".
	Model string `json:"model,omitempty"`
	Turns []Turn `json:"turns"`
}

// Turn is one assistant answer.
type Turn struct {
	Content    string         `json:"content,omitempty"`
	ToolCalls  []llm.ToolCall `json:"tool_calls,omitempty"`
	Usage      llm.Usage      `json:"usage"`
	StopReason string         `json:"stop_reason,omitempty"`
	// Expect, when set, is checked against the request before answering.
	Expect *Expect `json:"expect,omitempty"`
}

// Expect states what the request for a turn must look like.
type Expect struct {
	// ToolsOffered false requires the tools-withheld final call; true
	// requires tools to be offered.
	ToolsOffered *bool `json:"tools_offered,omitempty"`
	// LastRole is the role of the request's last message.
	LastRole llm.Role `json:"last_role,omitempty"`
	// LastContains must be a substring of the last message's content.
	LastContains string `json:"last_contains,omitempty"`
	// ToolError requires the last message to be a tool result with this
	// IsError value.
	ToolError *bool `json:"tool_error,omitempty"`
}

// Parse reads a script (JSON) and validates it. name is used in errors.
func Parse(r io.Reader, name string) (Script, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return Script{}, fmt.Errorf("parse script %s: %w", name, err)
	}
	if dec.More() {
		return Script{}, fmt.Errorf("parse script %s: data after the script object", name)
	}
	if err := s.Validate(); err != nil {
		return Script{}, fmt.Errorf("parse script %s: %w", name, err)
	}
	return s, nil
}

// LoadFile reads a script file.
func LoadFile(path string) (Script, error) {
	f, err := os.Open(path)
	if err != nil {
		return Script{}, fmt.Errorf("load script: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// Validate checks the script: at least one turn, every tool call with a
// name, an id unique in the script, and arguments that are a JSON object.
func (s Script) Validate() error {
	if len(s.Turns) == 0 {
		return errors.New("turns: the script has no turns")
	}
	var errs []error
	ids := map[string]int{}
	for i, t := range s.Turns {
		if t.Content == "" && len(t.ToolCalls) == 0 {
			errs = append(errs, fmt.Errorf("turns[%d]: neither content nor tool_calls", i))
		}
		for j, c := range t.ToolCalls {
			where := fmt.Sprintf("turns[%d].tool_calls[%d]", i, j)
			if c.ID == "" {
				errs = append(errs, fmt.Errorf("%s.id: must be set", where))
			} else if prev, dup := ids[c.ID]; dup {
				errs = append(errs, fmt.Errorf("%s.id: %q already used in turns[%d]", where, c.ID, prev))
			} else {
				ids[c.ID] = i
			}
			if c.Name == "" {
				errs = append(errs, fmt.Errorf("%s.name: must be set", where))
			}
			if a := bytes.TrimSpace(c.Arguments); len(a) > 0 && a[0] != '{' {
				errs = append(errs, fmt.Errorf("%s.arguments: must be a JSON object", where))
			}
		}
	}
	return errors.Join(errs...)
}

// Func answers turn n (the number of assistant messages in req) directly;
// for tests that compute their answers.
type Func func(req llm.Request, turn int) (Turn, error)

// Model is the scripted model. It is safe for concurrent use.
type Model struct {
	model  string
	script *Script
	fn     Func
	calls  atomic.Int64
}

// New returns a model that answers from s.
func New(s Script) (*Model, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("scripted model: %w", err)
	}
	m := s.Model
	if m == "" {
		m = DefaultModel
	}
	return &Model{model: m, script: &s}, nil
}

// NewFunc returns a model that answers with fn.
func NewFunc(model string, fn Func) *Model {
	if model == "" {
		model = DefaultModel
	}
	return &Model{model: model, fn: fn}
}

// Label is always "scripted".
func (m *Model) Label() string { return llm.LabelScripted }

// Calls returns the number of Complete calls so far.
func (m *Model) Calls() int { return int(m.calls.Load()) }

// Complete answers req.
func (m *Model) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	m.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	if err := llm.ValidateOrder(req.Messages); err != nil {
		return llm.Response{}, fmt.Errorf("scripted model: %w: %v", ErrDiverged, err)
	}
	turn := 0
	for _, msg := range req.Messages {
		if msg.Role == llm.RoleAssistant {
			turn++
		}
	}
	var t Turn
	if m.fn != nil {
		var err error
		if t, err = m.fn(req, turn); err != nil {
			return llm.Response{}, fmt.Errorf("scripted model: turn %d: %w", turn, err)
		}
	} else {
		if err := m.check(req, turn); err != nil {
			return llm.Response{}, fmt.Errorf("scripted model: %w", err)
		}
		t = m.script.Turns[turn]
	}
	stop := t.StopReason
	if stop == "" {
		stop = "stop"
		if len(t.ToolCalls) > 0 {
			stop = "tool_calls"
		}
	}
	calls := make([]llm.ToolCall, len(t.ToolCalls))
	for i, c := range t.ToolCalls {
		if len(bytes.TrimSpace(c.Arguments)) == 0 {
			c.Arguments = json.RawMessage("{}")
		}
		calls[i] = c
	}
	if len(calls) == 0 {
		calls = nil
	}
	return llm.Response{
		Message:    llm.Message{Role: llm.RoleAssistant, Content: t.Content, ToolCalls: calls},
		StopReason: stop,
		Usage:      t.Usage,
		Provider:   "scripted",
		Model:      m.model,
		Label:      llm.LabelScripted,
	}, nil
}

// check verifies that req is the conversation the script leads to at turn.
func (m *Model) check(req llm.Request, turn int) error {
	turns := m.script.Turns
	if turn >= len(turns) {
		return fmt.Errorf("%w: the script has %d turns and the conversation asks for turn %d (it has %d assistant messages)",
			ErrExhausted, len(turns), turn+1, turn)
	}
	// Earlier assistant messages must be the script's earlier turns.
	k := 0
	for i, msg := range req.Messages {
		if msg.Role != llm.RoleAssistant {
			continue
		}
		want := turns[k]
		if got, w := callIDs(msg.ToolCalls), callIDs(want.ToolCalls); got != w {
			return fmt.Errorf("%w: message %d (turn %d) made tool calls [%s], the script's turn %d made [%s]", ErrDiverged, i, k+1, got, k+1, w)
		}
		if msg.Content != want.Content {
			return fmt.Errorf("%w: message %d (turn %d) has different text than the script's turn %d", ErrDiverged, i, k+1, k+1)
		}
		k++
	}
	// Every call of the previous turn must have been answered.
	if turn > 0 {
		answered := map[string]bool{}
		for _, msg := range req.Messages {
			if msg.Role == llm.RoleTool {
				answered[msg.ToolCallID] = true
			}
		}
		for _, c := range turns[turn-1].ToolCalls {
			if !answered[c.ID] {
				return fmt.Errorf("%w: turn %d: no tool result for call %s (%s) of turn %d", ErrDiverged, turn+1, c.ID, c.Name, turn)
			}
		}
	}
	e := turns[turn].Expect
	if e == nil {
		return nil
	}
	var last llm.Message
	if n := len(req.Messages); n > 0 {
		last = req.Messages[n-1]
	}
	switch {
	case e.ToolsOffered != nil && *e.ToolsOffered != (len(req.Tools) > 0):
		if *e.ToolsOffered {
			return fmt.Errorf("%w: turn %d expects tools to be offered, the request offers none", ErrDiverged, turn+1)
		}
		return fmt.Errorf("%w: turn %d expects the tools-withheld final call, the request offers %d tools", ErrDiverged, turn+1, len(req.Tools))
	case e.LastRole != "" && last.Role != e.LastRole:
		return fmt.Errorf("%w: turn %d expects the last message to be %s, it is %s", ErrDiverged, turn+1, e.LastRole, last.Role)
	case e.LastContains != "" && !strings.Contains(last.Content, e.LastContains):
		return fmt.Errorf("%w: turn %d expects the last message to contain %q, it is %q", ErrDiverged, turn+1, e.LastContains, truncate(last.Content, 200))
	case e.ToolError != nil && (last.Role != llm.RoleTool || last.IsError != *e.ToolError):
		return fmt.Errorf("%w: turn %d expects the last message to be a tool result with is_error=%v, it is %s (is_error=%v)", ErrDiverged, turn+1, *e.ToolError, last.Role, last.IsError)
	}
	return nil
}

func callIDs(calls []llm.ToolCall) string {
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.ID
	}
	return strings.Join(ids, ", ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
