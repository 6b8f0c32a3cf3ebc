package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/loomwork/loomwork/agents/approvals"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/mcp"
	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/workflow"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/web"
)

// workflows are the step graphs this binary can run and resume by name.
func workflows() map[string]func() (*workflow.Workflow, error) {
	return map[string]func() (*workflow.Workflow, error){"incident": workflow.Incident}
}

func (m *Main) openJournal(ctx context.Context, path string) (*journaldb.Store, error) {
	j, err := journaldb.Open(ctx, journaldb.Config{Path: path})
	if err != nil {
		return nil, &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	return j, nil
}

// workflowFlags are workflow run's and status's flags.
type workflowFlags struct {
	journal, runID, crashAfter, input, endpoint, dataset, indexCache, workspaces, scriptedModel *string
	asJSON                                                                                      *bool
	pol                                                                                         policyFlags
	mcp                                                                                         mcpFlags
	// inputSet and auditSet say the flag was given (an empty --input is an
	// input; --audit without --policy still receives the approval requests).
	inputSet, auditSet bool
}

func (f *workflowFlags) register(fs *flag.FlagSet) {
	f.journal = fs.String("journal", ".loomwork/runs.journal.db", "SQLite journal holding the run")
	f.runID = fs.String("run", "", "run id (run: an id already in the journal is resumed)")
	f.crashAfter = fs.String("crash-after", "", "exit right after this step's success is durable (a simulated crash, to show the resume)")
	f.asJSON = fs.Bool("json", false, "print the step events (status: the run's summary too) as JSON lines")
	f.input = fs.String("input", "", "a workflow file's input ({{.Input}} in its templates); a resumed run keeps the input it started with")
	f.endpoint = fs.String("otlp-endpoint", "", "send the run's spans over OTLP/gRPC to host:port (e.g. 127.0.0.1:4317 of loom-eval serve)")
	f.dataset = fs.String("dataset", "", "research agent steps and tools: judged dataset folder (default $LOOMWORK_DATASET or the shipped copy)")
	f.indexCache = fs.String("index-cache", ".loomwork/index", "research: folder for the persisted BM25 index")
	f.workspaces = fs.String("workspaces", ".loomwork/workspaces", "coding agent steps: folder of per-run sandbox workspaces")
	f.scriptedModel = fs.String("scripted-model", scriptedAgent, "agent steps: "+scriptedModelUsage)
	f.mcp.add(fs, "give every agent step tools")
	f.pol.register(fs)
	fs.Lookup("audit").Usage = "hash-chained audit `log` (JSON lines) of every agent step's decisions and the approval requests; with --policy none only the approval requests, and only when given; empty: none"
}

// runWorkflow: workflow run NAME|FILE --run ID | workflow status ID.
func (m *Main) runWorkflow(ctx context.Context, args []string) error {
	if len(args) == 0 || (args[0] != "run" && args[0] != "status") {
		fmt.Fprintln(m.Stderr, "Usage: loom-eval workflow run incident|FILE --run ID [--input TEXT] [--journal F] [--otlp-endpoint host:4317] [--policy default|FILE|none] [--audit LOG] [--mcp NAME=CMD | --mcp-url NAME=URL] [--scripted-model agent|obeys-everything] [--crash-after STEP]\n       loom-eval workflow status ID [--journal F] [--json]")
		if len(args) > 0 && isHelp(args[0]) {
			return nil
		}
		return usageError("workflow: want a subcommand: run or status")
	}
	sub := args[0]
	fs := m.newFlagSet("workflow "+sub, "workflow run incident|FILE --run ID [flags] | workflow status ID [flags]")
	var f workflowFlags
	f.register(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	fs.Visit(func(fl *flag.Flag) {
		f.inputSet = f.inputSet || fl.Name == "input"
		f.auditSet = f.auditSet || fl.Name == "audit"
	})
	if fs.NArg() != 1 {
		return usageError("workflow %s: want one argument, got %q", sub, fs.Args())
	}
	j, err := m.openJournal(ctx, *f.journal)
	if err != nil {
		return err
	}
	defer j.Shutdown(ctx)
	if sub == "status" {
		return m.workflowStatus(ctx, j, fs.Arg(0), *f.asJSON)
	}
	return m.workflowRun(ctx, j, &f, fs.Arg(0))
}

// workflowStatus prints run's per-step state, its step events, its
// approvals and its pending gates.
func (m *Main) workflowStatus(ctx context.Context, j *journaldb.Store, runID string, asJSON bool) error {
	evs, approvals, pending, err := workflow.Status(ctx, j, runID)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("workflow status: %w", err)}
	}
	sum, _, err := workflow.Summarize(ctx, j, runID)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("workflow status: %w", err)}
	}
	if asJSON {
		b, _ := json.Marshal(sum)
		fmt.Fprintln(m.Stdout, string(b))
	} else {
		out := termSafe(m.Stdout)
		fmt.Fprintf(out, "run %s (workflow %s): %s\n", runID, sum.Workflow, sum.State)
		for _, s := range sum.Steps {
			extra := ""
			if s.Error != "" {
				extra = "  " + oneLine(s.Error, 160)
			} else if s.Prompt != "" && s.State == workflow.StateWaiting {
				extra = "  " + oneLine(s.Prompt, 160)
			}
			fmt.Fprintf(out, "  %-17s %-9s %-20s attempts=%d/%d%s\n", s.Step, s.Kind, s.State, s.Attempts, s.Retries+1, extra)
		}
		for _, id := range sum.TraceIDs {
			fmt.Fprintf(out, "trace: %s\n", id)
		}
	}
	m.printStepEvents(evs, asJSON)
	for _, a := range approvals {
		verb := "approved"
		if !a.Approved {
			verb = "denied"
		}
		fmt.Fprintf(termSafe(m.Stdout), "approval: %s %s by %s at %s %s\n", a.Step, verb, a.Approver, a.Time.Format(time.RFC3339), a.Reason)
	}
	for _, p := range pending {
		fmt.Fprintf(m.Stdout, "pending approval: %s (loom-eval approve %s %s --approver WHO)\n", p, runID, p)
	}
	return nil
}

