package coding

import (
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/scripted"
)

// PolicyModel is the response model name of the scripted policy.
const PolicyModel = "scripted-coding-policy"

// SolutionFile is the file every task asks for and the policy writes.
const SolutionFile = "solution.py"

// Solution is the scripted play of one task: the programs the policy writes
// to solution.py, in order. When a run fails, the policy writes the next
// one; a play whose last program still fails gives up.
//
// The plays are not all correct, by design (docs/scoring.md, "The coding
// suite"): a task's hidden tests (baselines/graders/ID.py, never read here)
// grade the last program, and Flaw says why it fails them.
type Solution struct {
	ID   string `json:"id"`
	Task string `json:"task"`
	// Expected is what the task's visible example prints (the answer
	// cites output:Expected when the play's last program runs).
	Expected string `json:"expected"`
	// Attempts are the programs (Python source), in order.
	Attempts []string `json:"attempts"`
	// Flaw says why the last attempt fails the hidden tests; "" when it
	// passes them.
	Flaw string `json:"flaw,omitempty"`
	// Slip, when set, is played instead on the trials t with t mod 3 ==
	// Slip.Trial: a task a model solves on some trials and not others.
	Slip *Slip `json:"slip,omitempty"`
}

// Slip is a flaky task's other play.
type Slip struct {
	Trial    int      `json:"trial"`
	Attempts []string `json:"attempts"`
	Flaw     string   `json:"flaw"`
}

// Play returns the attempts and flaw of trial t.
func (s Solution) Play(trial int) (attempts []string, flaw string) {
	if s.Slip != nil && ((trial%3)+3)%3 == s.Slip.Trial {
		return s.Slip.Attempts, s.Slip.Flaw
	}
	return s.Attempts, s.Flaw
}

//go:embed solutions
var programs embed.FS

// program returns an embedded program. A missing file is a bug in this
// package, caught by every test that lists the solutions.
func program(id, name string) string {
	b, err := programs.ReadFile(path.Join("solutions", id, name))
	if err != nil {
		panic(fmt.Sprintf("coding: scripted solution %s/%s: %v", id, name, err))
	}
	return string(b)
}

func attempts(id string, names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = program(id, n)
	}
	return out
}

// task is the text of a task: the file, the signature, what it must do and
// one visible example (the hidden tests are the grader's).
func task(signature, does, example string) string {
	return fmt.Sprintf("Write %s defining %s, %s. Example: %s. Run your code to check the example.", SolutionFile, signature, does, example)
}

