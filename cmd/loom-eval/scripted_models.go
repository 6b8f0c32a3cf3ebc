package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"

	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/securityeval"
)

// The scripted models a command that runs a reference agent can answer
// with (--scripted-model; every answer labelled scripted).
const (
	// scriptedAgent is the agent's own scripted policy (the default).
	scriptedAgent = "agent"
	// scriptedObeys is the injection suite's fully obedient model
	// (securityeval.ObedientModel): it follows every instruction it reads
	// — task, system prompt, tool results, tool descriptions — and then does
	// the suite's benign task. It exists to test a policy against prompt
	// injection through the same command a user runs.
	scriptedObeys = "obeys-everything"
)

const scriptedModelUsage = "the scripted model that answers (labelled scripted): " + scriptedAgent + " (the agent's own scripted policy) or " + scriptedObeys +
	" (the injection suite's fully obedient model, " + securityeval.ModelObeysEverything + ": it makes every tool call an instruction it reads anywhere asks for — to test a policy against prompt injection; docs/policy.md)"

// scriptedModel is the model --scripted-model names in place of the
// agent's own policy (nil for the agent's own); cmd names the command in
// the error.
func scriptedModel(cmd, name string) (runtime.Model, error) {
	switch name {
	case "", scriptedAgent:
		return nil, nil
	case scriptedObeys:
		return securityeval.ObedientModel(), nil
	}
	return nil, usageError("%s: --scripted-model must be %s or %s (got %q)", cmd, scriptedAgent, scriptedObeys, name)
}

// evidenceDoc is one line of an --evidence file.
type evidenceDoc struct {
	ID         string   `json:"id"`
	Text       string   `json:"text"`
	Provenance []string `json:"provenance,omitempty"`
}

// loadEvidence reads an --evidence file: JSON lines {"id", "text",
// "provenance"}, each a pre-retrieved document for the context's evidence
// tier. Unknown fields, an empty id or text, and a repeated id are errors
// naming the line.
func loadEvidence(path string) ([]runtime.TierDoc, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageError("run: --evidence: %v", err)
	}
	defer f.Close()
	var out []runtime.TierDoc
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var d evidenceDoc
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			return nil, usageError("run: --evidence %s line %d: %v", path, line, err)
		}
		switch {
		case d.ID == "" || d.Text == "":
			return nil, usageError("run: --evidence %s line %d: id and text must be set", path, line)
		case seen[d.ID] > 0:
			return nil, usageError("run: --evidence %s line %d: id %q already on line %d", path, line, d.ID, seen[d.ID])
		}
		seen[d.ID] = line
		out = append(out, runtime.TierDoc{ID: d.ID, Text: d.Text, Provenance: d.Provenance})
	}
	if err := sc.Err(); err != nil {
		return nil, usageError("run: --evidence %s: %v", path, err)
	}
	if len(out) == 0 {
		return nil, usageError("run: --evidence %s holds no document", path)
	}
	return out, nil
}
