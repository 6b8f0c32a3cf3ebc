package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
)

// Decision is an authorization outcome.
type Decision string

// Decisions.
const (
	Allow           Decision = "allow"
	Deny            Decision = "deny"
	RequireApproval Decision = "require_approval"
)

// Rule matches a tool name and a scope with glob patterns (path.Match
// syntax: * any run of characters except '/', ? one, [a-z] a class) and
// decides. Only allow and deny are rule decisions; approval comes from
// taint. A scope read from a tool's argument (ToolSpec.ScopeArg) is never
// globbed as a raw string: it is parsed per ToolSpec.ScopeType and the
// pattern is matched against each parsed value (see scopeValues).
type Rule struct {
	Tool     string   `json:"tool"`
	Scope    string   `json:"scope,omitempty"` // default "*"
	Decision Decision `json:"decision"`
	Note     string   `json:"note,omitempty"`
}

// ToolSpec says what the policy must know about a tool: whether it writes,
// and how its scope is read from its arguments.
type ToolSpec struct {
	// Writes marks a tool whose call changes something outside the run
	// (sends, publishes, deploys). Tainted arguments escalate a write.
	Writes bool `json:"writes,omitempty"`
	// ScopeArg names the argument whose value becomes the request's scope
	// as ScopePrefix+value (e.g. "to:" + the recipient). Empty: the scope
	// is the request's default scope.
	ScopeArg    string `json:"scope_arg,omitempty"`
	ScopePrefix string `json:"scope_prefix,omitempty"`
	// ScopeType says how the argument is parsed (required with ScopeArg):
	// ScopeEmail (an address list, net/mail: an allow rule must match every
	// address, a deny rule any) or ScopeURL (net/url, matched as
	// scheme://host/path). A value that does not parse is denied.
	ScopeType string `json:"scope_type,omitempty"`
}

// Scope types.
const (
	ScopeEmail = "email"
	ScopeURL   = "url"
)

// Rules is the policy file: rules in order, the tools' specs, and the
// default scope of a request.
type Rules struct {
	Version int                 `json:"version"`
	Scope   string              `json:"scope,omitempty"`
	Rules   []Rule              `json:"rules"`
	Tools   map[string]ToolSpec `json:"tools,omitempty"`
}

// Validate reports every problem, naming the rule.
func (r Rules) Validate() error {
	var errs []error
	if r.Version != 1 {
		errs = append(errs, fmt.Errorf("version must be 1 (got %d)", r.Version))
	}
	for i, ru := range r.Rules {
		if ru.Tool == "" {
			errs = append(errs, fmt.Errorf("rules[%d]: tool pattern must be set", i))
		} else if _, err := path.Match(ru.Tool, ""); err != nil {
			errs = append(errs, fmt.Errorf("rules[%d]: tool pattern %q: %w", i, ru.Tool, err))
		}
		if _, err := path.Match(ru.Scope, ""); err != nil {
			errs = append(errs, fmt.Errorf("rules[%d] (%s): scope pattern %q: %w", i, ru.Tool, ru.Scope, err))
		}
		if ru.Decision != Allow && ru.Decision != Deny {
			errs = append(errs, fmt.Errorf("rules[%d] (%s): decision must be allow or deny (got %q)", i, ru.Tool, ru.Decision))
		}
	}
	names := make([]string, 0, len(r.Tools))
	for n := range r.Tools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		spec := r.Tools[n]
		switch {
		case spec.ScopeArg == "" && spec.ScopeType != "":
			errs = append(errs, fmt.Errorf("tools.%s: scope_type needs scope_arg", n))
		case spec.ScopeArg != "" && spec.ScopeType != ScopeEmail && spec.ScopeType != ScopeURL:
			errs = append(errs, fmt.Errorf("tools.%s: scope_arg needs scope_type %q or %q (got %q): an argument is matched per parsed value, never as a raw string", n, ScopeEmail, ScopeURL, spec.ScopeType))
		}
	}
	return errors.Join(errs...)
}

// ParseRules decodes a policy file (JSON, unknown fields refused); name is
// used in errors.
func ParseRules(rd io.Reader, name string) (Rules, error) {
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	var r Rules
	if err := dec.Decode(&r); err != nil {
		return Rules{}, fmt.Errorf("policy %s: %w", name, err)
	}
	if dec.More() {
		return Rules{}, fmt.Errorf("policy %s: trailing data after the policy object", name)
	}
	if err := r.Validate(); err != nil {
		return Rules{}, fmt.Errorf("policy %s: %w", name, err)
	}
	return r, nil
}

// LoadRules reads a policy file.
func LoadRules(file string) (Rules, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return Rules{}, fmt.Errorf("policy: %w", err)
	}
	return ParseRules(bytes.NewReader(b), file)
}

