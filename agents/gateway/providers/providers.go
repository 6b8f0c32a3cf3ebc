// Package providers registers the standard model provider clients with the
// gateway: "openai" (OpenAI and OpenAI-compatible local servers) and
// "anthropic". It exists so the gateway package does not import its clients
// (which import it for APIError and Secret).
package providers

import (
	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/gateway/anthropic"
	"github.com/loomwork/loomwork/agents/gateway/openai"
)

// Standard returns the provider table for gateway.Options.Providers.
func Standard() map[string]gateway.Provider {
	return map[string]gateway.Provider{
		openai.ProviderName:    openai.Provider(),
		anthropic.ProviderName: anthropic.Provider(),
	}
}
