// Package gateway is the one place model calls cross the process boundary:
// it routes each request over a declared chain of models (first entry that
// has the required capabilities and a large enough context window), retries
// retryable failures (429, 5xx including Anthropic's 529, timeouts,
// connection errors) with exponential backoff and jitter while honouring
// Retry-After, falls back down the chain when retries run out, refuses
// before sending anything when the budget cannot cover the attempt's worst
// case, and keeps per-model accounts that charge failed attempts.
//
// Credentials are read from the environment when the gateway is built and
// held as Secret values, which print, log and marshal as "[REDACTED]";
// clients also scrub keys a provider echoes back in an error.
//
// A chain entry is served by any Model: the OpenAI-compatible and Anthropic
// clients (sub-packages openai and anthropic, registered by package
// providers), a scripted model, or a hand-built client. The gateway is a
// Model itself. With a Tracer it emits one "chat {model}" client span per
// attempt with the OpenTelemetry GenAI attributes. See docs/gateway.md.
package gateway
