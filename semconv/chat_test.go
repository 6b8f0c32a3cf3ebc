package semconv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
)

func attrMap(t *testing.T, kvs []attribute.KeyValue) map[string]any {
	t.Helper()
	m := map[string]any{}
	for _, kv := range kvs {
		k := string(kv.Key)
		if _, dup := m[k]; dup {
			t.Errorf("key %s written twice", k)
		}
		m[k] = kv.Value.AsInterface()
	}
	return m
}

func TestChatAttributesWritesEveryKeyOfAFullCall(t *testing.T) {
	temp, cost := 0.2, 0.0042
	got := attrMap(t, ChatAttributes(Chat{
		Operation:      OpChat,
		Provider:       "anthropic",
		RequestModel:   "claude-sonnet-4-5",
		MaxTokens:      4096,
		Temperature:    &temp,
		AgentName:      "researcher",
		ConversationID: "run-1",
		ResponseModel:  "claude-sonnet-4-5-20250929",
		FinishReasons:  []string{"end_turn"},
		Label:          "live",
		Usage:          &Usage{InputTokens: 2600, OutputTokens: 310, CacheReadTokens: 1792, CacheCreationTokens: 512, ReasoningTokens: 96},
		CostUSD:        &cost,
		ErrorType:      "overloaded_error",
	}))
	want := map[string]any{
		"gen_ai.operation.name":                    "chat",
		"gen_ai.provider.name":                     "anthropic",
		"gen_ai.request.model":                     "claude-sonnet-4-5",
		"gen_ai.request.max_tokens":                int64(4096),
		"gen_ai.request.temperature":               0.2,
		"gen_ai.agent.name":                        "researcher",
		"gen_ai.conversation.id":                   "run-1",
		"gen_ai.response.model":                    "claude-sonnet-4-5-20250929",
		"gen_ai.response.finish_reasons":           []string{"end_turn"},
		"loomwork.model.label":                     "live",
		"gen_ai.usage.input_tokens":                int64(2600),
		"gen_ai.usage.output_tokens":               int64(310),
		"gen_ai.usage.cache_read.input_tokens":     int64(1792),
		"gen_ai.usage.cache_creation.input_tokens": int64(512),
		"gen_ai.usage.reasoning.output_tokens":     int64(96),
		"llm.cost.total":                           0.0042,
		"error.type":                               "overloaded_error",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ChatAttributes =\n%v\nwant\n%v", got, want)
	}
}

func TestChatAttributesZeroCountRule(t *testing.T) {
	// Usage reported, every count 0: input and output are the report and are
	// written; the optional counts are not (0 cannot be told from "not
	// reported").
	got := attrMap(t, ChatAttributes(Chat{Usage: &Usage{}}))
	want := map[string]any{"gen_ai.usage.input_tokens": int64(0), "gen_ai.usage.output_tokens": int64(0)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("all-zero usage = %v, want %v", got, want)
	}

	// Each optional count appears exactly when it is > 0.
	for _, c := range []struct {
		key string
		u   Usage
	}{
		{AttrUsageCacheReadInputTokens, Usage{InputTokens: 10, CacheReadTokens: 1}},
		{AttrUsageCacheCreationInputTokens, Usage{InputTokens: 10, CacheCreationTokens: 1}},
		{AttrUsageReasoningOutputTokens, Usage{OutputTokens: 10, ReasoningTokens: 1}},
	} {
		got := attrMap(t, ChatAttributes(Chat{Usage: &c.u}))
		if len(got) != 3 || got[c.key] != int64(1) {
			t.Errorf("usage %+v: attributes %v, want input, output and %s=1", c.u, got, c.key)
		}
	}

	// No usage (a call that failed before an answer): no usage key at all.
	if got := ChatAttributes(Chat{ErrorType: "server_error"}); len(got) != 1 || got[0].Key != AttrErrorType {
		t.Fatalf("failed call without usage = %v, want only error.type", got)
	}
}

func TestChatAttributesOfTheZeroChatIsEmpty(t *testing.T) {
	if got := ChatAttributes(Chat{}); len(got) != 0 {
		t.Fatalf("ChatAttributes(Chat{}) = %v, want nothing", got)
	}
	// Empty finish reasons are dropped, so callers may pass
	// []string{resp.StopReason} as it is; an unknown cost is never 0.
	got := attrMap(t, ChatAttributes(Chat{FinishReasons: []string{"", "stop", ""}}))
	if !reflect.DeepEqual(got, map[string]any{"gen_ai.response.finish_reasons": []string{"stop"}}) {
		t.Fatalf("finish reasons = %v", got)
	}
	if got := ChatAttributes(Chat{FinishReasons: []string{""}}); len(got) != 0 {
		t.Fatalf("an empty stop reason wrote %v", got)
	}
	zero := 0.0
	if got := attrMap(t, ChatAttributes(Chat{CostUSD: &zero})); got[AttrCost] != 0.0 {
		t.Fatalf("a known zero cost = %v, want llm.cost.total=0", got)
	}
}

func TestIsModelCallOperation(t *testing.T) {
	for op, want := range map[string]bool{
		OpChat: true, OpTextCompletion: true, OpGenerateContent: true, OpEmbeddings: true,
		OpExecuteTool: false, OpInvokeAgent: false, OpInvokeWorkflow: false, OpRetrieval: false, OpRerank: false, "": false,
	} {
		if got := IsModelCallOperation(op); got != want {
			t.Errorf("IsModelCallOperation(%q) = %v, want %v", op, got, want)
		}
	}
}

// TestEveryNameIsDefinedOnce reads the package's constants: no two names
// spell the same key, and each key constant's value has the prefix its
// group promises, so a typo or a second spelling of a key cannot creep in.
func TestEveryNameIsDefinedOnce(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	byValue := map[string]string{}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Errorf("%s: constant %s is not a string literal", f, name.Name)
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					n++
					if other, dup := byValue[v]; dup {
						t.Errorf("%q is both %s and %s", v, other, name.Name)
					}
					byValue[v] = name.Name
					switch {
					case strings.HasPrefix(name.Name, "OpenInference"), strings.HasPrefix(name.Name, "OpenLLMetry"):
						if strings.HasPrefix(v, "gen_ai.") || strings.HasPrefix(v, Prefix) {
							t.Errorf("%s = %q: an OpenInference/OpenLLMetry name in the GenAI or Loomwork namespace", name.Name, v)
						}
					case strings.HasPrefix(name.Name, "AttrContext"), strings.HasPrefix(name.Name, "AttrSummary"),
						strings.HasPrefix(name.Name, "AttrGateway"), strings.HasPrefix(name.Name, "EventGateway"),
						strings.HasPrefix(name.Name, "AttrRetrieval") && name.Name != "AttrRetrievalDocuments" && name.Name != "AttrRetrievalQueryText":
						if !strings.HasPrefix(v, Prefix) {
							t.Errorf("%s = %q: a Loomwork key outside %q", name.Name, v, Prefix)
						}
					}
				}
			}
		}
	}
	if n < 100 {
		t.Fatalf("read only %d constants: is the test in the semconv directory?", n)
	}
}
