// Package grade runs a case's graders on its trials and writes each
// grader's verdict ({name, passed, score, reason}) onto the trial, so the
// scorer can decide success from them (every required grader passed).
//
// Deterministic graders (equals, contains, regex, json_schema, number,
// evidence, tool_called, trace) run here, on the trial's transcript and
// trace. Code graders run a Python function in a sandbox and model graders
// ask a judge model; both are reached through the small interfaces below
// (CodeRunner, Judge), which the binary wires to agents/sandbox and
// agents/gateway, so the package does no I/O itself. ScriptedJudge is the
// deterministic judge for tests, labelled scripted in every grade.
//
// The transcript a grader reads comes from the trial (its transcript
// field), else from its journal (filled by the caller before grading),
// else from its spans (TranscriptFromSpans).
package grade

import (
	"context"
	"io"

	"github.com/loomwork/loomwork/scorer/pricing"
)

// CodeRunner runs one program in a sandbox: no network, no host
// filesystem beyond the interpreter, default limits. *sandboxed* runners
// implement it (agents/sandbox via the binary's wiring).
type CodeRunner interface {
	RunCode(ctx context.Context, req CodeRequest) (CodeResult, error)
}

// CodeRequest is a program to run in a fresh workspace.
type CodeRequest struct {
	// Files are written into the workspace (mounted at /work inside the
	// sandbox) before the run: slash-separated relative path → content.
	Files map[string][]byte
	// Command is the argv, e.g. ["/usr/bin/python3", "-I", "/work/_loomwork_grader/harness.py"].
	Command []string
	Stdin   []byte
}

// CodeResult is how the program ended and what it printed.
type CodeResult struct {
	Stdout, Stderr string
	Exited         bool
	ExitCode       int
	// Reason is the sandbox's end reason ("exit", "timeout", "memory", ...).
	Reason   string
	Evidence []string
}

// Judge answers a judging prompt with one model call.
type Judge interface {
	Judge(ctx context.Context, req JudgeRequest) (JudgeReply, error)
}

// JudgeRequest is one judging call.
type JudgeRequest struct {
	// Model is the judge model a grader asks for; "" is the judge's default.
	Model  string
	System string
	Prompt string
	// MaxTokens caps the judge's answer.
	MaxTokens int
}

// JudgeReply is the judge's answer and what it cost.
type JudgeReply struct {
	Text string
	// ModelLabel is "scripted" for a scripted judge, "live" for a provider.
	ModelLabel string
	Provider   string
	Model      string
	// InputTokens and OutputTokens are the call's usage.
	InputTokens, OutputTokens int64
	// CostUSD is nil when unknown (an unpriced judge model).
	CostUSD *float64
}

// Env is what grading needs beyond the trials.
type Env struct {
	// Code runs code graders; nil: a case with a code grader is an error.
	Code CodeRunner
	// Judge answers model and pairwise graders; nil: a case with one is an
	// error.
	Judge Judge
	// Prices price inline spans for trace graders (nil: the trial's own
	// cost only).
	Prices *pricing.Table
	// Regrade runs code and model graders again even when a trial carries
	// their grades (by default a recorded verdict is kept: a judge's answer
	// cost money and a rerun may differ). Deterministic graders always run.
	Regrade bool
	// Progress, when set, receives a line when Trials starts running code
	// and model graders and one per trial they ran on ("grade: N/M trials
	// graded (case C trial T: VERDICTS)"); recorded verdicts say nothing.
	Progress io.Writer
}
