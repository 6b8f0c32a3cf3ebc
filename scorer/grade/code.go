package grade

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/datasets"
)

// harness is the program the grader's sandbox runs (see its header for
// the protocol).
//
//go:embed harness.py
var harness []byte

// checks is loomwork_checks, the table-driven hidden-test helper every
// code grader can import.
//
//go:embed loomwork_checks.py
var checks []byte

// values is loomwork_values, the typed value encoding both sandboxes use.
//
//go:embed loomwork_values.py
var values []byte

// driver is the program the solution's sandbox runs: it calls the
// solution with a plan's arguments and reports what came back.
//
//go:embed driver.py
var driver []byte

// Code grader layout. The grader and the solution never share a sandbox:
// the grader's workspace holds graderDir only, the solution's holds the
// run's files and driverDir (each mounted at /work in its own sandbox).
const (
	graderDir     = "_loomwork_grader"
	graderFile    = graderDir + "/grader.py"
	harnessFile   = graderDir + "/harness.py"
	checksFile    = graderDir + "/loomwork_checks.py"
	valuesFile    = graderDir + "/loomwork_values.py"
	driverDir     = "_loomwork_driver"
	driverFile    = driverDir + "/driver.py"
	driverValues  = driverDir + "/loomwork_values.py"
	verdictPrefix = "LOOMWORK-GRADE "
	resultPrefix  = "LOOMWORK-RESULT "
	// Python is the interpreter code graders run under; the sandbox mounts
	// /usr read-only and nothing outside it.
	Python = "/usr/bin/python3"
	// maxOutput caps the grader output kept on the grade.
	maxOutput = 4000
	// maxChecks bounds a plan (a grader's table).
	maxChecks = 10000
)

// CodeInput is the JSON a code grader's grade(transcript, outcome)
// receives (after the harness strips the nonce).
type CodeInput struct {
	Nonce      string              `json:"nonce"`
	Transcript datasets.Transcript `json:"transcript"`
	Outcome    Outcome             `json:"outcome"`
	// RunModules are the Python modules the run's files make (so the
	// harness can name a grader that imports one as the grader's bug).
	RunModules []string `json:"run_modules"`
}

// Outcome is what a code grader is told about the trial beyond its
// transcript.
type Outcome struct {
	CaseID            string   `json:"case_id"`
	Trial             int      `json:"trial"`
	ModelLabel        string   `json:"model_label"`
	Finished          bool     `json:"finished"`
	Divergence        string   `json:"divergence,omitempty"`
	ToolsCalled       []string `json:"tools_called"`
	EvidenceRetrieved []string `json:"evidence_retrieved"`
	EvidenceCited     []string `json:"evidence_cited"`
	DurationMS        *float64 `json:"duration_ms"`
	CostUSD           *float64 `json:"cost_usd"`
	Tokens            *int64   `json:"tokens"`
}

