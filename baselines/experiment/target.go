package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/propagation"

	"github.com/loomwork/loomwork/datasets"
)

// Target is how the runner reaches the agent under evaluation: one
// implementation per kind (CommandTarget, OpenAITarget, HTTPTarget,
// A2ATarget, MCPTarget). To add a kind: a config struct with
// Validate(), a constructor without I/O, and a Target whose Run sends
// req.Case's task, carries req.Trace to the agent (headers, metadata or
// environment: whatever the protocol has for W3C trace context) and
// classifies what went wrong — an *InfraError for what is not the agent's
// doing (retried), Response.Failure for what is (recorded).
type Target interface {
	// Describe says what the target is, with secrets redacted.
	Describe() datasets.ExperimentTarget
	// Run runs one trial. A non-nil error is an infrastructure failure: an
	// *InfraError whose Retryable says whether the runner may try again;
	// any other error stops the experiment. The agent's own failure is a
	// Response with Failure set, never an error.
	Run(ctx context.Context, req Request) (Response, error)
}

// Flusher is implemented by targets whose agent has exported its spans
// when Run returns (a process that exited: OTel SDKs flush on shutdown).
// The runner then waits only for the spans in flight, not for an agent
// that may export on a timer (a server behind HTTP).
type Flusher interface {
	FlushedOnReturn() bool
}

// Request is one trial as a target sees it.
type Request struct {
	ExperimentID string
	Case         *datasets.Case
	Trial        int
	// Trace is the W3C trace context of the runner's root span of this
	// trial and the OTLP settings the agent's SDK should use.
	Trace Propagation
}

// Response is what the agent answered.
type Response struct {
	// Answer is the agent's answer; "" means the agent printed none (the
	// runner then reads it from the trial's trace).
	Answer string
	// Failure, when set, says why the agent failed (a non-zero exit, an
	// HTTP 4xx or 500, a timeout): the trial is recorded as not finished.
	Failure string
	// Usage is the token usage the protocol reported (an OpenAI response's
	// usage), nil when it reported none; the trace's usage wins.
	Usage *Usage
	// Model is the model the protocol reported ("" if none).
	Model string
}

// Usage is reported token usage.
type Usage struct{ Input, Output int64 }

// InfraError is a failure that is not the agent's: the command could not
// start, the connection was refused, the endpoint answered 502, 503, 504
// or 429. Retryable errors are retried with backoff; a trial that still
// fails is not recorded (resuming runs it).
type InfraError struct {
	Retryable bool
	Err       error
}

func (e *InfraError) Error() string { return "infrastructure: " + e.Err.Error() }
func (e *InfraError) Unwrap() error { return e.Err }

// Propagation is the trace context and OTLP settings handed to an agent.
type Propagation struct {
	// TraceParent and TraceState are W3C trace-context values (the
	// runner's root span); Baggage the W3C baggage value.
	TraceParent, TraceState, Baggage string
	// OTLPEndpoint is the collector's OTLP/HTTP base URL
	// (http://127.0.0.1:PORT), OTLPProtocol "http/protobuf".
	OTLPEndpoint, OTLPProtocol string
	// ServiceName is OTEL_SERVICE_NAME when the agent's environment has
	// none.
	ServiceName string
	// Resource is the resource attributes the agent's SDK should add
	// (experiment id, case id, trial), in order.
	Resource [][2]string
}

// Env returns base with the OTel environment of p: TRACEPARENT,
// TRACESTATE and BAGGAGE (the OTel environment-carrier names),
// OTEL_EXPORTER_OTLP_ENDPOINT and _PROTOCOL (replacing base's),
// OTEL_SERVICE_NAME unless base sets one, and OTEL_RESOURCE_ATTRIBUTES
// (base's, with p.Resource appended: later keys win in every SDK).
func (p Propagation) Env(base []string) []string {
	set := map[string]string{}
	order := []string{}
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if _, dup := set[k]; !dup {
			order = append(order, k)
		}
		set[k] = v
	}
	put := func(k, v string) {
		if v == "" {
			return
		}
		if _, ok := set[k]; !ok {
			order = append(order, k)
		}
		set[k] = v
	}
	put("TRACEPARENT", p.TraceParent)
	put("TRACESTATE", p.TraceState)
	put("BAGGAGE", p.Baggage)
	if p.OTLPEndpoint != "" {
		put("OTEL_EXPORTER_OTLP_ENDPOINT", p.OTLPEndpoint)
		put("OTEL_EXPORTER_OTLP_PROTOCOL", p.OTLPProtocol)
		// Signal-specific settings would win over the generic ones.
		delete(set, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
		delete(set, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	}
	if strings.TrimSpace(set["OTEL_SERVICE_NAME"]) == "" {
		put("OTEL_SERVICE_NAME", p.ServiceName)
	}
	if len(p.Resource) > 0 {
		var parts []string
		if old := strings.TrimSpace(set["OTEL_RESOURCE_ATTRIBUTES"]); old != "" {
			parts = append(parts, old)
		}
		for _, kv := range p.Resource {
			parts = append(parts, kv[0]+"="+escapeResourceValue(kv[1]))
		}
		put("OTEL_RESOURCE_ATTRIBUTES", strings.Join(parts, ","))
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		if v, ok := set[k]; ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// Headers sets traceparent, tracestate and baggage on h.
func (p Propagation) Headers(h http.Header) {
	if p.TraceParent != "" {
		h.Set("traceparent", p.TraceParent)
	}
	if p.TraceState != "" {
		h.Set("tracestate", p.TraceState)
	}
	if p.Baggage != "" {
		h.Set("baggage", p.Baggage)
	}
}

// context returns ctx carrying p's trace context and baggage, for a
// client that propagates what its context holds (the A2A remote).
func (p Propagation) context(ctx context.Context) context.Context {
	h := http.Header{}
	p.Headers(h)
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}).
		Extract(ctx, propagation.HeaderCarrier(h))
}

// escapeResourceValue percent-encodes what OTEL_RESOURCE_ATTRIBUTES
// reserves (the SDKs percent-decode values): ',', '=', '%', spaces and
// anything outside printable ASCII.
func escapeResourceValue(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c <= ' ' || c >= 0x7f || c == ',' || c == '=' || c == '%' || c == ';' || c == '"' || c == '\\' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// answerAt reads the value at a dotted path (a.b.0.c: object keys and
// array indexes) of a JSON document: a string as is, anything else as its
// JSON text.
func answerAt(doc []byte, path string) (string, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("not JSON: %w", err)
	}
	for _, part := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[part]
			if !ok {
				return "", fmt.Errorf("path %q: no key %q", path, part)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(x) {
				return "", fmt.Errorf("path %q: %q is not an index of an array of %d", path, part, len(x))
			}
			v = x[i]
		default:
			return "", fmt.Errorf("path %q: %q: not an object or array", path, part)
		}
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case nil:
		return "", fmt.Errorf("path %q: null", path)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return "", fmt.Errorf("path %q: %w", path, err)
		}
		return string(b), nil
	}
}
