package research

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/scripted"
)

// PolicyModel is the response model name of the scripted policy.
const PolicyModel = "scripted-research-policy"

// Query formulations of the policy. A trial index picks one (trial mod 3),
// so the trials of a case differ the way a model's reformulations would,
// deterministically.
const (
	QueryFullText = iota // the whole task text (title and body)
	QueryTitle           // the task's first line
	QueryOpening         // the first 50 words
	numQueryStyles
)

// PolicyConfig configures the scripted policy.
type PolicyConfig struct {
	// QueryStyle picks the query formulation (QueryFullText, ...).
	QueryStyle int
	// Read is how many documentation hits it reads (default 3).
	Read int
	// Counter computes the usage the policy reports: the request's tokens
	// (system, messages and tool schemas) in, the answer's tokens out. A
	// scripted policy has no provider to report usage; this count keeps
	// token budgets meaningful and is labelled scripted like everything
	// else. Default contextlayer.Estimate.
	Counter contextlayer.Counter
	// Recall is RecallVerify (default) or RecallTrust.
	Recall string
}

// How the policy uses recalled memory (runtime.MemoryHeader in its system
// prompt) that cites documentation.
const (
	// RecallVerify (the default) searches as usual and reads first the
	// hits the memory cites: memory reorders what retrieval found, it
	// never adds a page retrieval did not return.
	RecallVerify = "verify"
	// RecallTrust reads the cited pages instead of searching.
	RecallTrust = "trust"
)

// preferRecalled moves the hits whose page a recalled memory cites to the
// front, keeping the order otherwise.
func preferRecalled(hits []hitView, recalled []string) []hitView {
	if len(recalled) == 0 {
		return hits
	}
	pages := map[string]bool{}
	for _, id := range recalled {
		pages[EvidenceID(id)] = true
	}
	var first, rest []hitView
	for _, h := range hits {
		if pages[EvidenceID(h.ID)] {
			first = append(first, h)
		} else {
			rest = append(rest, h)
		}
	}
	return append(first, rest...)
}

// QueryStyleForTrial is the formulation the baselines use for trial t.
func QueryStyleForTrial(t int) int { return ((t % numQueryStyles) + numQueryStyles) % numQueryStyles }

// Policy returns the scripted research policy: a deterministic function of
// the conversation it is shown. With no search result in view it searches
// with the task text; with results and nothing read it reads the top
// documentation hits (issues are skipped: the answer must rest on
// documentation); then it answers, citing exactly the sections it read.
// When the runtime withholds the tools (step limit) it answers with what is
// in view. It never knows which page is judged relevant. With recalled
// memory in its system prompt (runtime.MemoryHeader) that cites pages, it
// reads first the search hits the memory cites (RecallVerify), or reads
// the cited pages instead of searching (RecallTrust).
func Policy(cfg PolicyConfig) *scripted.Model {
	if cfg.Read <= 0 {
		cfg.Read = 3
	}
	if cfg.Counter == nil {
		cfg.Counter = contextlayer.Estimate{}
	}
	if cfg.Recall == "" {
		cfg.Recall = RecallVerify
	}
	return scripted.NewFunc(PolicyModel, func(req llm.Request, _ int) (scripted.Turn, error) {
		t := decide(req, cfg)
		t.Usage = usage(cfg.Counter, req, t)
		return t, nil
	})
}

func decide(req llm.Request, cfg PolicyConfig) scripted.Turn {
	task := ""
	var search *SearchResult
	var reads []ReadResult
	readTried := false
	for _, m := range req.Messages {
		if m.Role == llm.RoleTool && m.ToolName == "read_doc" {
			readTried = true
		}
		switch {
		case m.Role == llm.RoleUser && task == "":
			task = m.Content
		case m.Role == llm.RoleTool && m.ToolName == "search_docs" && !m.IsError:
			var s SearchResult
			if json.Unmarshal([]byte(m.Content), &s) == nil {
				search = &s
			}
		case m.Role == llm.RoleTool && m.ToolName == "read_doc" && !m.IsError:
			var r ReadResult
			if json.Unmarshal([]byte(m.Content), &r) == nil && r.ID != "" {
				reads = append(reads, r)
			}
		}
	}
	toolsOffered := len(req.Tools) > 0
	recalled := recalledIDs(req.System)
	// Trusting recalled memory that names pages which answered a related
	// task earlier: read those first, without searching. If none can be
	// read, search.
	if cfg.Recall == RecallTrust && toolsOffered && search == nil && !readTried && len(recalled) > 0 {
		var calls []llm.ToolCall
		for _, id := range recalled {
			if len(calls) == cfg.Read {
				break
			}
			args, _ := json.Marshal(map[string]string{"id": id})
			calls = append(calls, llm.ToolCall{ID: fmt.Sprintf("call_recall_%d", len(calls)+1), Name: "read_doc", Arguments: args})
		}
		return scripted.Turn{ToolCalls: calls}
	}
	switch {
	case toolsOffered && search == nil && len(reads) == 0:
		args, _ := json.Marshal(map[string]any{"query": formulate(task, cfg.QueryStyle)})
		return scripted.Turn{ToolCalls: []llm.ToolCall{{ID: "call_search_1", Name: "search_docs", Arguments: args}}}
	case toolsOffered && len(reads) == 0:
		var calls []llm.ToolCall
		hits := search.Hits
		if cfg.Recall == RecallVerify {
			hits = preferRecalled(hits, recalled)
		}
		for _, h := range hits {
			if h.ID == "" || h.Kind == "issue" || len(calls) == cfg.Read {
				continue
			}
			args, _ := json.Marshal(map[string]string{"id": h.ID})
			calls = append(calls, llm.ToolCall{ID: fmt.Sprintf("call_read_%d", len(calls)+1), Name: "read_doc", Arguments: args})
		}
		if len(calls) > 0 {
			return scripted.Turn{ToolCalls: calls}
		}
	}
	return scripted.Turn{Content: answer(reads)}
}

func formulate(task string, style int) string {
	task = strings.TrimSpace(task)
	switch style {
	case QueryTitle:
		if line, _, _ := strings.Cut(task, "\n"); strings.TrimSpace(line) != "" {
			return strings.TrimSpace(line)
		}
	case QueryOpening:
		w := strings.Fields(task)
		if len(w) > 50 {
			w = w[:50]
		}
		return strings.Join(w, " ")
	}
	return task
}

func answer(reads []ReadResult) string {
	if len(reads) == 0 {
		return "I could not find documentation that answers this question, so I cite nothing."
	}
	var b strings.Builder
	b.WriteString("From the documentation I read:\n")
	for _, r := range reads {
		title := r.Title
		if r.Section != "" && r.Section != r.Title {
			title = r.Section
		}
		fmt.Fprintf(&b, "- %s: %s [%s]\n", title, firstSentence(r.Text), r.ID)
	}
	return strings.TrimRight(b.String(), "\n")
}

func firstSentence(s string) string {
	s = oneLine(s)
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	return clip(s, 200)
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
