package policy

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/semconv"
)

// GuardConfig configures a Guard.
type GuardConfig struct {
	// Engine decides. Required.
	Engine Authorizer
	// Rules supplies the tools' specs (writes, scope) and the default
	// scope; usually the engine's own rules.
	Rules Rules
	// Principal names the agent in requests and the audit ("agent:NAME"
	// when empty).
	Principal string
	// Audit, when set, receives every decision.
	Audit *AuditLog
	// Queue, when set, receives every require_approval decision.
	Queue *ApprovalQueue
	// TrustedTools are tools whose outputs are not marked untrusted (e.g.
	// a calculator). Every other tool output is untrusted content.
	TrustedTools []string
	// ToolOrigins names where a tool's output comes from when that is not
	// this process (e.g. "mcp:SERVER/TOOL" for a tool an MCP server
	// declared, see agents/mcp.Origins): the output's taint origin is
	// this instead of "tool:NAME", and such a tool is never trusted.
	ToolOrigins map[string]string
	// Name names the policy in the journal (RunStarted.Policy):
	// DefaultName for the built-in policy, else the rules file as given.
	Name string
	// TracerProvider receives one span per decision. Default: none.
	TracerProvider trace.TracerProvider
	Clock          func() time.Time
}

// Guard is the runtime's Authorizer: it rebuilds the taint of a call from
// the conversation (every tool output is untrusted with its origin; every
// model message derives from everything before it; every argument derives
// from the message that made the call), asks the engine, and records the
// decision as a span, an audit entry and (through the runtime) a journal
// event.
type Guard struct {
	cfg     GuardConfig
	tracer  trace.Tracer
	trusted map[string]bool
	record  *journal.PolicyRecord // what runs record they were decided under (nil: nothing)

	// scans caches the detector's findings by content hash: a tool
	// output is scanned once, not again for every later call of the run.
	mu    sync.Mutex
	scans map[[32]byte][]string
}

const scanCacheSize = 4096

func (g *Guard) scan(content string) []string {
	k := sha256.Sum256([]byte(content))
	g.mu.Lock()
	ps, ok := g.scans[k]
	g.mu.Unlock()
	if ok {
		return ps
	}
	ps = Scan(content)
	g.mu.Lock()
	if len(g.scans) >= scanCacheSize {
		clear(g.scans)
	}
	g.scans[k] = ps
	g.mu.Unlock()
	return ps
}

var (
	_ runtime.Authorizer   = (*Guard)(nil)
	_ runtime.PolicySource = (*Guard)(nil)
)

