//go:build tools

// Package tools pins modules that the project depends on before every
// package that uses them exists, and build tools (templ) for `go run`.
package tools

import (
	_ "github.com/ClickHouse/clickhouse-go/v2"
	_ "github.com/a-h/templ"
	_ "github.com/blevesearch/bleve/v2"
	_ "github.com/chromedp/chromedp"
	_ "github.com/ebitengine/purego"
	_ "github.com/elastic/go-seccomp-bpf"
	_ "go.opentelemetry.io/collector/extension/memorylimiterextension"
	_ "go.opentelemetry.io/collector/otelcol"
	_ "go.opentelemetry.io/collector/receiver/otlpreceiver"
	_ "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	_ "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	_ "go.opentelemetry.io/otel/sdk/trace"
	_ "go.uber.org/goleak"
	_ "gonum.org/v1/gonum/mat"
	_ "modernc.org/sqlite"
)
