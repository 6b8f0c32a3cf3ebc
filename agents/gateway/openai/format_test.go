package openai

import (
	"fmt"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/gateway"
)

func TestPrintingAClientNeverShowsTheKey(t *testing.T) {
	const key = "sk-test-do-not-print-1234567890"
	c, err := New(Config{BaseURL: "http://127.0.0.1:1/v1", APIKey: gateway.NewSecret(key), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		if out := fmt.Sprintf(verb, c); strings.Contains(out, key) || !strings.Contains(out, "m") {
			t.Errorf("%s printed %q", verb, out)
		}
		if out := fmt.Sprintf(verb, *c); strings.Contains(out, key) {
			t.Errorf("%s of the value printed the key: %q", verb, out)
		}
	}
}