// Solutions are the scripted plays of the coding suite's tasks (written for
// this project). They are scripted, not generated: the policy looks a task
// up here by its exact text. The flawed plays model what a coding model
// gets wrong — an edge case the example does not show, an off-by-one, a
// correct but quadratic program, tracebacks it fixes, a task it gives up
// on, and slips on some trials only.
func Solutions() []Solution {
	one := func(id string) []string { return attempts(id, "1.py") }
	return []Solution{
		{ID: "coding-roman", Expected: "MCMXCIV", Attempts: one("coding-roman"),
			Task: task("to_roman(n: int) -> str", "which returns the Roman numeral for n (1 <= n <= 3999) in standard form, with subtractive pairs such as IV and CM",
				"to_roman(1994) returns 'MCMXCIV'")},
		{ID: "coding-rle", Expected: "3a1b2c4d", Attempts: one("coding-rle"),
			Flaw: "edge case: it reads s[0] first, so the empty string raises IndexError",
			Task: task("rle_encode(s: str) -> str", "the run-length encoding of s: each run of one repeated character becomes the run's length followed by the character",
				"rle_encode('aaabccdddd') returns '3a1b2c4d'")},
		{ID: "coding-merge-intervals", Expected: "[(1, 6), (8, 10), (15, 18)]", Attempts: one("coding-merge-intervals"),
			Task: task("merge_intervals(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]",
				"which merges overlapping or touching closed intervals (start <= end), given in any order, and returns them as (start, end) tuples sorted by start, without changing its argument",
				"merge_intervals([(1, 3), (2, 6), (8, 10), (15, 18)]) returns [(1, 6), (8, 10), (15, 18)]")},
		{ID: "coding-days-between", Expected: "60", Attempts: one("coding-days-between"),
			Task: task("days_between(a: str, b: str) -> int", "the number of days between two dates written as YYYY-MM-DD, whichever comes first (never negative)",
				"days_between('2024-01-01', '2024-03-01') returns 60")},
		{ID: "coding-top-words", Expected: "[('the', 3), ('and', 2)]", Attempts: one("coding-top-words"),
			Slip: &Slip{Trial: 1, Attempts: attempts("coding-top-words", "slip/1.py"),
				Flaw: "slip on trial 1: Counter.most_common breaks ties by first occurrence, not alphabetically"},
			Task: task("top_words(text: str, k: int) -> list[tuple[str, int]]",
				"the k most frequent words of text with their counts, most frequent first and ties in alphabetical order; a word is a run of the letters a-z and apostrophes, compared in lower case (with fewer than k distinct words, all of them)",
				"top_words('the cat and the hat and the bat', 2) returns [('the', 3), ('and', 2)]")},
		{ID: "coding-rotate", Expected: "[[4, 1], [5, 2], [6, 3]]", Attempts: attempts("coding-rotate", "1.py", "2.py"),
			Task: task("rotate(matrix: list[list[int]]) -> list[list[int]]",
				"which returns a new matrix (a list of row lists) rotated 90 degrees clockwise; the matrix may be rectangular and must not be changed",
				"rotate([[1, 2, 3], [4, 5, 6]]) returns [[4, 1], [5, 2], [6, 3]]")},
		{ID: "coding-balanced", Expected: "True", Attempts: one("coding-balanced"),
			Task: task("balanced(s: str) -> bool", "True when the brackets (), [] and {} in s are balanced and properly nested, ignoring every other character",
				"balanced('{[()()]}') returns True")},
		{ID: "coding-primes", Expected: "[2, 3, 5, 7, 11, 13, 17, 19]", Attempts: one("coding-primes"),
			Flaw: "off-by-one: the sieve has n entries, so n itself is never reported (primes_up_to(13) misses 13)",
			Task: task("primes_up_to(n: int) -> list[int]", "every prime p <= n in ascending order (an empty list when n < 2)",
				"primes_up_to(20) returns [2, 3, 5, 7, 11, 13, 17, 19]")},
		{ID: "coding-inversions", Expected: "2", Attempts: one("coding-inversions"),
			Flaw: "too slow: correct but quadratic, so a hidden 100 000-element list runs past the sandbox's limits",
			Task: task("count_inversions(xs: list[int]) -> int",
				"the number of pairs of positions i < j with xs[i] > xs[j]; it must handle lists of 100 000 numbers in well under a second",
				"count_inversions([3, 1, 2]) returns 2")},
		{ID: "coding-flatten", Expected: "[1, 2, 3, 4, 5]", Attempts: attempts("coding-flatten", "1.py", "2.py"),
			Task: task("flatten(nested: list) -> list",
				"the items of arbitrarily nested lists, left to right, in one flat list; only lists are flattened (strings, tuples and other values are items)",
				"flatten([1, [2, [3, 4]], 5]) returns [1, 2, 3, 4, 5]")},
		{ID: "coding-caesar", Expected: "Khoor, Zruog!", Attempts: one("coding-caesar"),
			Task: task("caesar(text: str, shift: int) -> str",
				"text with each letter A-Z and a-z moved shift places along the alphabet, wrapping around (shift may be negative or larger than 26) and keeping its case; every other character stays as it is",
				"caesar('Hello, World!', 3) returns 'Khoor, Zruog!'")},
		{ID: "coding-anagrams", Expected: "[['ate', 'eat', 'tea'], ['bat'], ['nat', 'tan']]", Attempts: one("coding-anagrams"),
			Task: task("group_anagrams(words: list[str]) -> list[list[str]]",
				"which groups the words that are anagrams of each other (the same letters, case-sensitive, duplicates kept); each group is sorted, and the groups are in the order of their first words",
				"group_anagrams(['eat', 'tea', 'tan', 'ate', 'nat', 'bat']) returns [['ate', 'eat', 'tea'], ['bat'], ['nat', 'tan']]")},
		{ID: "coding-parse-duration", Expected: "5400", Attempts: one("coding-parse-duration"),
			Slip: &Slip{Trial: 2, Attempts: attempts("coding-parse-duration", "slip/1.py"),
				Flaw: "slip on trial 2: every part of its pattern is optional, so the empty string is 0 seconds instead of a ValueError"},
			Task: task("parse_duration(s: str) -> int",
				"the number of seconds in a duration such as '2h5s': one or more parts, each a whole number followed by a unit d, h, m or s, the units in that order and each at most once, no spaces; raise ValueError for anything else, the empty string included",
				"parse_duration('1h30m') returns 5400")},
		{ID: "coding-luhn", Expected: "True", Attempts: one("coding-luhn"),
			Task: task("luhn_valid(number: str) -> bool",
				"whether number passes the Luhn checksum; spaces are ignored, any other character that is not a digit makes it invalid, and so do fewer than two digits",
				"luhn_valid('4539 3195 0343 6467') returns True")},
		{ID: "coding-median", Expected: "3", Attempts: one("coding-median"),
			Slip: &Slip{Trial: 0, Attempts: attempts("coding-median", "slip/1.py"),
				Flaw: "slip on trial 0: an even-length list returns the upper middle value, not the mean of the two middle values"},
			Task: task("median(xs: list[float]) -> float",
				"the median of a non-empty list (the mean of the two middle values when the length is even), without changing the list",
				"median([3, 1, 4, 1, 5]) returns 3")},
		{ID: "coding-find-first", Expected: "1", Attempts: one("coding-find-first"),
			Task: task("find_first(xs: list[int], target: int) -> int",
				"the index of the first occurrence of target in the ascending list xs, or -1 when it is absent; xs may hold millions of numbers, so search in logarithmic time",
				"find_first([1, 2, 2, 2, 3], 2) returns 1")},
		{ID: "coding-wrap", Expected: "['the quick', 'brown fox', 'jumps over', 'the lazy', 'dog']", Attempts: attempts("coding-wrap", "1.py", "2.py", "3.py", "4.py"),
			Task: task("wrap(text: str, width: int) -> list[str]",
				"text wrapped greedily into lines of at most width characters: words are separated by any whitespace, a line joins its words with single spaces, and a word longer than width is a line of its own",
				"wrap('the quick brown fox jumps over the lazy dog', 10) returns ['the quick', 'brown fox', 'jumps over', 'the lazy', 'dog']")},
		{ID: "coding-snake-case", Expected: "parse_http_response", Attempts: one("coding-snake-case"),
			Flaw: "edge case: every capital starts a word, so an acronym is split letter by letter (to_snake('HTTPServer') is 'h_t_t_p_server')",
			Task: task("to_snake(name: str) -> str",
				"a camelCase or PascalCase identifier in snake_case: lower case, words joined by underscores, a run of capitals counting as one word (an acronym), digits staying with the word before them, and a name already in snake_case unchanged",
				"to_snake('parseHttpResponse') returns 'parse_http_response'")},
		{ID: "coding-spiral", Expected: "[1, 2, 3, 6, 9, 8, 7, 4, 5]", Attempts: one("coding-spiral"),
			Task: task("spiral(matrix: list[list[int]]) -> list[int]", "the elements of a rectangular matrix in clockwise spiral order, starting at the top-left corner",
				"spiral([[1, 2, 3], [4, 5, 6], [7, 8, 9]]) returns [1, 2, 3, 6, 9, 8, 7, 4, 5]")},
		{ID: "coding-weekdays", Expected: "21", Attempts: one("coding-weekdays"),
			Task: task("count_weekdays(start: str, end: str) -> int",
				"the number of days from Monday to Friday between two dates written as YYYY-MM-DD, both included (0 when end is before start)",
				"count_weekdays('2024-03-01', '2024-03-31') returns 21")},
		{ID: "coding-csv-line", Expected: "['a', 'b,c', 'd']", Attempts: one("coding-csv-line"),
			Task: task("parse_csv_line(line: str) -> list[str]",
				`the fields of one CSV line: fields are separated by commas, a field may be quoted with double quotes (inside quotes a comma is part of the field and "" is one quote), spaces are kept, and an empty line is one empty field`,
				`parse_csv_line('a,"b,c",d') returns ['a', 'b,c', 'd']`)},
		{ID: "coding-count-change", Expected: "4", Attempts: one("coding-count-change"),
			Task: task("count_change(amount: int, coins: list[int]) -> int",
				"the number of ways to make amount from any number of coins of the given distinct positive values, order not mattering (there is one way to make 0)",
				"count_change(10, [1, 5, 10]) returns 4")},
		{ID: "coding-max-subarray", Expected: "6", Attempts: one("coding-max-subarray"),
			Flaw: "edge case: the best sum starts at 0, so an all-negative list answers 0 instead of its largest element",
			Task: task("max_subarray(xs: list[int]) -> int", "the largest sum of a non-empty run of consecutive elements of the non-empty list xs",
				"max_subarray([-2, 1, -3, 4, -1, 2, 1, -5, 4]) returns 6")},
		{ID: "coding-evaluate", Expected: "9", Attempts: attempts("coding-evaluate", "1.py", "2.py"),
			Flaw: "gives up: a left-recursive grammar (RecursionError), then a parser that reads past the last token (IndexError); no program ever runs",
			Task: task("evaluate(expr: str) -> int",
				"the value of an arithmetic expression of non-negative integers, +, -, * and parentheses, spaces allowed, * binding tighter than + and -, operators of equal precedence applied left to right; raise ValueError for a malformed expression, and do not use eval",
				"evaluate('2 * (3 + 4) - 5') returns 9")},
	}
}

