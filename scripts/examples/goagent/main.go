// Command goagent is an example agent evaluated by `loom-eval experiment
// run` (docs/experiments.md, "Evaluate your agent"). It is a module of its
// own and knows nothing of Loomwork: the OpenTelemetry Go SDK configured
// only by the standard OTEL_* environment, and the one line that joins
// the caller's trace (TRACEPARENT, or the traceparent header when served).
//
// As a command it reads the task on stdin, asks the model at
// $AGENT_MODEL_URL (an OpenAI-compatible base URL, …/v1) and prints the
// answer. With --serve ADDR it is an HTTP agent instead: POST /ask
// {"question": "..."} answers {"answer": "..."}.
//
// AGENT_VERSION=2 is a regression: even sums come out one too high.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func main() {
	serve := flag.String("serve", "", "serve POST /ask on this address instead of answering stdin")
	flag.Parse()
	if err := run(*serve); err != nil {
		fmt.Fprintln(os.Stderr, "goagent:", err)
		os.Exit(1)
	}
}

func run(serve string) error {
	ctx := context.Background()
	// docs:begin go-setup
	// The exporter reads OTEL_EXPORTER_OTLP_ENDPOINT; the resource reads
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	defer tp.Shutdown(ctx) // flushes the spans before the process exits
	tracer := tp.Tracer("goagent")
	// Join the trial's trace: the SDK does not read TRACEPARENT by itself.
	ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": os.Getenv("TRACEPARENT")})
	// docs:end go-setup
	if serve != "" {
		return serveHTTP(serve, tracer)
	}
	task, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	answer, err := invoke(ctx, tracer, strings.TrimSpace(string(task)))
	if err != nil {
		return err
	}
	fmt.Println(answer)
	return nil
}

// serveHTTP answers POST /ask until SIGINT or SIGTERM.
func serveHTTP(addr string, tracer trace.Tracer) error {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /ask", func(w http.ResponseWriter, r *http.Request) {
		// docs:begin go-http
		// An HTTP agent joins the caller's trace from the request's headers.
		ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		// docs:end go-http
		var in struct {
			Question string `json:"question"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, "want {\"question\": \"...\"}", http.StatusBadRequest)
			return
		}
		answer, err := invoke(ctx, tracer, in.Question)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"answer": answer})
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: mux}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		<-sig
		srv.Shutdown(context.Background())
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// invoke is the agent: one model call, in an invoke_agent span.
func invoke(ctx context.Context, tracer trace.Tracer, task string) (string, error) {
	ctx, span := tracer.Start(ctx, "invoke_agent goagent", trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", "goagent")))
	defer span.End()
	answer, err := chat(ctx, tracer, task)
	if err != nil {
		return "", err
	}
	if os.Getenv("AGENT_VERSION") == "2" {
		if n, err := strconv.Atoi(answer); err == nil && n%2 == 0 {
			answer = strconv.Itoa(n + 1) // the regression
		}
	}
	return answer, nil
}

// chat is one chat-completions call, traced with the GenAI conventions.
func chat(ctx context.Context, tracer trace.Tracer, task string) (string, error) {
	_, span := tracer.Start(ctx, "chat fake-calc", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.request.model", "fake-calc"),
		attribute.String("gen_ai.provider.name", "openai")))
	defer span.End()
	body, _ := json.Marshal(map[string]any{"model": "fake-calc", "messages": []map[string]string{{"role": "user", "content": task}}})
	resp, err := http.Post(os.Getenv("AGENT_MODEL_URL")+"/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("model: %w", err)
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
		return "", fmt.Errorf("model: HTTP %d: %v", resp.StatusCode, err)
	}
	span.SetAttributes(attribute.String("gen_ai.response.model", out.Model),
		attribute.Int64("gen_ai.usage.input_tokens", out.Usage.Prompt), attribute.Int64("gen_ai.usage.output_tokens", out.Usage.Completion))
	return out.Choices[0].Message.Content, nil
}