// workflowRun runs or resumes a workflow (the built-in incident, or a
// workflow file) as --run, its approval gates in the approval queue beside
// the journal, its spans to --otlp-endpoint, its agent steps under
// --policy.
func (m *Main) workflowRun(ctx context.Context, j *journaldb.Store, f *workflowFlags, name string) error {
	if *f.runID == "" {
		return usageError("workflow run: --run must be set")
	}
	tp, flush, err := m.otlpTracing(ctx, "workflow", *f.endpoint)
	if err != nil {
		return err
	}
	defer flush()
	clients, stopMCP, err := m.mcpConnect(ctx, &f.mcp, tp)
	defer stopMCP()
	if err != nil {
		return err
	}
	az, audit, err := f.pol.guard("workflow run", mcp.Origins(clients...), tp)
	if err != nil {
		return err
	}
	if audit == nil && f.auditSet {
		if audit, err = openAuditFlag(f.pol.audit); err != nil {
			return err
		}
	}
	// The gate is the approval queue beside the journal: a gate is listed
	// by loom-eval approvals and /approvals, answered by approve / deny;
	// agent steps' held calls wait in it too.
	q, _, err := openApprovalQueue(ctx, j, audit, time.Now)
	if err != nil {
		return err
	}
	wf, release, attrs, err := m.loadWorkflow(ctx, j, f, name, workflow.FileConfig{Journal: j, Authorizer: az, Approvals: q, TracerProvider: tp}, clients)
	if err != nil {
		return err
	}
	defer release()
	rn, err := workflow.NewRunner(workflow.Config{Journal: j, Gate: q, TracerProvider: tp, Attributes: attrs})
	if err != nil {
		return err
	}
	res, err := rn.Run(ctx, wf, *f.runID, workflow.RunOptions{CrashAfter: *f.crashAfter})
	m.printStepEvents(res.Events, *f.asJSON)
	if res.TraceID != "" {
		fmt.Fprintf(m.Stdout, "spans: trace %s sent to %s\n", res.TraceID, *f.endpoint)
	}
	return m.workflowOutcome(*f.runID, res, err)
}

// loadWorkflow is the built-in workflow name, or the workflow file at
// name compiled on cfg with the run's input (--input, else the input the
// run started with), and the attributes of its invoke_workflow span.
func (m *Main) loadWorkflow(ctx context.Context, j *journaldb.Store, f *workflowFlags, name string, cfg workflow.FileConfig, clients []*mcp.Client) (*workflow.Workflow, func(), []attribute.KeyValue, error) {
	if mk, ok := workflows()[name]; ok {
		wf, err := mk()
		return wf, func() {}, nil, err
	}
	file, err := workflow.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil, usageError("workflow run: %q is neither a built-in workflow (incident) nor a workflow file: %v", name, err)
	}
	if err != nil {
		return nil, nil, nil, usageError("workflow run: %v", err)
	}
	cfg.Input = *f.input
	if !f.inputSet {
		if cfg.Input, _, err = workflow.RecordedInput(ctx, j, *f.runID); err != nil {
			return nil, nil, nil, &ExitError{Code: ExitRuntimeErr, Err: err}
		}
	}
	cfg.Agents = m.workflowAgents(f, clients)
	wf, release, err := workflow.Compile(file, cfg)
	if err != nil {
		return nil, nil, nil, usageError("workflow run: %v", err)
	}
	return wf, release, []attribute.KeyValue{attribute.String(semconv.AttrWorkflowFile, name)}, nil
}