// PolicyConfig configures the scripted policy.
type PolicyConfig struct {
	// Solutions the policy can play (default Solutions()).
	Solutions []Solution
	// Trial is the trial index the run is for: a task with a Slip plays it
	// on the trials it names, as a model's answers differ between trials.
	// The baselines pass the trial index (cmd/loom-eval run, baselines/ci).
	Trial int
	// Counter computes the usage the policy reports (see the research
	// policy); default contextlayer.Estimate.
	Counter contextlayer.Counter
}

// ErrNoSolution is returned for a task the policy has no scripted solution for.
var ErrNoSolution = fmt.Errorf("the scripted coding policy has no scripted solution for this task (use a live provider)")

// Policy returns the scripted coding policy. It is a deterministic function
// of the conversation it is shown and the trial index: write attempt i to
// solution.py, run it, and if the run failed and another attempt exists
// write that (fix and rerun); then answer with what the last successful
// run printed, cited as [output:VALUE], or say it gave up. The programs are
// scripted solutions, labelled "scripted" like every answer.
func Policy(cfg PolicyConfig) *scripted.Model {
	if cfg.Solutions == nil {
		cfg.Solutions = Solutions()
	}
	if cfg.Counter == nil {
		cfg.Counter = contextlayer.Estimate{}
	}
	return scripted.NewFunc(PolicyModel, func(req llm.Request, _ int) (scripted.Turn, error) {
		t, err := decide(req, cfg.Solutions, cfg.Trial)
		if err != nil {
			return scripted.Turn{}, err
		}
		t.Usage = usage(cfg.Counter, req, t)
		return t, nil
	})
}

