package grade

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/loomwork/loomwork/datasets"
)

// checkPlan is what loomwork_checks.run_checks hands the harness in the
// grader's sandbox: the calls to make and, for each, the expected value or
// exception. The expected values stay here; the solution's sandbox is
// sent the arguments only.
type checkPlan struct {
	Module string       `json:"module"`
	Name   string       `json:"name"`
	Before *beforeHook  `json:"before,omitempty"`
	Calls  []plannedRun `json:"calls"`
}

type beforeHook struct {
	Name   string `json:"name"`
	Source string `json:"source"`
}

type plannedRun struct {
	Args      json.RawMessage `json:"args"`
	Call      string          `json:"call"`
	WantShown string          `json:"want_shown"`
	Want      json.RawMessage `json:"want,omitempty"`
	Raises    string          `json:"raises,omitempty"`
}

// driverInput is all the solution's sandbox is told.
type driverInput struct {
	Module string        `json:"module"`
	Name   string        `json:"name"`
	Before *beforeHook   `json:"before,omitempty"`
	Calls  []driverCalls `json:"calls"`
}

type driverCalls struct {
	Args json.RawMessage `json:"args"`
}

// callResult is one line of the driver's result channel.
type callResult struct {
	I           *int            `json:"i"`
	Value       json.RawMessage `json:"value"`
	Shown       string          `json:"shown"`
	Raised      []string        `json:"raised"`
	Message     string          `json:"message"`
	Unencodable string          `json:"unencodable"`
	ArgsChanged string          `json:"args_changed"`
	Imported    bool            `json:"imported"`
	ImportError string          `json:"import_error"`
	NoFunction  string          `json:"no_function"`
	Done        *int            `json:"done"`
}

var identPath = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// validate checks a plan from the grader's sandbox (the grader is trusted,
// but a plan that is not one is the grader's bug, not a verdict) and
// returns each check's decoded expected value (nil for a Raises check).
func (p *checkPlan) validate() ([]any, error) {
	switch {
	case p == nil:
		return nil, fmt.Errorf("no plan")
	case !identPath.MatchString(p.Module):
		return nil, fmt.Errorf("module %q is not a module name", p.Module)
	case !identPath.MatchString(p.Name) || strings.Contains(p.Name, "."):
		return nil, fmt.Errorf("function %q is not a name", p.Name)
	case len(p.Calls) == 0 || len(p.Calls) > maxChecks:
		return nil, fmt.Errorf("%d checks, want 1 to %d", len(p.Calls), maxChecks)
	}
	wants := make([]any, len(p.Calls))
	for i, c := range p.Calls {
		args, err := decodeValue(c.Args)
		if err != nil {
			return nil, fmt.Errorf("check %d: arguments: %w", i, err)
		}
		if a, ok := args.([]any); !ok || a[0] != "tuple" {
			return nil, fmt.Errorf("check %d: arguments are not a tuple", i)
		}
		if (c.Raises == "") == (len(c.Want) == 0) {
			return nil, fmt.Errorf("check %d: want a value or an exception, not both or neither", i)
		}
		if len(c.Want) > 0 {
			if wants[i], err = decodeValue(c.Want); err != nil {
				return nil, fmt.Errorf("check %d: expected value: %w", i, err)
			}
		}
	}
	return wants, nil
}

