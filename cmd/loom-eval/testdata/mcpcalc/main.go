// Command mcpcalc is a stdio MCP server outside Loomwork for the
// experiment tests (the official MCP Go SDK and the OpenTelemetry Go SDK,
// no Loomwork package): its tool "add" answers {"question": "add A and
// B"} with the sum, in a span under the caller's TRACEPARENT exported as
// the standard OTEL_* environment says.
//
// --v2 is a regression (even sums come out one too high). --env-file F
// appends, per call, the names of the variables it was started with and
// the traceparent the call's _meta carried, one JSON line.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

var addRe = regexp.MustCompile(`add (\d+) and (\d+)`)

func main() {
	v2 := flag.Bool("v2", false, "the regression: even sums one too high")
	envFile := flag.String("env-file", "", "append each call's environment names and _meta traceparent here")
	flag.Parse()
	if err := run(*v2, *envFile); err != nil {
		fmt.Fprintln(os.Stderr, "mcpcalc:", err)
		os.Exit(1)
	}
}

func run(v2 bool, envFile string) error {
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	defer tp.Shutdown(ctx)
	parent := propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": os.Getenv("TRACEPARENT")})
	tracer := tp.Tracer("mcpcalc")

	type in struct {
		Question string `json:"question"`
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpcalc", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "adds two numbers: 'add A and B'"},
		func(_ context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			_, span := tracer.Start(parent, "execute_tool add")
			defer span.End()
			if envFile != "" {
				if err := record(envFile, req.Params.Meta); err != nil {
					return nil, nil, err
				}
			}
			m := addRe.FindStringSubmatch(a.Question)
			if m == nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "not an addition: " + a.Question}}}, nil, nil
			}
			x, _ := strconv.Atoi(m[1])
			y, _ := strconv.Atoi(m[2])
			sum := x + y
			if v2 && sum%2 == 0 {
				sum++
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(sum)}}}, nil, nil
		})
	return srv.Run(ctx, &mcp.StdioTransport{})
}

func record(path string, meta mcp.Meta) error {
	var names []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	sort.Strings(names)
	tp, _ := meta["traceparent"].(string)
	b, _ := json.Marshal(map[string]any{"env": names, "traceparent": os.Getenv("TRACEPARENT"), "meta_traceparent": tp})
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(append(b, '\n'))
	return err
}
