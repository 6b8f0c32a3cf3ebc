package contextlayer

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/llm"
)

// Config selects the strategy and its limits.
type Config struct {
	// Budget is the most tokens the system prompt and messages may count.
	Budget int
	// Shrink, Summarize and Pin switch the three steps on. With all three off
	// the layer only drops the oldest turns (the baseline strategy).
	Shrink    bool
	Summarize bool
	Pin       bool
	// ToolResultMaxTokens is the size above which a tool result is shrunk
	// (default 400).
	ToolResultMaxTokens int
	Limits              ShrinkLimits
	// RecentShare is the fraction of the budget reserved for the verbatim
	// recent window when summarising (default 0.5).
	RecentShare float64
	// PinPatterns recognise pinnable facts (default DefaultPinPatterns).
	PinPatterns []*regexp.Regexp
	// MaxPinTokens bounds the restored-pins block (default 200).
	MaxPinTokens int
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	var errs []error
	if c.Budget <= 0 {
		errs = append(errs, errors.New("budget must be a positive token count"))
	}
	if c.ToolResultMaxTokens < 0 {
		errs = append(errs, errors.New("tool_result_max_tokens must not be negative"))
	}
	if c.RecentShare < 0 || c.RecentShare >= 1 {
		errs = append(errs, fmt.Errorf("recent_share must be in [0, 1) (got %v)", c.RecentShare))
	}
	if c.MaxPinTokens < 0 {
		errs = append(errs, errors.New("max_pin_tokens must not be negative"))
	}
	return errors.Join(errs...)
}

// Strategy presets used by the measurement and by agents.
var strategies = map[string]func(budget int) Config{
	"truncate":              func(b int) Config { return Config{Budget: b} },
	"shrink":                func(b int) Config { return Config{Budget: b, Shrink: true} },
	"shrink+summarise":      func(b int) Config { return Config{Budget: b, Shrink: true, Summarize: true} },
	"shrink+summarise+pins": func(b int) Config { return Config{Budget: b, Shrink: true, Summarize: true, Pin: true} },
}

// StrategyNames lists the presets in order of increasing effort.
func StrategyNames() []string {
	return []string{"truncate", "shrink", "shrink+summarise", "shrink+summarise+pins"}
}

// Preset returns the named strategy at a budget.
func Preset(name string, budget int) (Config, error) {
	f, ok := strategies[name]
	if !ok {
		return Config{}, fmt.Errorf("unknown context strategy %q (want one of %s)", name, strings.Join(StrategyNames(), ", "))
	}
	return f(budget), nil
}

// Summarizer condenses a span of conversation. A model-backed one goes
// through the gateway; without one the layer summarises extractively.
type Summarizer interface {
	Summarize(ctx context.Context, msgs []llm.Message, maxTokens int) (string, error)
}

// Layer applies a Config before each model call. It is safe for concurrent
// use.
type Layer struct {
	cfg Config
	tok Counter
	sum Summarizer
}

// New returns a Layer. sum may be nil (extractive summaries).
func New(cfg Config, tok Counter, sum Summarizer) (*Layer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("context layer config: %w", err)
	}
	if tok == nil {
		return nil, errors.New("context layer config: a token counter is required")
	}
	if cfg.ToolResultMaxTokens == 0 {
		cfg.ToolResultMaxTokens = 400
	}
	if cfg.RecentShare == 0 {
		cfg.RecentShare = 0.5
	}
	if cfg.PinPatterns == nil {
		cfg.PinPatterns = DefaultPinPatterns()
	}
	if cfg.MaxPinTokens == 0 {
		cfg.MaxPinTokens = 200
	}
	cfg.Limits = cfg.Limits.withDefaults()
	return &Layer{cfg: cfg, tok: newMemo(tok), sum: sum}, nil
}

// Input is a conversation about to be sent.
type Input struct {
	System   string
	Messages []llm.Message
	// Pins are facts the task marks as required.
	Pins []string
}

// Output is what to send, with the report of what was done.
type Output struct {
	System   string
	Messages []llm.Message
	Report   Report
}

// Report is what one Apply did. Its shape is part of the journal format
// (agents/journal owns it: the runtime journals it in every model_request),
// so the types are aliases of the journal's.
type (
	Report      = journal.ContextReport
	ShrunkItem  = journal.ShrunkItem
	SummaryInfo = journal.SummaryInfo
)

// SummaryPrefix opens the message that replaces summarised turns.
const SummaryPrefix = "[Summary of earlier steps"

// PinsPrefix opens the block of restored pins.
const PinsPrefix = "[Pinned facts"