func decide(req llm.Request, sols []Solution, trial int) (scripted.Turn, error) {
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
	plays, _ := sol.Play(trial)
	ok := func(r RunResult) bool { return r.Exited && r.ExitCode == 0 }
	toolsOffered := len(req.Tools) > 0
	switch {
	case !toolsOffered:
	case writes > len(runs):
		args, _ := json.Marshal(map[string]string{"path": SolutionFile})
		return scripted.Turn{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_run_%d", len(runs)+1), Name: "run_python", Arguments: args}}}, nil
	case writes < len(plays) && (len(runs) == 0 || !ok(runs[len(runs)-1])):
		args, _ := json.Marshal(map[string]string{"path": SolutionFile, "content": plays[writes]})
		return scripted.Turn{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_write_%d", writes+1), Name: "write_file", Arguments: args}}}, nil
	}
	if len(runs) == 0 || !ok(runs[len(runs)-1]) {
		return scripted.Turn{Content: giveUp(runs)}, nil
	}
	last := runs[len(runs)-1]
	fix := ""
	if len(runs) > 1 {
		fix = fmt.Sprintf(" after %d failed attempt(s), fixed from the traceback", len(runs)-1)
	}
	ev := OutputEvidence(last.Stdout)
	if ev == "" {
		// Nothing citable (no output, or a line that cannot be cited).
		return scripted.Turn{Content: fmt.Sprintf("%s ran%s; it printed %q.", SolutionFile, fix, strings.TrimSpace(last.Stdout))}, nil
	}
	return scripted.Turn{Content: fmt.Sprintf("%s ran%s; for the example it printed %s. [%s]", SolutionFile, fix, strings.TrimPrefix(ev, "output:"), ev)}, nil
}

// giveUp is the answer when no attempt ran: how many were tried and the
// last error line, so the failure is readable in the transcript.
func giveUp(runs []RunResult) string {
	if len(runs) == 0 {
		return fmt.Sprintf("I did not get to run %s, so I have no result to report.", SolutionFile)
	}
	last := runs[len(runs)-1]
	why := last.Reason
	if lines := strings.Split(strings.TrimSpace(last.Stderr), "\n"); lines[len(lines)-1] != "" {
		why = lines[len(lines)-1]
	}
	return fmt.Sprintf("I could not get %s to run: %d attempt(s) failed, the last with %s. I give up on this task.", SolutionFile, len(runs), why)
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