// runPlan runs the solution in a sandbox of its own under the driver,
// then decides every check here. Whatever the solution does — exit,
// hang, crash, print, write lines of its own into the result channel —
// is a failed solution; only a plan that is not one, or a sandbox that
// cannot run, is the grader's error.
func runPlan(ctx context.Context, run CodeRunner, g *datasets.Grader, p *checkPlan, runFiles map[string][]byte, gr *datasets.Grade) error {
	wants, err := p.validate()
	if err != nil {
		gr.Error = "run_checks made no usable plan: " + err.Error()
		return nil
	}
	in := driverInput{Module: p.Module, Name: p.Name, Before: p.Before, Calls: make([]driverCalls, len(p.Calls))}
	for i, c := range p.Calls {
		in.Calls[i].Args = c.Args
	}
	stdin, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("driver input: %w", err)
	}
	files := make(map[string][]byte, len(runFiles)+2)
	for k, v := range runFiles {
		files[k] = v
	}
	files[driverFile], files[driverValues] = driver, values
	res, err := run.RunCode(ctx, CodeRequest{Files: files, Command: []string{Python, "-I", "/work/" + driverFile}, Stdin: stdin})
	if err != nil {
		return fmt.Errorf("code grader %s: the solution's sandbox: %w", g.File, err)
	}
	gr.Sandbox = &datasets.GraderSandbox{Reason: res.Reason, ExitCode: res.ExitCode, Evidence: res.Evidence}
	if s := strings.TrimSpace(res.Stderr); s != "" {
		gr.Output = capOutput(strings.TrimSpace(gr.Output+"\n[solution's output]\n"+s), "")
	}
	gr.Passed, gr.Score = false, 0
	lines, tamper := readResults(res.Stdout)
	if tamper != "" {
		gr.Reason = "the solution wrote to the grader's result channel (" + tamper + "): failed"
		return nil
	}
	n := len(p.Calls)
	if len(lines) == 0 {
		gr.Reason = ended(res, "while it was imported, before any hidden test ran")
		return nil
	}
	head := lines[0]
	switch {
	case head.ImportError != "":
		gr.Reason = clip(head.ImportError)
		return nil
	case head.NoFunction != "":
		gr.Reason = clip(head.NoFunction)
		return nil
	case !head.Imported:
		gr.Reason = "the solution wrote to the grader's result channel (line 1 is not the driver's): failed"
		return nil
	}
	results := lines[1:]
	done := len(results) > 0 && results[len(results)-1].Done != nil
	if done {
		results = results[:len(results)-1]
	}
	for i, r := range results {
		if r.I == nil || *r.I != i || i >= n || r.Done != nil {
			gr.Reason = fmt.Sprintf("the solution wrote to the grader's result channel (result %d is out of order): failed", i+1)
			return nil
		}
	}
	if !done || len(results) != n || *lines[len(lines)-1].Done != n {
		gr.Reason = ended(res, fmt.Sprintf("after %d of %d hidden tests", len(results), n))
		return nil
	}
	passed, first := 0, ""
	for i, r := range results {
		ok, what := judgeCall(p.Calls[i], wants[i], r)
		if ok {
			passed++
		} else if first == "" {
			first = fmt.Sprintf("%s %s, want %s", p.Calls[i].Call, what, p.Calls[i].WantShown)
		}
	}
	gr.Passed, gr.Score = passed == n, float64(passed)/float64(n)
	gr.Reason = fmt.Sprintf("%d/%d hidden tests passed", passed, n)
	if first != "" {
		gr.Reason += "; first failure: " + first
	}
	return nil
}

// ended says why a solution's process stopped before the driver finished.
func ended(res CodeResult, when string) string {
	if res.Reason != "" && res.Reason != "exit" {
		return fmt.Sprintf("the grader's sandbox ended the run: %s%s (%s)", res.Reason, evidence(res.Evidence), when)
	}
	return fmt.Sprintf("the solution's process exited (code %d) %s: failed", res.ExitCode, when)
}

// readResults parses the driver's channel strictly: every stdout line
// (blank lines aside) must be one of its result lines.
func readResults(stdout string) ([]callResult, string) {
	var out []callResult
	for n, line := range strings.Split(stdout, "\n") {
		if line == "" {
			continue
		}
		rest, ok := strings.CutPrefix(line, resultPrefix)
		if !ok {
			return nil, fmt.Sprintf("stdout line %d is not the driver's: %q", n+1, clip(line))
		}
		dec := json.NewDecoder(strings.NewReader(rest))
		dec.DisallowUnknownFields()
		var r callResult
		if err := dec.Decode(&r); err != nil || dec.More() {
			return nil, fmt.Sprintf("stdout line %d is not a result: %q", n+1, clip(line))
		}
		out = append(out, r)
	}
	return out, ""
}

// judgeCall decides one check from what the solution returned.
func judgeCall(c plannedRun, want any, r callResult) (bool, string) {
	if c.Raises != "" {
		for _, name := range r.Raised {
			if name == c.Raises {
				return true, ""
			}
		}
		if len(r.Raised) > 0 {
			return false, "raised " + clip(r.Message)
		}
		return false, "returned " + clip(r.Shown)
	}
	if len(r.Raised) > 0 {
		return false, "raised " + clip(r.Message)
	}
	if r.Unencodable != "" || len(r.Value) == 0 {
		return false, fmt.Sprintf("returned %s, which is not a plain value (%s)", clip(r.Shown), clip(r.Unencodable))
	}
	got, err := decodeValue(r.Value)
	if err != nil {
		return false, "returned an unreadable value"
	}
	if !valuesEqual(got, want) {
		return false, "returned " + clip(r.Shown)
	}
	if r.ArgsChanged != "" {
		return false, "changed its argument to " + clip(r.ArgsChanged)
	}
	return true, ""
}

// clip bounds a string that came from the solution's process before it
// goes into a reason.
func clip(s string) string {
	const max = 200
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
