// Command expagent is a tiny agent outside Loomwork for the experiment
// tests: it imports no Loomwork package, configures the OpenTelemetry Go
// SDK only through the standard environment (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES)
// and joins the caller's trace with the one line of context extraction the
// Go SDK needs (it does not read TRACEPARENT by itself). It reads the task
// on stdin, asks the model at $EXPAGENT_MODEL_URL (an OpenAI-compatible
// endpoint; in the tests a scripted fake) and prints the answer.
//
// Version 2 (EXPAGENT_VERSION=2) has a bug: it adds 1 to even answers.
// EXPAGENT_NO_EXTRACT=1 skips the extraction (the agent's spans then form
// their own trace, tagged only by OTEL_RESOURCE_ATTRIBUTES).
// EXPAGENT_COUNT_FILE gets one line per invocation; EXPAGENT_SLEEP delays
// the answer (a Go duration).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "expagent:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	if f := os.Getenv("EXPAGENT_COUNT_FILE"); f != "" {
		fh, err := os.OpenFile(f, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintf(fh, "%s\n", os.Getenv("OTEL_RESOURCE_ATTRIBUTES"))
		fh.Close()
	}
	exp, err := otlptracehttp.New(ctx) // endpoint and protocol from the environment
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp)) // resource from OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES
	defer tp.Shutdown(ctx)
	if os.Getenv("EXPAGENT_NO_EXTRACT") != "1" {
		// The one line: join the trace the caller started.
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": os.Getenv("TRACEPARENT")})
	}
	tr := tp.Tracer("expagent")
	task, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	ctx, root := tr.Start(ctx, "invoke_agent expagent", trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", "expagent")))
	answer, err := ask(ctx, tr, strings.TrimSpace(string(task)))
	if err != nil {
		root.End()
		return err
	}
	if os.Getenv("EXPAGENT_VERSION") == "2" {
		if n, err := strconv.Atoi(answer); err == nil && n%2 == 0 {
			answer = strconv.Itoa(n + 1) // the regression
		}
	}
	if d, err := time.ParseDuration(os.Getenv("EXPAGENT_SLEEP")); err == nil {
		time.Sleep(d)
	}
	root.End()
	fmt.Println(answer)
	return nil
}

// ask is one chat call, traced with the GenAI convention's keys.
func ask(ctx context.Context, tr trace.Tracer, task string) (string, error) {
	_, span := tr.Start(ctx, "chat fake-calc", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.request.model", "fake-calc"),
		attribute.String("gen_ai.provider.name", "openai"),
		attribute.String("loomwork.model.label", "scripted"))) // the fake model says so
	defer span.End()
	body, _ := json.Marshal(map[string]any{"model": "fake-calc", "messages": []map[string]string{{"role": "user", "content": task}}})
	resp, err := http.Post(os.Getenv("EXPAGENT_MODEL_URL")+"/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			Prompt     int64 `json:"prompt_tokens"`
			Completion int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) == 0 {
		return "", fmt.Errorf("model: status %d: %v", resp.StatusCode, err)
	}
	span.SetAttributes(attribute.String("gen_ai.response.model", out.Model),
		attribute.Int64("gen_ai.usage.input_tokens", out.Usage.Prompt), attribute.Int64("gen_ai.usage.output_tokens", out.Usage.Completion))
	return out.Choices[0].Message.Content, nil
}
