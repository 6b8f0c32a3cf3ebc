// Command peercollector is the peer that issue 17 measures Loomwork's
// ingest against: the standard OpenTelemetry Collector (core v0.165.0 /
// v1.71.0) with the core OTLP receiver, the core batch processor and the
// contrib ClickHouse exporter (v0.165.1), and nothing else.
//
// It is a module of its own so that the main module never gains the
// contrib dependencies; the throughput harness (scripts/throughput) builds
// it and runs it with a configuration file it writes per run. It is built
// the way the Collector documentation describes a custom distribution
// without ocb: a factories function handed to otelcol.NewCommand.
//
//	cd scripts/peercollector && go build -o /tmp/peercollector .
//	/tmp/peercollector --config /path/to/config.yaml
package main

import (
	"fmt"
	"os"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/clickhouseexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor/batchprocessor"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func main() {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "peercollector",
			Description: "OTel Collector (otlp receiver, batch processor, contrib clickhouse exporter) for Loomwork's throughput comparison",
			Version:     "0.165.1",
		},
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
				DefaultScheme:     "file",
			},
		},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "peercollector: %v\n", err)
		os.Exit(1)
	}
}

// factories lists the only components this collector has.
func factories() (otelcol.Factories, error) {
	var f otelcol.Factories
	var err error
	if f.Receivers, err = otelcol.MakeFactoryMap(otlpreceiver.NewFactory()); err != nil {
		return f, fmt.Errorf("receivers: %w", err)
	}
	if f.Processors, err = otelcol.MakeFactoryMap(batchprocessor.NewFactory()); err != nil {
		return f, fmt.Errorf("processors: %w", err)
	}
	if f.Exporters, err = otelcol.MakeFactoryMap(clickhouseexporter.NewFactory()); err != nil {
		return f, fmt.Errorf("exporters: %w", err)
	}
	// The service's own telemetry (logs; metrics are turned off in the
	// harness's configuration so no :8888 listener competes for a port).
	f.Telemetry = otelconftelemetry.NewFactory()
	return f, nil
}