// NewGuard returns a Guard. It does no I/O.
func NewGuard(cfg GuardConfig) (*Guard, error) {
	if cfg.Engine == nil {
		return nil, errors.New("policy guard: engine must be set")
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = noop.NewTracerProvider()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	g := &Guard{cfg: cfg, tracer: cfg.TracerProvider.Tracer("github.com/loomwork/loomwork/agents/policy"), trusted: map[string]bool{}, scans: map[[32]byte][]string{}}
	for _, t := range cfg.TrustedTools {
		g.trusted[t] = true
	}
	if e, ok := cfg.Engine.(*Engine); ok {
		rec, err := recordOf(cfg.Name, e.Rules())
		if err != nil {
			return nil, fmt.Errorf("policy guard: %w", err)
		}
		g.record = rec
	}
	return g, nil
}

// DecisionRecord is the payload of the policy_decision journal event and
// the data of the audit entry.
type DecisionRecord struct {
	Tool      string   `json:"tool"`
	CallID    string   `json:"call_id"`
	Principal string   `json:"principal"`
	Scope     string   `json:"scope"`
	Writes    bool     `json:"writes"`
	Verdict   Verdict  `json:"verdict"`
	Injection []string `json:"injection,omitempty"` // detector patterns seen in the content the call derives from (a signal)
}

// Taint rebuilds the tracker of a call: ids are "context" (the untrusted
// context, see contextOrigin; absent when there is none), "input" (the task),
// "result:CALLID" (a tool output, untrusted, origin "tool:NAME" or
// "doc:ID via tool:NAME"), "message:N" (the Nth assistant message,
// derived from everything before it) and "ARG" for each argument of the
// call (derived from the message that made it). It returns the tracker, the
// argument ids and the injection patterns seen in untrusted content.
func (g *Guard) Taint(call runtime.AuthCall) (*Tracker, []string, []string) {
	t := NewTracker()
	var prior []string
	patterns := map[string]bool{}
	if origin := g.contextOrigin(call); origin != "" {
		// The model read these before its first word, on every request:
		// whatever it says derives from them.
		t.MarkUntrusted("context", origin)
		prior = append(prior, "context")
	}
	asst := 0
	last := ""
	for _, m := range call.Messages {
		switch m.Role {
		case llm.RoleTool:
			id := "result:" + m.ToolCallID
			remote, isRemote := g.remoteOrigin(call, m.ToolName)
			if !g.trusted[m.ToolName] || isRemote {
				via := "tool:" + m.ToolName
				if isRemote {
					via = remote
				}
				origin := via
				if docs := call.Documents[m.ToolCallID]; len(docs) > 0 {
					origin = "doc:" + strings.Join(docs, ",") + " via " + via
				}
				t.MarkUntrusted(id, origin)
				for _, p := range g.scan(m.Content) {
					patterns[p] = true
				}
			}
			prior = append(prior, id)
		case llm.RoleAssistant:
			asst++
			id := "message:" + strconv.Itoa(asst)
			t.Propagate(prior, id)
			prior = append(prior, id)
			last = id
		default:
			prior = append(prior, "input")
		}
	}
	var argIDs []string
	var obj map[string]json.RawMessage
	if json.Unmarshal(call.Arguments, &obj) == nil && len(obj) > 0 {
		for k := range obj {
			argIDs = append(argIDs, k)
		}
		sort.Strings(argIDs)
	} else {
		argIDs = []string{"arguments"}
	}
	if last != "" {
		for _, a := range argIDs {
			t.Propagate([]string{last}, a)
		}
	}
	var ps []string
	for p := range patterns {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return t, argIDs, ps
}

// contextOrigin names the untrusted context of a call ("" when there is
// none): the run's (an untrusted task, evidence and memory in the system
// prompt) and the descriptions of remote tools, which come from their
// server and are sent to the model with every request — an injection
// needs no call to land.
func (g *Guard) contextOrigin(call runtime.AuthCall) string {
	origins := slices.Clone(call.ContextOrigins)
	seen := map[string]bool{}
	var remote []string
	for _, m := range []map[string]string{g.cfg.ToolOrigins, call.ToolOrigins} {
		for _, o := range m {
			if !seen[o] {
				seen[o] = true
				remote = append(remote, o)
			}
		}
	}
	sort.Strings(remote)
	for _, o := range remote {
		origins = append(origins, "tool description "+o)
	}
	const shown = 4
	if len(origins) > shown {
		origins = append(origins[:shown:shown], fmt.Sprintf("and %d more", len(origins)-shown))
	}
	return strings.Join(origins, ", ")
}

// remoteOrigin is a remote tool's origin: the one the tool declares
// (runtime.Tool.Origin, with the call), else the guard's configuration.
func (g *Guard) remoteOrigin(call runtime.AuthCall, tool string) (string, bool) {
	if o, ok := call.ToolOrigins[tool]; ok {
		return o, true
	}
	o, ok := g.cfg.ToolOrigins[tool]
	return o, ok
}

// Authorize implements runtime.Authorizer.
func (g *Guard) Authorize(ctx context.Context, call runtime.AuthCall) (runtime.Authorization, error) {
	start := g.cfg.Clock()
	tr, argIDs, patterns := g.Taint(call)
	spec, known := g.cfg.Rules.Tools[call.Call.Name]
	writes := spec.Writes || (!known && call.Effect)
	scope := g.cfg.Rules.Scope
	if spec.ScopeArg != "" {
		var obj map[string]any
		if json.Unmarshal(call.Arguments, &obj) == nil {
			scope = spec.ScopePrefix + fmt.Sprint(obj[spec.ScopeArg])
		}
	}
	principal := g.cfg.Principal
	if principal == "" {
		principal = "agent:" + call.Agent
	}
	req := Request{Tool: call.Call.Name, Arguments: call.Arguments, Principal: principal, Scope: scope, ArgumentIDs: argIDs, Writes: writes}
	v := g.cfg.Engine.Authorize(req, tr)
	rec := DecisionRecord{Tool: req.Tool, CallID: call.Call.ID, Principal: principal, Scope: scope, Writes: writes, Verdict: v, Injection: patterns}
	// The queue id stays out of the journaled decision: it depends on the
	// process's queue, and the journal must be the same on replay.
	approval := ""
	// A re-check (resume, replay) must match the journal; it does not
	// queue or audit the same decision twice.
	if v.Decision == RequireApproval && g.cfg.Queue != nil && !call.Rechecking {
		id, err := g.cfg.Queue.Request(v, req)
		if err != nil {
			return runtime.Authorization{}, err
		}
		approval = id
	}
	if g.cfg.Audit != nil && !call.Rechecking {
		if _, err := g.cfg.Audit.Append(principal, "tool_call", struct {
			RunID string `json:"run"`
			DecisionRecord
			Approval string `json:"approval,omitempty"`
		}{call.RunID, rec, approval}); err != nil {
			return runtime.Authorization{}, err
		}
	}
	_, span := g.tracer.Start(ctx, semconv.OpPolicyDecision+" "+req.Tool, trace.WithTimestamp(start), trace.WithAttributes(
		attribute.String(semconv.AttrToolName, req.Tool),
		attribute.String(semconv.AttrToolCallID, call.Call.ID),
		attribute.String(semconv.AttrPolicyDecision, string(v.Decision)),
		attribute.String(semconv.AttrPolicyRule, v.Rule),
		attribute.String(semconv.AttrPolicyReason, v.Reason),
		attribute.Bool(semconv.AttrPolicyTainted, v.Tainted),
		attribute.String(semconv.AttrPolicyTaintedArg, v.TaintedArgument),
		attribute.String(semconv.AttrPolicyOrigin, v.Origin),
		attribute.Bool(semconv.AttrPolicyWrites, writes),
		attribute.StringSlice(semconv.AttrInjectionPatterns, patterns),
		attribute.Bool(semconv.AttrJournalReused, call.Rechecking)))
	span.End(trace.WithTimestamp(g.cfg.Clock()))
	a := runtime.Authorization{Allow: v.Decision == Allow, Decision: rec}
	switch v.Decision {
	case Deny:
		a.Observation = fmt.Sprintf("error: policy denied tool %s: %s", req.Tool, v.Reason)
	case RequireApproval:
		// The observation depends on the decision only (not on whether a
		// queue took it), so a replay rebuilds the same conversation.
		a.Observation = fmt.Sprintf("error: tool %s was not run: %s", req.Tool, v.Reason)
		// With an approvals source the runtime holds the call for a
		// human instead (runtime.Config.Approvals).
		a.Approval = &runtime.ApprovalNeed{Reason: v.Reason, Origin: v.Origin}
	}
	return a, nil
}