func outcomeOf(in Input) Outcome {
	f := in.Facts
	o := Outcome{CaseID: in.Trial.CaseID, Trial: in.Trial.Trial, ModelLabel: f.ModelLabel,
		Finished: f.Success != nil && *f.Success && in.Trial.Divergence == "", Divergence: in.Trial.Divergence,
		ToolsCalled: nonNil(f.ToolsCalled), EvidenceRetrieved: nonNil(f.EvidenceRetrieved), EvidenceCited: nonNil(f.EvidenceCited),
		DurationMS: f.DurationMS, CostUSD: f.CostUSD, Tokens: f.Tokens}
	return o
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// verdict is the harness's last line.
type verdict struct {
	Status string     `json:"status"`
	Passed *bool      `json:"passed"`
	Score  *float64   `json:"score"`
	Reason string     `json:"reason"`
	Plan   *checkPlan `json:"plan"`
}

func codeGrader(ctx context.Context, run CodeRunner, g *datasets.Grader, in Input, gr *datasets.Grade) error {
	if len(g.Source) == 0 {
		return fmt.Errorf("code grader %s: its file was not read (load cases with datasets.LoadCases, which reads it beside the case file)", g.File)
	}
	var nb [16]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return fmt.Errorf("nonce: %w", err)
	}
	nonce := hex.EncodeToString(nb[:])
	tr := datasets.Transcript{}
	if in.Transcript != nil {
		tr = *in.Transcript
	}
	runFiles, modules, err := runFiles(tr)
	if err != nil {
		return err
	}
	stdin, err := json.Marshal(CodeInput{Nonce: nonce, Transcript: tr, Outcome: outcomeOf(in), RunModules: modules})
	if err != nil {
		return fmt.Errorf("grader input: %w", err)
	}
	// First sandbox: the grader alone, with the run as data.
	files := map[string][]byte{graderFile: g.Source, harnessFile: harness, checksFile: checks, valuesFile: values}
	res, err := run.RunCode(ctx, CodeRequest{Files: files, Command: []string{Python, "-I", "/work/" + harnessFile}, Stdin: stdin})
	if err != nil {
		return fmt.Errorf("code grader %s: sandbox: %w", g.File, err)
	}
	gr.Sandbox = &datasets.GraderSandbox{Reason: res.Reason, ExitCode: res.ExitCode, Evidence: res.Evidence}
	stdout, v, found := splitVerdict(res.Stdout, nonce)
	gr.Output = capOutput(stdout, res.Stderr)
	switch {
	case !found && res.Reason != "" && res.Reason != "exit":
		// No code of the run was in that sandbox: its limit is the grader's.
		gr.Error = fmt.Sprintf("the grader's own sandbox ended its run: %s%s", res.Reason, evidence(res.Evidence))
		return nil
	case !found:
		gr.Error = fmt.Sprintf("the grader printed no verdict (exit code %d)", res.ExitCode)
		return nil
	}
	switch v.Status {
	case "plan":
		return runPlan(ctx, run, g, v.Plan, runFiles, gr)
	case "ok":
		threshold := 1.0
		if g.Threshold != nil {
			threshold = *g.Threshold
		}
		switch {
		case v.Score != nil && !(*v.Score >= 0 && *v.Score <= 1):
			gr.Error = fmt.Sprintf("grade() returned score %v, outside [0, 1]", *v.Score)
		case v.Passed != nil && v.Score != nil:
			gr.Passed, gr.Score = *v.Passed, *v.Score
		case v.Passed != nil:
			gr.Passed, gr.Score = *v.Passed, b2f(*v.Passed)
		case v.Score != nil:
			gr.Passed, gr.Score = *v.Score >= threshold, *v.Score
		default:
			gr.Error = "grade() returned neither passed nor score"
		}
		gr.Reason = v.Reason
		if gr.Reason == "" {
			gr.Reason = fmt.Sprintf("grade() returned passed=%v, score %g", gr.Passed, gr.Score)
		}
	case "fail":
		gr.Reason = v.Reason
	default:
		gr.Error = v.Reason
	}
	return nil
}

// runFiles checks the run's files for the solution's sandbox and names
// the Python modules they make.
func runFiles(tr datasets.Transcript) (map[string][]byte, []string, error) {
	files := map[string][]byte{}
	mods := map[string]bool{}
	for p, content := range tr.Files {
		clean := path.Clean(p)
		if path.IsAbs(p) || clean != p || strings.HasPrefix(clean, "../") || clean == ".." || clean == driverDir || strings.HasPrefix(clean, driverDir+"/") {
			// A run's file may not shadow the driver or leave the workspace.
			return nil, nil, fmt.Errorf("transcript file %q: not a clean relative path outside %s/", p, driverDir)
		}
		files[p] = []byte(content)
		top, _, nested := strings.Cut(clean, "/")
		if nested {
			mods[top] = true
		} else if m, ok := strings.CutSuffix(top, ".py"); ok {
			mods[m] = true
		}
	}
	out := make([]string, 0, len(mods))
	for m := range mods {
		out = append(out, m)
	}
	sort.Strings(out)
	return files, out, nil
}

func evidence(ev []string) string {
	if len(ev) == 0 {
		return ""
	}
	return " (" + strings.Join(ev, "; ") + ")"
}

// splitVerdict finds the harness's verdict line (the last one carrying
// this run's nonce: a program under test that prints a verdict-shaped
// line cannot know it) and returns stdout without it.
func splitVerdict(stdout, nonce string) (string, verdict, bool) {
	lines := strings.Split(stdout, "\n")
	prefix := verdictPrefix + nonce + " "
	for i := len(lines) - 1; i >= 0; i-- {
		rest, ok := strings.CutPrefix(lines[i], prefix)
		if !ok {
			continue
		}
		var v verdict
		if json.Unmarshal([]byte(rest), &v) != nil {
			return stdout, verdict{}, false
		}
		kept := append(append([]string{}, lines[:i]...), lines[i+1:]...)
		return strings.TrimRight(strings.Join(kept, "\n"), "\n"), v, true
	}
	return stdout, verdict{}, false
}

func capOutput(stdout, stderr string) string {
	out := strings.TrimSpace(stdout)
	if e := strings.TrimSpace(stderr); e != "" {
		if out != "" {
			out += "\n"
		}
		out += "[stderr]\n" + e
	}
	if len(out) > maxOutput {
		out = out[:maxOutput] + "\n[output truncated]"
	}
	return out
}
