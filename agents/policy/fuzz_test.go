package policy_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/policy"
)

// FuzzParseRules: any input either fails with an error naming the file, or
// yields rules that validate and survive a JSON round trip unchanged.
func FuzzParseRules(f *testing.F) {
	f.Add(mailRules)
	f.Add(`{"version":1,"rules":[{"tool":"a[","decision":"allow"}]}`)
	f.Add(`{"version":2}`)
	f.Fuzz(func(t *testing.T, in string) {
		r, err := policy.ParseRules(strings.NewReader(in), "fuzz.json")
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("accepted rules do not validate: %v", err)
		}
		b, _ := json.Marshal(r)
		r2, err := policy.ParseRules(bytes.NewReader(b), "again")
		if err != nil || !reflect.DeepEqual(normal(r), normal(r2)) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, r, r2)
		}
		e, _ := policy.NewEngine(r)
		v := e.Authorize(policy.Request{Tool: "x", Scope: "y", Writes: true}, nil)
		if v.Decision != policy.Allow && v.Decision != policy.Deny {
			t.Fatalf("untainted request got %s", v.Decision)
		}
	})
}

func normal(r policy.Rules) policy.Rules {
	if len(r.Tools) == 0 {
		r.Tools = nil
	}
	if len(r.Rules) == 0 {
		r.Rules = nil
	}
	return r
}

// FuzzReadAudit: any input decodes or fails naming a line, and verifying
// what decoded never panics; a log written by AuditLog always verifies.
func FuzzReadAudit(f *testing.F) {
	l, _ := policy.OpenAudit("", nil)
	l.Append("a", "tool_call", map[string]any{"decision": "allow"})
	l.Append("b", "approval_granted", nil)
	var buf bytes.Buffer
	for _, e := range l.Entries() {
		b, _ := json.Marshal(e)
		buf.Write(append(b, '\n'))
	}
	f.Add(buf.String())
	f.Add("{}\n{\"seq\":2}")
	f.Fuzz(func(t *testing.T, in string) {
		es, err := policy.ReadAudit(strings.NewReader(in), "fuzz.jsonl")
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.jsonl line ") && !strings.Contains(err.Error(), "fuzz.jsonl:") {
				t.Fatalf("error does not name the line: %v", err)
			}
			return
		}
		_ = policy.VerifyAudit(es)
		fresh, _ := policy.OpenAudit("", nil)
		for _, e := range es {
			if _, err := fresh.Append(e.Actor, e.Action, e.Data); err != nil {
				return // data that is not JSON cannot be re-appended
			}
		}
		if err := fresh.Verify(); err != nil {
			t.Fatalf("a log written by AuditLog does not verify: %v", err)
		}
	})
}
