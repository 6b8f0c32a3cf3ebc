package policy_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/policy"
)

const scopeRules = `{"version": 1, "scope": "workspace",
 "tools": {
  "send_email": {"writes": true, "scope_arg": "to", "scope_prefix": "to:", "scope_type": "email"},
  "fetch": {"scope_arg": "url", "scope_prefix": "url:", "scope_type": "url"}},
 "rules": [
  {"tool": "send_email", "scope": "to:*@loomwork.example", "decision": "allow"},
  {"tool": "send_email", "scope": "to:ceo@loomwork.example", "decision": "deny"},
  {"tool": "fetch", "scope": "url:https://docs.loomwork.example/guide/*", "decision": "allow"}]}`

func scopeEngine(t *testing.T) *policy.Engine {
	t.Helper()
	r, err := policy.ParseRules(strings.NewReader(scopeRules), "test")
	if err != nil {
		t.Fatal(err)
	}
	e, err := policy.NewEngine(r)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestScopeRulesMatchEachParsedRecipient: `to:*@loomwork.example` allows
// mail to loomwork.example and nothing else — not a list that smuggles an
// outside address before or after an internal one, not a look-alike
// domain, not a quoted local part hiding an '@'; what does not parse is
// denied.
func TestScopeRulesMatchEachParsedRecipient(t *testing.T) {
	e := scopeEngine(t)
	for _, c := range []struct {
		to   string
		want policy.Decision
	}{
		{"team@loomwork.example", policy.Allow},
		{"Team <team@LoomWork.Example>", policy.Allow},
		{"team@loomwork.example, ops@loomwork.example", policy.Allow},
		{"leak@evil.example, team@loomwork.example", policy.Deny},
		{"team@loomwork.example, leak@evil.example", policy.Deny},
		{"refunds-archive@evil.example;cc=ops@loomwork.example", policy.Deny},
		{"leak@loomwork.example.evil.example", policy.Deny},
		{"leak@loomwork-example.com", policy.Deny},
		{"leak@evil-loomwork.example", policy.Deny},
		{"leak@xloomwork.example", policy.Deny},
		{"leak@loomwork.exаmple", policy.Deny},       // Cyrillic а
		{"leak@ｌoomwork.example", policy.Deny},       // fullwidth l
		{"leak@loomwork.example\u200b", policy.Deny}, // zero-width space
		{`"leak@evil.example"@loomwork.example`, policy.Deny},
		{`"leak@evil.example" <team@loomwork.example>`, policy.Allow}, // the display name is not an address
		{`"team@loomwork.example" <leak@evil.example>`, policy.Deny},
		{"leak@evil.example (team@loomwork.example)", policy.Deny},
		{"team@[10.0.0.1]", policy.Deny},
		{"ceo@loomwork.example", policy.Deny},                        // a deny rule wins
		{"team@loomwork.example, ceo@loomwork.example", policy.Deny}, // … for any recipient
		{"", policy.Deny},
		{"not an address", policy.Deny},
		{"team@loomwork.example leak@evil.example", policy.Deny},
	} {
		args, _ := json.Marshal(map[string]string{"to": c.to})
		v := e.Authorize(policy.Request{Tool: "send_email", Arguments: args, Scope: "to:" + c.to, Writes: true}, nil)
		if v.Decision != c.want {
			t.Errorf("send_email to %q: %s (%s), want %s", c.to, v.Decision, v.Reason, c.want)
		}
	}
}

func TestScopeRulesMatchParsedURLs(t *testing.T) {
	e := scopeEngine(t)
	for _, c := range []struct {
		url  string
		want policy.Decision
	}{
		{"https://docs.loomwork.example/guide/setup", policy.Allow},
		{"https://DOCS.loomwork.example/guide/setup?q=1#x", policy.Allow},
		{"https://docs.loomwork.example/guide/../admin/keys", policy.Deny},
		{"https://docs.loomwork.example/guide/a/b", policy.Deny},
		{"https://docs.loomwork.example@evil.example/guide/setup", policy.Deny},
		{"https://evil.example/guide/setup?docs.loomwork.example/guide/x", policy.Deny},
		{"https://docs.loomwork.example.evil.example/guide/setup", policy.Deny},
		{"https://docs.lοomwork.example/guide/setup", policy.Deny}, // Greek ο
		{"http://docs.loomwork.example/guide/setup", policy.Deny},
		{"javascript:alert(1)", policy.Deny},
		{"docs.loomwork.example/guide/setup", policy.Deny},
		{"https://docs.loomwork.example:8443/guide/setup", policy.Deny},
	} {
		v := e.Authorize(policy.Request{Tool: "fetch", Scope: "url:" + c.url}, nil)
		if v.Decision != c.want {
			t.Errorf("fetch %q: %s (%s), want %s", c.url, v.Decision, v.Reason, c.want)
		}
	}
}

func TestScopeArgNeedsAType(t *testing.T) {
	_, err := policy.ParseRules(strings.NewReader(`{"version": 1, "tools": {"send_email": {"scope_arg": "to", "scope_prefix": "to:"}},
 "rules": [{"tool": "send_email", "scope": "to:*@loomwork.example", "decision": "allow"}]}`), "old.json")
	if err == nil || !strings.Contains(err.Error(), `tools.send_email: scope_arg needs scope_type "email" or "url"`) {
		t.Fatalf("ParseRules = %v, want scope_type required", err)
	}
}