// Request is one authorization question.
type Request struct {
	Tool      string
	Arguments json.RawMessage
	Principal string
	Scope     string
	// ArgumentIDs are the tracker ids of the values the arguments carry.
	ArgumentIDs []string
	Writes      bool
}

// Verdict is an Engine's answer.
type Verdict struct {
	Decision        Decision `json:"decision"`
	Rule            string   `json:"rule,omitempty"` // the deciding rule's tool pattern; "" for taint or default deny
	Tainted         bool     `json:"tainted"`
	TaintedArgument string   `json:"tainted_argument,omitempty"`
	Origin          string   `json:"origin,omitempty"`
	Reason          string   `json:"reason"`
}

// Authorizer is the interface the Guard asks; Engine implements it (and
// another engine, e.g. one on Rego, can stand behind the same interface).
type Authorizer interface {
	Authorize(req Request, t *Tracker) Verdict
}

// Engine decides in the reference order.
type Engine struct {
	rules Rules
}

// NewEngine returns an engine on validated rules.
func NewEngine(r Rules) (*Engine, error) {
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return &Engine{rules: r}, nil
}

// Rules returns the engine's rules.
func (e *Engine) Rules() Rules { return e.rules }

func match(pattern, s string) bool {
	if pattern == "" {
		pattern = "*"
	}
	ok, _ := path.Match(pattern, s) // patterns were validated
	return ok
}

// matches reports whether the rule covers req, whose scope is vals (one
// value, or each parsed value of a typed scope): an allow rule must match
// every value, a deny rule any.
func (ru Rule) matches(req Request, vals []string) bool {
	if !match(ru.Tool, req.Tool) {
		return false
	}
	for _, v := range vals {
		ok := match(ru.Scope, v)
		if ru.Decision == Deny && ok {
			return true
		}
		if ru.Decision != Deny && !ok {
			return false
		}
	}
	return ru.Decision != Deny && len(vals) > 0
}

// scopeValues is req's scope as the values rules are matched against: the
// scope itself, or, for a tool whose scope is a typed argument, each
// parsed value in canonical form (prefix kept).
func (e *Engine) scopeValues(req Request) ([]string, error) {
	spec, ok := e.rules.Tools[req.Tool]
	if !ok || spec.ScopeArg == "" {
		return []string{req.Scope}, nil
	}
	raw, ok := strings.CutPrefix(req.Scope, spec.ScopePrefix)
	if !ok {
		return nil, fmt.Errorf("scope %q lacks the prefix %q", req.Scope, spec.ScopePrefix)
	}
	switch spec.ScopeType {
	case ScopeEmail:
		return parseAddresses(spec.ScopePrefix, raw)
	case ScopeURL:
		u, err := parseScopeURL(raw)
		if err != nil {
			return nil, err
		}
		return []string{spec.ScopePrefix + u}, nil
	}
	return nil, fmt.Errorf("unknown scope type %q", spec.ScopeType)
}

func (ru Rule) why(verb string) string {
	s := fmt.Sprintf("%s by rule '%s'", verb, ru.Tool)
	if ru.Note != "" {
		s += " - " + ru.Note
	}
	return s
}

// Authorize decides: a matching deny is terminal; a write with a tainted
// argument requires approval even when a rule allows it; then the first
// matching allow; otherwise deny. A tainted read stays allowed: reading
// untrusted data is what retrieval is for.
func (e *Engine) Authorize(req Request, t *Tracker) Verdict {
	v := Verdict{}
	if t != nil {
		for _, id := range req.ArgumentIDs {
			if t.IsTainted(id) {
				v.Tainted, v.TaintedArgument, v.Origin = true, id, t.Origin(id)
				break
			}
		}
	}
	vals, err := e.scopeValues(req)
	if err != nil {
		// Fail closed: a scope the policy cannot read is one no rule can
		// be trusted to have meant.
		v.Decision = Deny
		v.Reason = fmt.Sprintf("scope of '%s' does not parse (%v): denied", req.Tool, err)
		return v
	}
	for _, ru := range e.rules.Rules {
		if ru.Decision == Deny && ru.matches(req, vals) {
			v.Decision, v.Rule, v.Reason = Deny, ru.Tool, ru.why("denied")
			return v
		}
	}
	if req.Writes && v.Tainted {
		v.Decision = RequireApproval
		v.Reason = fmt.Sprintf("write to '%s' carries untrusted argument '%s' (origin: %s); human approval required", req.Tool, v.TaintedArgument, v.Origin)
		return v
	}
	for _, ru := range e.rules.Rules {
		if ru.Decision == Allow && ru.matches(req, vals) {
			v.Decision, v.Rule, v.Reason = Allow, ru.Tool, ru.why("allowed")
			return v
		}
	}
	v.Decision = Deny
	v.Reason = fmt.Sprintf("no rule allows '%s' in scope '%s' (default deny)", req.Tool, req.Scope)
	return v
}