// Apply fits in to the budget.
func (l *Layer) Apply(ctx context.Context, in Input) (Output, error) {
	rep := Report{Tokenizer: l.tok.Name(), Budget: l.cfg.Budget}
	rep.TokensBefore = ConversationTokens(l.tok, in.System, in.Messages)

	// Pins come from the untouched conversation: shrinking deletes them.
	var pins []Pin
	if l.cfg.Pin {
		pins = collectPins(in.Messages, in.Pins, l.cfg.PinPatterns)
	}

	msgs := make([]llm.Message, len(in.Messages))
	copy(msgs, in.Messages)

	if l.cfg.Shrink {
		for i, m := range msgs {
			if m.Role != llm.RoleTool {
				continue
			}
			before := l.tok.Count(m.Content)
			if before <= l.cfg.ToolResultMaxTokens {
				continue
			}
			out, cut := ShrinkText(l.tok, m.Content, l.cfg.ToolResultMaxTokens, l.cfg.Limits)
			if !cut {
				continue
			}
			msgs[i].Content = out
			rep.Shrunk = append(rep.Shrunk, ShrunkItem{Index: i, ToolCallID: m.ToolCallID, TokensBefore: before, TokensAfter: l.tok.Count(out)})
		}
	}

	head := headLen(msgs)
	summaryAt := -1
	if l.cfg.Summarize && ConversationTokens(l.tok, in.System, msgs) > l.cfg.Budget {
		start := l.recentStart(in.System, msgs, head)
		if start > head {
			middle := msgs[head:start]
			headTok := ConversationTokens(l.tok, in.System, msgs[:head])
			recentTok := ConversationTokens(l.tok, "", msgs[start:])
			allowance := l.cfg.Budget - headTok - recentTok - messageOverhead - 24
			if l.cfg.Pin {
				allowance -= l.cfg.MaxPinTokens
			}
			allowance = max(allowance, 32)
			text, by, err := l.summarize(ctx, middle, allowance)
			if err != nil {
				return Output{}, err
			}
			// msgs is still in input order (Shrink edits in place), so head
			// and start-1 are positions in the input.
			info := &SummaryInfo{FromIndex: head, ToIndex: start - 1, Messages: len(middle), By: by}
			for _, m := range middle {
				for _, tc := range m.ToolCalls {
					info.ToolCallIDs = append(info.ToolCallIDs, tc.ID)
				}
			}
			content := fmt.Sprintf("%s: messages %d–%d (%d messages", SummaryPrefix, info.FromIndex, info.ToIndex, info.Messages)
			if len(info.ToolCallIDs) > 0 {
				content += "; tool calls " + strings.Join(info.ToolCallIDs, ", ")
			}
			content += ")]\n" + text
			sm := llm.Message{Role: llm.RoleUser, Content: content}
			info.Tokens = MessageTokens(l.tok, sm)
			rep.Summary = info
			msgs = append(append(append([]llm.Message{}, msgs[:head]...), sm), msgs[start:]...)
			summaryAt = head
		}
	}

	if l.cfg.Pin {
		block, restored, skipped := l.pinBlock(in.System, msgs, pins)
		rep.PinsSkipped = skipped
		if len(restored) > 0 {
			rep.PinsRestored = restored
			if summaryAt >= 0 {
				msgs[summaryAt].Content += "\n" + block
			} else {
				msgs = append(append(append([]llm.Message{}, msgs[:head]...), llm.Message{Role: llm.RoleUser, Content: block}), msgs[head:]...)
				summaryAt = head
			}
		}
	}

	// Last resort: drop the oldest turns after the task, a whole assistant
	// turn with its tool results at a time, never the summary/pins message
	// and never the final message.
	for ConversationTokens(l.tok, in.System, msgs) > l.cfg.Budget {
		i := head
		if i == summaryAt {
			i++
		}
		if i >= len(msgs)-1 {
			break
		}
		j := i + 1
		if msgs[i].Role == llm.RoleAssistant {
			for j < len(msgs) && msgs[j].Role == llm.RoleTool {
				j++
			}
		}
		if j >= len(msgs) {
			break
		}
		rep.DroppedOldest += j - i
		msgs = append(msgs[:i:i], msgs[j:]...)
	}

	rep.TokensAfter = ConversationTokens(l.tok, in.System, msgs)
	rep.OverBudget = rep.TokensAfter > l.cfg.Budget
	if err := llm.ValidateOrder(msgs); err != nil {
		return Output{}, fmt.Errorf("context layer broke the tool ordering rule (a bug): %w", err)
	}
	return Output{System: in.System, Messages: msgs, Report: rep}, nil
}

