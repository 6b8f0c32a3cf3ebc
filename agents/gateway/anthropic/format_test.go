package anthropic

import (
	"testing"

	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/gateway/providertest"
)

func TestPrintingAClientNeverShowsTheKey(t *testing.T) {
	const key = "sk-test-do-not-print-1234567890"
	c, err := New(Config{BaseURL: "http://127.0.0.1:1/v1", APIKey: gateway.NewSecret(key), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	providertest.CheckPrintsNoKey(t, c, key)
}