// workflowAgents opens a file's reference agents as a2a serve does: the
// agent with its scripted policy or --scripted-model's (labelled
// scripted), and the tools of the MCP servers clients (whose pinned lists
// every agent step journals).
func (m *Main) workflowAgents(f *workflowFlags, clients []*mcp.Client) func(context.Context, string) (workflow.RefAgent, error) {
	return func(ctx context.Context, name string) (workflow.RefAgent, error) {
		served, release, err := m.a2aAgent(ctx, &a2aServeFlags{agentName: &name, dataset: f.dataset, indexCache: f.indexCache, workspaces: f.workspaces, scriptedModel: f.scriptedModel, cmd: "workflow run"})
		if err != nil {
			return workflow.RefAgent{}, err
		}
		ra := workflow.RefAgent{Agent: served.agent, Model: served.model, Release: release}
		if len(clients) == 0 {
			return ra, nil
		}
		if ra.Agent, err = withMCPTools(served.agent, clients, &f.mcp); err == nil {
			ra.Attributes, err = mcp.Attributes(nil, clients...)
		}
		if err != nil {
			release()
			return workflow.RefAgent{}, err
		}
		return ra, nil
	}
}

// workflowOutcome says how run ended and is the command's error.
func (m *Main) workflowOutcome(runID string, res workflow.Result, err error) error {
	var sus *workflow.SuspendedError
	var crash *workflow.CrashError
	switch {
	case err == nil:
		fmt.Fprintf(m.Stdout, "run %s completed: %v\n", runID, res.Completed)
		return nil
	case errors.As(err, &sus) && sus.Call != "":
		fmt.Fprintf(termSafe(m.Stdout), "run %s suspended at %s: its agent run %s holds call %s for approval: loom-eval approve %s %s --approver WHO (or deny), then run the workflow again\n",
			runID, sus.Step, sus.AgentRun, sus.Call, sus.AgentRun, sus.Call)
		return nil
	case errors.As(err, &sus):
		fmt.Fprintf(m.Stdout, "run %s suspended at %s: loom-eval approve %s %s --approver WHO (or deny), then run it again\n", runID, sus.Step, runID, sus.Step)
		return nil
	case errors.As(err, &crash):
		fmt.Fprintf(m.Stdout, "run %s crashed (simulated) after %s with %d steps done; run it again to resume\n", runID, crash.Step, len(res.Completed))
		return &ExitError{Code: ExitFailure, Err: err}
	default:
		return &ExitError{Code: ExitFailure, Err: err}
	}
}

func (m *Main) printStepEvents(evs []workflow.StepEvent, asJSON bool) {
	for i, e := range evs {
		if asJSON {
			b, _ := json.Marshal(e)
			fmt.Fprintln(m.Stdout, string(b))
			continue
		}
		extra := ""
		if e.Approver != "" {
			extra = fmt.Sprintf("  by %s: %s", e.Approver, e.Reason)
		}
		if e.Error != "" {
			extra = "  " + e.Error
		}
		fmt.Fprintf(termSafe(m.Stdout), "%2d  %-17s %-12s attempt=%d%s\n", i, e.Step, e.Event, e.Attempt, extra)
	}
}

// runApprove and runDeny answer a run waiting for a human: a workflow at
// an approval gate (ID is the step) or an agent run at a held tool call
// (ID is the call id), through the approval queue beside the journal.
func (m *Main) runApprove(ctx context.Context, args []string) error {
	return m.answer(ctx, "approve", args)
}
func (m *Main) runDeny(ctx context.Context, args []string) error { return m.answer(ctx, "deny", args) }

