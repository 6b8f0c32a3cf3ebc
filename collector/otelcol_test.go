package collector_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/extension/memorylimiterextension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/collector/agenttrace"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
)

// docsCollectorYAML is the configuration docs/collector.md gives for the
// Loomwork exporter in a user's own Collector, pointed at path and addr.
func docsCollectorYAML(t *testing.T, storePath, grpcAddr string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "collector.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Using the exporter in your own Collector")
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(rest)
	if !ok || m == nil {
		t.Fatal("docs/collector.md has no yaml block under \"Using the exporter in your own Collector\"")
	}
	y := m[1]
	for old, repl := range map[string]string{
		"store: clickhouse://127.0.0.1:9000/loomwork": "store: " + storePath,
		"      grpc:\n":   "      grpc:\n        endpoint: " + grpcAddr + "\n",
		"      http:\n":   "      http:\n        endpoint: 127.0.0.1:0\n",
		"limit_mib: 1800": "limit_mib: 4000",
	} {
		if !strings.Contains(y, old) {
			t.Fatalf("docs/collector.md's Collector configuration has no %q: update this test with the doc", old)
		}
		y = strings.Replace(y, old, repl, 1)
	}
	return y
}

// TestExporterInAnOtelcolBuildStoresWhatServeStores builds a Collector the
// way docs/collector.md tells a user to — the core otlpreceiver with the
// memory limiter extension as middleware, the Loomwork exporter, the
// doc's own YAML — runs it, sends it OTLP, and sends the same requests to
// serve's Server: the two stores must hold the same spans. serve decodes
// protobuf with its own front and the Collector through pdata; both hand
// the spans to the same ingester code.
func TestExporterInAnOtelcolBuildStoresWhatServeStores(t *testing.T) {
	dir := t.TempDir()
	colStore := filepath.Join(dir, "otelcol.db")
	grpcAddr := freeAddr(t)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(docsCollectorYAML(t, colStore, grpcAddr)), 0o600); err != nil {
		t.Fatal(err)
	}
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otelcol-loomwork-test", Version: "test"},
		Factories: func() (otelcol.Factories, error) {
			var f otelcol.Factories
			var err error
			if f.Receivers, err = otelcol.MakeFactoryMap(otlpreceiver.NewFactory()); err != nil {
				return f, err
			}
			if f.Extensions, err = otelcol.MakeFactoryMap(memorylimiterextension.NewFactory()); err != nil {
				return f, err
			}
			if f.Exporters, err = otelcol.MakeFactoryMap(collector.NewFactory()); err != nil {
				return f, err
			}
			// The Collector's own telemetry, off: no logs, metrics or traces
			// of its own (the SDK-backed factory would pull cloud detectors
			// into the module for nothing this test looks at).
			f.Telemetry = telemetry.NewFactory(func() component.Config { return &struct{}{} })
			return f, nil
		},
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			URIs:              []string{"file:" + cfgPath},
			ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
			DefaultScheme:     "file",
		}},
		DisableGracefulShutdown: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- col.Run(context.Background()) }()
	t.Cleanup(func() {
		col.Shutdown()
		if err := <-ran; err != nil {
			t.Errorf("otelcol run: %v", err)
		}
	})

	serveStore := openSQLite(t)
	srv := startServer(t, serveStore, nil)

	gen := agenttrace.NewGenerator(11, runStart)
	var reqs []ptraceotlp.ExportRequest
	for range 3 {
		reqs = append(reqs, ptraceotlp.NewExportRequestFromTraces(gen.Batch(4, 12)))
	}
	colClient := ptraceotlp.NewGRPCClient(dialGRPC(t, grpcAddr))
	srvClient := ptraceotlp.NewGRPCClient(dialGRPC(t, srv.GRPCAddr()))
	for i, req := range reqs {
		var err error
		for range 200 { // the Collector starts its receiver asynchronously
			if _, err = colClient.Export(context.Background(), req); status.Code(err) != codes.Unavailable {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("request %d to the otelcol build: %v", i, err)
		}
		if _, err := srvClient.Export(context.Background(), req); err != nil {
			t.Fatalf("request %d to serve's Server: %v", i, err)
		}
	}
	col.Shutdown() // the exporter shuts down its store: the file is complete
	if err := <-ran; err != nil {
		t.Fatalf("otelcol run: %v", err)
	}
	ran <- nil // for the cleanup

	colRead, err := sqlite.Open(context.Background(), sqlite.Config{Path: colStore, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer colRead.Shutdown(context.Background())
	ctx := store.WithDefaultProject(context.Background())
	compared := 0
	for _, req := range reqs {
		rss := req.Traces().ResourceSpans()
		for i := range rss.Len() {
			sss := rss.At(i).ScopeSpans()
			for j := range sss.Len() {
				spans := sss.At(j).Spans()
				for k := range spans.Len() {
					if k > 0 && spans.At(k).TraceID() == spans.At(k-1).TraceID() {
						continue
					}
					tid := spans.At(k).TraceID().String()
					a, errA := serveStore.GetTrace(ctx, tid)
					b, errB := colRead.GetTrace(ctx, tid)
					if errA != nil || errB != nil {
						t.Fatalf("trace %s: serve %v, otelcol %v", tid, errA, errB)
					}
					sortSpans(a)
					sortSpans(b)
					if !reflect.DeepEqual(a, b) {
						t.Errorf("trace %s: serve stored %d spans, the otelcol build %d, and they differ", tid, len(a), len(b))
					}
					compared += len(a)
				}
			}
		}
	}
	if compared < 3*4*12 {
		t.Errorf("compared %d spans, want all %d sent", compared, 3*4*12)
	}
}