// headLen is the number of leading messages kept verbatim always: everything
// up to and including the first user message (the task).
func headLen(msgs []llm.Message) int {
	for i, m := range msgs {
		if m.Role == llm.RoleUser {
			return i + 1
		}
	}
	return 0
}

// recentStart finds where the verbatim recent window begins: as many of the
// last messages as fit in RecentShare of the budget, moved back so it never
// opens on a tool result (whose call would otherwise be summarised away).
func (l *Layer) recentStart(system string, msgs []llm.Message, head int) int {
	limit := int(float64(l.cfg.Budget) * l.cfg.RecentShare)
	start := len(msgs)
	used := 0
	for start > head {
		t := MessageTokens(l.tok, msgs[start-1])
		if used+t > limit && start < len(msgs) {
			break
		}
		used += t
		start--
	}
	for start > head && start < len(msgs) && msgs[start].Role == llm.RoleTool {
		start--
	}
	return start
}

func (l *Layer) summarize(ctx context.Context, middle []llm.Message, allowance int) (string, string, error) {
	if l.sum != nil {
		text, err := l.sum.Summarize(ctx, middle, allowance)
		if err != nil {
			return "", "", fmt.Errorf("summarise %d messages: %w", len(middle), err)
		}
		if l.tok.Count(text) > allowance {
			text, _ = ShrinkText(l.tok, text, allowance, ShrinkLimits{})
		}
		return text, "model", nil
	}
	return Extractive(l.tok, middle, allowance), "extractive", nil
}

// pinBlock lists the pins absent from the assembled conversation, within
// MaxPinTokens.
func (l *Layer) pinBlock(system string, msgs []llm.Message, pins []Pin) (string, []Pin, int) {
	var all strings.Builder
	all.WriteString(system)
	for _, m := range msgs {
		all.WriteString("\n")
		all.WriteString(m.Content)
		for _, tc := range m.ToolCalls {
			all.Write(tc.Arguments)
		}
	}
	text := all.String()
	var missing []Pin
	for _, p := range pins {
		if !strings.Contains(text, p.Value) {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return "", nil, 0
	}
	var b strings.Builder
	b.WriteString(PinsPrefix + " kept from compacted steps]")
	var restored []Pin
	skipped := 0
	for _, p := range missing {
		line := "\n- " + p.Value + " (" + p.Source + ")"
		if l.tok.Count(b.String()+line) > l.cfg.MaxPinTokens {
			skipped++
			continue
		}
		b.WriteString(line)
		restored = append(restored, p)
	}
	if len(restored) == 0 {
		return "", nil, skipped
	}
	return b.String(), restored, skipped
}

// Extractive summarises without a model: one line per message — the tool
// calls made, the opening of each result, the first sentence of text — and,
// when that is too long, as many lines from the start and the end as fit.
func Extractive(c Counter, msgs []llm.Message, maxTokens int) string {
	lines := make([]string, 0, len(msgs))
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleAssistant:
			if len(m.ToolCalls) > 0 {
				var calls []string
				for _, tc := range m.ToolCalls {
					calls = append(calls, tc.Name+"("+clip(compactJSON(string(tc.Arguments)), 60)+")")
				}
				lines = append(lines, "called "+strings.Join(calls, ", "))
			}
			if s := firstSentence(m.Content); s != "" {
				lines = append(lines, "assistant: "+clip(s, 120))
			}
		case llm.RoleTool:
			prefix := "→ "
			if m.IsError {
				prefix = "→ error: "
			}
			lines = append(lines, prefix+clip(compactJSON(m.Content), 110))
		case llm.RoleUser:
			lines = append(lines, "user: "+clip(firstSentence(m.Content), 120))
		}
	}
	join := func(ls []string) string { return strings.Join(ls, "\n") }
	if c.Count(join(lines)) <= maxTokens {
		return join(lines)
	}
	// Keep the start and the end, drop from the middle.
	lo, hi := 0, len(lines)
	for lo < hi {
		k := (lo + hi + 1) / 2
		if c.Count(join(keepEnds(lines, k))) <= maxTokens {
			lo = k
		} else {
			hi = k - 1
		}
	}
	return join(keepEnds(lines, lo))
}

func keepEnds(lines []string, k int) []string {
	if k >= len(lines) {
		return lines
	}
	a := (k + 1) / 2
	b := k - a
	out := append([]string{}, lines[:a]...)
	out = append(out, fmt.Sprintf("… %d more steps …", len(lines)-k))
	return append(out, lines[len(lines)-b:]...)
}

func compactJSON(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

func firstSentence(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, ".!?\n"); i >= 0 {
		return s[:i+1]
	}
	return s
}
