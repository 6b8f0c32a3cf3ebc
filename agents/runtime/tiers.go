package runtime

import (
	"fmt"
	"strings"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/llm"
)

// assembled is one request's tier assembly.
type assembled struct {
	system string // the system prompt with the admitted evidence and memory
	budget int    // the layer's budget: what the tiers allotted in all
	report journal.TierReport
}

// Headers of the blocks the admitted evidence and memory are sent in
// (exported so an agent's scripted policy can find them).
const (
	EvidenceHeader = "Evidence (retrieved for this task; cite by id):"
	MemoryHeader   = "Recalled memory (from earlier runs; may be stale, verify before relying on it):"
)

// renderDoc is how a document is sent: its id and provenance, then its text.
func renderDoc(d TierDoc) string {
	head := "[" + d.ID
	if len(d.Provenance) > 0 {
		head += " · " + strings.Join(d.Provenance, ", ")
	}
	return head + "]\n" + d.Text
}

// assembleTiers offers the request's material to the tier builder: the
// system prompt and task as one instructions item; evidence and memory as
// the spec gives them; each tool result as a tool output and every other
// turn as history, most recent first inside their tier.
func assembleTiers(counter contextlayer.Counter, spec *TierSpec, system string, msgs []llm.Message) (assembled, error) {
	var items []contextlayer.Item
	head := min(len(msgs), 1)
	items = append(items, contextlayer.Item{ID: "instructions", Tier: contextlayer.TierInstructions,
		Tokens: contextlayer.ConversationTokens(counter, system, msgs[:head]), Pinnable: true,
		Provenance: []string{"system prompt", "task"}})
	docs := map[string]TierDoc{}
	add := func(tier contextlayer.Tier, d TierDoc) {
		docs[d.ID] = d
		items = append(items, contextlayer.Item{ID: d.ID, Tier: tier, Text: renderDoc(d), Relevance: d.Relevance, Provenance: d.Provenance})
	}
	for _, d := range spec.Evidence {
		add(contextlayer.TierEvidence, d)
	}
	for _, d := range spec.Memory {
		add(contextlayer.TierMemory, d)
	}
	for i := head; i < len(msgs); i++ {
		m := msgs[i]
		it := contextlayer.Item{Tokens: max(contextlayer.MessageTokens(counter, m), 1), Relevance: float64(i) / float64(len(msgs))}
		if m.Role == llm.RoleTool {
			it.ID, it.Tier = fmt.Sprintf("tool:%s", m.ToolCallID), contextlayer.TierToolOutput
			it.Provenance = []string{"tool call " + m.ToolCallID}
		} else {
			it.ID, it.Tier = fmt.Sprintf("msg:%d", i), contextlayer.TierHistory
		}
		items = append(items, it)
	}
	floors := map[contextlayer.Tier]int{}
	for name, f := range spec.Floors {
		t, err := contextlayer.ParseTier(name)
		if err != nil {
			return assembled{}, fmt.Errorf("context tiers: %w", err)
		}
		floors[t] = f
	}
	b := contextlayer.Builder{Window: spec.Window, Reserve: spec.Reserve, Floors: floors, Counter: counter}
	adm, rep, err := b.Build(items)
	if err != nil {
		return assembled{}, fmt.Errorf("context tiers: %w", err)
	}
	var ev, mem []string
	var docTokens int
	for _, a := range adm {
		switch a.Item.Tier {
		case contextlayer.TierEvidence:
			ev = append(ev, a.Item.Text)
			docTokens += a.Tokens
		case contextlayer.TierMemory:
			mem = append(mem, a.Item.Text)
			docTokens += a.Tokens
		}
	}
	out := system
	if len(ev) > 0 {
		out += "\n\n" + EvidenceHeader + "\n\n" + strings.Join(ev, "\n\n")
	}
	if len(mem) > 0 {
		out += "\n\n" + MemoryHeader + "\n\n" + strings.Join(mem, "\n\n")
	}
	// The headers and separators cost a few tokens the items did not
	// count; the layer's budget includes them, within the usable window.
	overhead := max(counter.Count(out)-counter.Count(system)-docTokens, 0)
	budget := min(rep.Used+overhead, rep.Usable)
	return assembled{system: out, budget: budget, report: rep}, nil
}