func (m *Main) answer(ctx context.Context, verb string, args []string) error {
	fs := m.newFlagSet(verb, verb+" RUN ID --approver WHO [--reason TEXT] [--journal F] [--audit F]")
	journalPath := fs.String("journal", ".loomwork/runs.journal.db", "SQLite journal holding the run and its approval queue")
	approver := fs.String("approver", "", "who answers (required; journaled and audited)")
	reason := fs.String("reason", "", "why (required to deny; the run is told it)")
	auditPath := fs.String("audit", defaultAuditFile, "policy audit `log` (JSON lines) that receives the answer, with who gave it and why (the log runs append their decisions to by default); empty: none")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError("%s: want RUN ID (the workflow step or the held tool call's id; loom-eval approvals lists them), got %q", verb, fs.Args())
	}
	if strings.TrimSpace(*approver) == "" {
		return usageError("%s: --approver must be set", verb)
	}
	if verb == "deny" && strings.TrimSpace(*reason) == "" {
		return usageError("deny: --reason must be set")
	}
	audit, err := openAuditFlag(*auditPath)
	if err != nil {
		return err
	}
	j, err := m.openJournal(ctx, *journalPath)
	if err != nil {
		return err
	}
	defer j.Shutdown(ctx)
	q, _, err := openApprovalQueue(ctx, j, audit, time.Now)
	if err != nil {
		return err
	}
	run, id := fs.Arg(0), fs.Arg(1)
	e, err := q.Answer(ctx, run, id, verb == "approve", *approver, *reason)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	if e.Kind == approvals.KindToolCall {
		again := "run it again (the same run id) to resume it"
		// An agent step's run (WORKFLOWRUN/STEP, a retry's
		// WORKFLOWRUN/STEP/N) resumes with its workflow.
		for i := strings.LastIndex(run, "/"); i > 0; i = strings.LastIndex(run[:i], "/") {
			if _, ok, _ := workflow.Summarize(ctx, j, run[:i]); ok {
				again = fmt.Sprintf("run its workflow again (loom-eval workflow run FILE --run %s) to resume it", run[:i])
				break
			}
		}
		fmt.Fprintf(termSafe(m.Stdout), "run %s call %s (tool %s): %s by %s; %s\n", run, id, e.Tool, e.Status, e.Approver, again)
		return nil
	}
	fmt.Fprintf(termSafe(m.Stdout), "run %s step %s: %s by %s; run the workflow again (loom-eval workflow run WORKFLOW --run %s) to resume or stop it\n", run, id, e.Status, e.Approver, run)
	return nil
}

// webApprovals is the UI's view of the approval queue beside a journal
// (web.Approvals): workflow gates and held tool calls. audit, when set,
// receives every answer.
type webApprovals struct {
	j     *journaldb.Store
	clock func() time.Time
	audit *policy.AuditLog
}

func (a webApprovals) queue(ctx context.Context) (*approvals.Store, error) {
	return approvals.Open(ctx, approvals.Config{Journal: a.j, Audit: a.audit, Clock: a.clock})
}

func (a webApprovals) Pending(ctx context.Context) ([]web.PendingApproval, error) {
	q, err := a.queue(ctx)
	if err != nil {
		return nil, err
	}
	ps, err := q.Pending(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]web.PendingApproval, 0, len(ps))
	for _, p := range ps {
		out = append(out, web.PendingApproval{RunID: p.RunID, Kind: p.Kind, Workflow: p.Name, Step: p.ID, Tool: p.Tool,
			Arguments: p.Arguments, Reason: p.Reason, Origin: p.Origin, Prompt: p.Prompt, Since: p.Requested})
	}
	return out, nil
}

func (a webApprovals) Answer(ctx context.Context, runID, step string, approved bool, approver, reason string) error {
	q, err := a.queue(ctx)
	if err != nil {
		return err
	}
	_, err = q.Answer(ctx, runID, step, approved, approver, reason)
	return err
}

// WorkflowRuns implements web.Workflows: the workflow runs of the journal
// (workflow.Summaries), each step's detail clipped for the page.
func (a webApprovals) WorkflowRuns(ctx context.Context) ([]web.WorkflowRun, error) {
	sums, err := workflow.Summaries(ctx, a.j)
	if err != nil {
		return nil, err
	}
	out := make([]web.WorkflowRun, 0, len(sums))
	for _, s := range sums {
		run := web.WorkflowRun{RunID: s.RunID, Workflow: s.Workflow, State: s.State, Started: s.Started, Updated: s.Updated, TraceIDs: s.TraceIDs}
		for _, st := range s.Steps {
			detail := st.Output
			switch {
			case st.Error != "":
				detail = st.Error
			case st.State == workflow.StateWaiting:
				detail = st.Prompt
			case st.Approver != "" && st.Output == "":
				detail = "by " + st.Approver
			}
			run.Steps = append(run.Steps, web.WorkflowStep{Step: st.Step, Kind: string(st.Kind), State: st.State,
				Attempts: st.Attempts, Retries: st.Retries, Detail: oneLine(detail, 240)})
		}
		out = append(out, run)
	}
	return out, nil
}
