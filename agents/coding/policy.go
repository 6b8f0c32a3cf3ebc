package coding

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/scripted"
)

// PolicyModel is the response model name of the scripted policy.
const PolicyModel = "scripted-coding-policy"

// Solution is a scripted solution for one task: the programs the policy
// writes, in order. When a program fails, the policy writes the next one;
// a solution with a buggy first attempt exercises the fix-and-rerun loop.
type Solution struct {
	ID       string   `json:"id"`
	Task     string   `json:"task"`
	Attempts []string `json:"attempts"`
	// Expected is the value the task's answer must report (the case's
	// required evidence is OutputEvidence of it).
	Expected string `json:"expected"`
}

// Solutions are the scripted solutions of the coding baseline's tasks. They
// are scripted, not generated: the policy looks a task up here by its exact
// text.
func Solutions() []Solution {
	return []Solution{
		{ID: "coding-prime-sum", Task: "Write and run a Python program that prints the sum of all prime numbers below 10000.",
			Expected: "5736396",
			Attempts: []string{"def is_prime(n):\n    if n < 2:\n        return False\n    d = 2\n    while d * d <= n:\n        if n % d == 0:\n            return False\n        d += 1\n    return True\n\nprint(sum(n for n in range(10000) if is_prime(n)))\n"}},
		{ID: "coding-fibonacci-90", Task: "Write and run a Python program that prints the 90th Fibonacci number, with F(1) = F(2) = 1.",
			Expected: "2880067194370816120",
			Attempts: []string{"a, b = 1, 1\nfor _ in range(88):\n    a, b = b, a + b\nprint(b)\n"}},
		{ID: "coding-collatz", Task: "Write and run a Python program that prints the starting number below 10000 whose Collatz sequence is the longest.",
			Expected: "6171",
			Attempts: []string{"import functools\n\n@functools.lru_cache(maxsize=None)\ndef length(n):\n    if n == 1:\n        return 1\n    return 1 + length(n // 2 if n % 2 == 0 else 3 * n + 1)\n\nimport sys\nsys.setrecursionlimit(10000)\nprint(max(range(1, 10000), key=length))\n"}},
		{ID: "coding-sha256", Task: "Write and run a Python program that prints the SHA-256 hex digest of the ASCII string 'loomwork'.",
			Expected: "c17ed61260f515b3aeafe3d8bef2188c7a4bdd4343162e11edda2a10dce3dc01",
			Attempts: []string{"import hashlib\nprint(hashlib.sha256(b'loomwork').hexdigest())\n"}},
		{ID: "coding-distinct-words", Task: "Write and run a Python program that prints how many distinct words, ignoring case, the sentence 'The quick brown fox jumps over the lazy dog the end' contains.",
			Expected: "9",
			Attempts: []string{
				// A first attempt with a bug (a misspelt name) the policy
				// fixes after reading the traceback.
				"text = 'The quick brown fox jumps over the lazy dog the end'\nwords = text.lower().split()\nprint(len(set(word)))\n",
				"text = 'The quick brown fox jumps over the lazy dog the end'\nwords = text.lower().split()\nprint(len(set(words)))\n",
			}},
	}
}

// PolicyConfig configures the scripted policy.
type PolicyConfig struct {
	// Solutions the policy can play (default Solutions()).
	Solutions []Solution
	// Counter computes the usage the policy reports (see the research
	// policy); default contextlayer.Estimate.
	Counter contextlayer.Counter
}

// ErrNoSolution is returned for a task the policy has no scripted solution for.
var ErrNoSolution = fmt.Errorf("the scripted coding policy has no scripted solution for this task (use a live provider)")

// Policy returns the scripted coding policy. It is a deterministic function
// of the conversation it is shown: write attempt i, run it, and if it failed
// and another attempt exists write that; then answer with the last line the
// program printed, cited as [output:VALUE]. The programs are scripted
// solutions, labelled "scripted" like every answer.
func Policy(cfg PolicyConfig) *scripted.Model {
	if cfg.Solutions == nil {
		cfg.Solutions = Solutions()
	}
	if cfg.Counter == nil {
		cfg.Counter = contextlayer.Estimate{}
	}
	return scripted.NewFunc(PolicyModel, func(req llm.Request, _ int) (scripted.Turn, error) {
		t, err := decide(req, cfg.Solutions)
		if err != nil {
			return scripted.Turn{}, err
		}
		t.Usage = usage(cfg.Counter, req, t)
		return t, nil
	})
}

func decide(req llm.Request, sols []Solution) (scripted.Turn, error) {
	task := ""
	writes := 0
	var runs []RunResult
	for _, m := range req.Messages {
		switch {
		case m.Role == llm.RoleUser && task == "":
			task = strings.TrimSpace(m.Content)
		case m.Role == llm.RoleTool && m.ToolName == "write_file" && !m.IsError:
			writes++
		case m.Role == llm.RoleTool && m.ToolName == "run_python":
			var r RunResult
			if m.IsError || json.Unmarshal([]byte(m.Content), &r) != nil {
				r = RunResult{ExitCode: -1, Reason: "tool_error", Stderr: m.Content}
			}
			runs = append(runs, r)
		}
	}
	var sol *Solution
	for i := range sols {
		if sols[i].Task == task {
			sol = &sols[i]
		}
	}
	if sol == nil {
		return scripted.Turn{}, ErrNoSolution
	}
	ok := func(r RunResult) bool { return r.Exited && r.ExitCode == 0 }
	toolsOffered := len(req.Tools) > 0
	switch {
	case !toolsOffered:
	case writes > len(runs):
		args, _ := json.Marshal(map[string]string{"path": "main.py"})
		return scripted.Turn{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_run_%d", len(runs)+1), Name: "run_python", Arguments: args}}}, nil
	case writes < len(sol.Attempts) && (len(runs) == 0 || !ok(runs[len(runs)-1])):
		args, _ := json.Marshal(map[string]string{"path": "main.py", "content": sol.Attempts[writes]})
		return scripted.Turn{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_write_%d", writes+1), Name: "write_file", Arguments: args}}}, nil
	}
	if len(runs) == 0 || !ok(runs[len(runs)-1]) {
		return scripted.Turn{Content: "The scripted solution did not run successfully, so I have no result to report."}, nil
	}
	last := runs[len(runs)-1]
	ev := OutputEvidence(last.Stdout)
	value := strings.TrimPrefix(ev, "output:")
	fix := ""
	if len(runs) > 1 {
		fix = fmt.Sprintf(" (after %d failed attempt(s), fixed from the traceback)", len(runs)-1)
	}
	return scripted.Turn{Content: fmt.Sprintf("The program printed %s%s. [%s]", value, fix, ev)}, nil
}

func usage(c contextlayer.Counter, req llm.Request, t scripted.Turn) llm.Usage {
	in := contextlayer.ConversationTokens(c, req.System, req.Messages)
	for _, ts := range req.Tools {
		in += c.Count(ts.Name) + c.Count(ts.Description) + c.Count(string(ts.Parameters))
	}
	out := c.Count(t.Content)
	for _, tc := range t.ToolCalls {
		out += c.Count(tc.Name) + c.Count(string(tc.Arguments))
	}
	return llm.Usage{InputTokens: int64(in), OutputTokens: int64(out)}
}
