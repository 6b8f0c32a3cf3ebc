package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/llm"
)

// Error types the clients give failures that did not come from a provider's
// error body. They end up in APIError.Type and in the span's error.type.
const (
	ErrTypeTimeout    = "timeout"            // the request or the response read timed out
	ErrTypeConnection = "connection"         // dialing, TLS or a reset connection
	ErrTypeStreamCut  = "stream_interrupted" // a 200 stream ended before its terminal event
	ErrTypeDecode     = "decode_error"       // a 2xx body that is not the documented shape
)

// APIError is a failed model call: an HTTP error answer from a provider
// (with the provider's own error type and message, verbatim), an error event
// in a stream, or a transport failure.
//
// Retryable is decided once, by the client that saw the failure: true for
// 408, 429 (except quota/spend exhaustion, which waiting does not cure), any
// 5xx including Anthropic's 529 overloaded_error, timeouts and connection
// errors; false for every other status, notably 400, whose message is the
// provider's explanation of what is wrong with the request.
//
// Error strings never contain credentials: clients scrub the key from
// provider messages before building an APIError.
type APIError struct {
	Provider  string // gen_ai.provider.name, e.g. "openai", "anthropic"
	Model     string // the model that was requested
	Status    int    // HTTP status; 0 for transport failures
	Type      string // provider error type (invalid_request_error, rate_limit_error, ...) or an ErrType* constant
	Code      string // provider error code when it sends one (OpenAI's "code")
	Param     string // offending parameter when the provider names it (OpenAI's "param")
	Message   string // provider's message, verbatim apart from credential scrubbing
	RequestID string // provider request id, for support tickets

	Retryable bool
	// RetryAfter is the wait the provider asked for (retry-after-ms or
	// retry-after headers); zero when it asked for none.
	RetryAfter time.Duration
	// Usage is what the provider reported before the call failed (e.g. a
	// stream that delivered message_start then an error event); nil when it
	// reported nothing. The gateway charges it.
	Usage *llm.Usage

	// Err is the underlying transport or decoding error, if any.
	Err error
}

func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider)
	if e.Model != "" {
		b.WriteString(" ")
		b.WriteString(e.Model)
	}
	b.WriteString(": ")
	if e.Status != 0 {
		fmt.Fprintf(&b, "status %d", e.Status)
		if e.Type != "" {
			fmt.Fprintf(&b, " (%s)", e.Type)
		}
	} else if e.Type != "" {
		b.WriteString(e.Type)
	} else {
		b.WriteString("error")
	}
	if e.Param != "" {
		fmt.Fprintf(&b, " param %s", e.Param)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	} else if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *APIError) Unwrap() error { return e.Err }

// ErrorType is the low-cardinality identifier used for the span attribute
// error.type: the provider's error type, else the HTTP status, else "_OTHER"
// (the semantic conventions' fallback value).
func (e *APIError) ErrorType() string {
	switch {
	case e.Type != "":
		return e.Type
	case e.Status != 0:
		return strconv.Itoa(e.Status)
	default:
		return "_OTHER"
	}
}

// IsRetryable reports whether err is worth another attempt: an APIError with
// Retryable set. Context cancellation and everything else is not.
func IsRetryable(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Retryable
}

// RetryableStatus is the status part of the retry rule: 408, 429 and every
// 5xx (which includes Anthropic's 529). Clients may still mark a 429 as
// permanent when its body says the quota is exhausted.
func RetryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// ParseRetryAfter reads the wait a provider asked for. retry-after-ms
// (milliseconds, sent by both OpenAI and Anthropic) wins over retry-after,
// which is either delta-seconds or an HTTP date (RFC 9110 §10.2.3). Values
// that do not parse, or are negative, give zero.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("retry-after"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < 1e9 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// TransportError turns an error from http.Client.Do or from reading a body
// into an APIError: timeouts and connection failures are retryable. A
// cancelled or expired caller context is returned as is (not an APIError),
// because retrying on the caller's behalf after it gave up would be wrong.
func TransportError(ctx context.Context, provider, model string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s %s: %w", provider, model, ctxErr)
	}
	ae := &APIError{Provider: provider, Model: model, Type: ErrTypeConnection, Retryable: true, Err: err}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		ae.Type = ErrTypeTimeout
	}
	return ae
}
