// Package bookkeeper is the runtime's own demonstration agent: a
// bookkeeper with a pure calculator, a small policy search (a retrieval
// tool that reports evidence ids) and a ledger that writes real rows into
// the journal's database through the effect transaction. The crash,
// resume and replay tests run it, and `loom-eval replay` registers it so
// its committed journals replay without a model key. The reference agents
// (research, coding) register the same way.
package bookkeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/loomwork/loomwork/agents/runtime"
)

// Name is the agent's registered name.
const Name = "bookkeeper"

// System is the agent's system prompt.
const System = "You are a bookkeeper. Use the calculator for arithmetic, search_policy to find the expense policy, " +
	"and ledger_append to record each entry exactly once. Cite policy documents as [doc:ID]."

// LedgerSchema is the ledger table the ledger_append tool writes, in the
// journal's database.
const LedgerSchema = `CREATE TABLE IF NOT EXISTS ledger_entries (
  idempotency_key TEXT PRIMARY KEY,
  run_id          TEXT    NOT NULL,
  step            INTEGER NOT NULL,
  account         TEXT    NOT NULL,
  amount_cents    INTEGER NOT NULL,
  memo            TEXT    NOT NULL DEFAULT ''
)`

// Agent returns the bookkeeper.
func Agent() runtime.Agent {
	return runtime.Agent{
		Name:      Name,
		System:    System,
		Tools:     []runtime.Tool{Calculator(), SearchPolicy(), LedgerAppend()},
		Citations: Citations,
	}
}

// Register adds the bookkeeper to reg.
func Register(reg *runtime.Registry) error { return reg.Register(Agent()) }

// Calculator is a pure tool: add, sub, mul or div of two numbers.
func Calculator() runtime.Tool {
	return runtime.Tool{
		Name:        "calculator",
		Description: "Compute a op b.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
			"op":{"type":"string","enum":["add","sub","mul","div"]},
			"a":{"type":"number"},"b":{"type":"number"}},
			"required":["op","a","b"],"additionalProperties":false}`),
		Run: func(_ context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
			var a struct {
				Op   string
				A, B float64
			}
			if err := json.Unmarshal(in.Arguments, &a); err != nil {
				return runtime.ToolOutput{}, fmt.Errorf("decode arguments: %w", err)
			}
			var v float64
			switch a.Op {
			case "add":
				v = a.A + a.B
			case "sub":
				v = a.A - a.B
			case "mul":
				v = a.A * a.B
			case "div":
				if a.B == 0 {
					return runtime.ToolOutput{}, errors.New("division by zero")
				}
				v = a.A / a.B
			}
			return runtime.ToolOutput{Content: strconv.FormatFloat(v, 'g', -1, 64)}, nil
		},
	}
}

// policies is the search tool's corpus.
var policies = map[string]string{
	"policy/meals":   "Meals are reimbursed up to 40 EUR per day with a receipt.",
	"policy/travel":  "Travel is booked in economy class; trains under four hours.",
	"policy/hotels":  "Hotels are reimbursed up to 120 EUR per night.",
	"policy/receipt": "Every expense needs a receipt; without one it is booked to the suspense account.",
}

// SearchPolicy is a retrieval tool: it returns the policy documents whose
// text contains every query word, with their ids as evidence.
func SearchPolicy() runtime.Tool {
	return runtime.Tool{
		Name:        "search_policy",
		Description: "Search the expense policy.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","minLength":1}},"required":["query"]}`),
		Run: func(_ context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
			var a struct{ Query string }
			if err := json.Unmarshal(in.Arguments, &a); err != nil {
				return runtime.ToolOutput{}, fmt.Errorf("decode arguments: %w", err)
			}
			words := strings.Fields(strings.ToLower(a.Query))
			var ids []string
			for id, text := range policies {
				lt := strings.ToLower(text)
				ok := true
				for _, w := range words {
					if !strings.Contains(lt, w) {
						ok = false
						break
					}
				}
				if ok {
					ids = append(ids, id)
				}
			}
			sort.Strings(ids)
			var b strings.Builder
			for _, id := range ids {
				fmt.Fprintf(&b, "[doc:%s] %s\n", id, policies[id])
			}
			if len(ids) == 0 {
				b.WriteString("no policy matches")
			}
			return runtime.ToolOutput{Content: b.String(), Documents: ids}, nil
		},
	}
}

// LedgerAppend is the side-effecting tool: it inserts one ledger row, keyed
// by the call's idempotency key, through the journal's transaction, and
// answers with the account's new balance.
func LedgerAppend() runtime.Tool {
	return runtime.Tool{
		Name:        "ledger_append",
		Description: "Record a ledger entry and return the account balance.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
			"account":{"type":"string","minLength":1,"maxLength":64},
			"amount_cents":{"type":"integer","minimum":-100000000,"maximum":100000000},
			"memo":{"type":"string","maxLength":200}},
			"required":["account","amount_cents"],"additionalProperties":false}`),
		Effect:       true,
		EffectSchema: LedgerSchema,
		Run: func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
			if in.Tx == nil {
				return runtime.ToolOutput{}, errors.New("ledger_append needs the journal's SQL transaction: a journal with tables, such as journaldb")
			}
			var a struct {
				Account     string `json:"account"`
				AmountCents int64  `json:"amount_cents"`
				Memo        string `json:"memo"`
			}
			if err := json.Unmarshal(in.Arguments, &a); err != nil {
				return runtime.ToolOutput{}, fmt.Errorf("decode arguments: %w", err)
			}
			if err := in.Tx.Exec(ctx, `INSERT INTO ledger_entries (idempotency_key, run_id, step, account, amount_cents, memo) VALUES (?, ?, ?, ?, ?, ?)`,
				in.IdempotencyKey, in.RunID, in.Step, a.Account, a.AmountCents, a.Memo); err != nil {
				return runtime.ToolOutput{}, err
			}
			var balance int64
			if err := in.Tx.QueryRow(ctx, `SELECT COALESCE(SUM(amount_cents), 0) FROM ledger_entries WHERE run_id = ? AND account = ?`, in.RunID, a.Account).Scan(&balance); err != nil {
				return runtime.ToolOutput{}, fmt.Errorf("read balance: %w", err)
			}
			return runtime.ToolOutput{Content: fmt.Sprintf("recorded %d cents on %s; balance %d cents", a.AmountCents, a.Account, balance)}, nil
		},
	}
}

var citeRE = regexp.MustCompile(`\[doc:([A-Za-z0-9_./-]+)\]`)

// Citations returns the [doc:ID] ids an answer cites, in order, without
// repeats.
func Citations(answer string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range citeRE.FindAllStringSubmatch(answer, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	return out
}
