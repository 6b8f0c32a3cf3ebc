package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/otelcol"
)

func TestFactoriesHoldExactlyTheComparedPipeline(t *testing.T) {
	f, err := factories()
	if err != nil {
		t.Fatal(err)
	}
	for kind, got := range map[string]int{"receivers": len(f.Receivers), "processors": len(f.Processors), "exporters": len(f.Exporters)} {
		if got != 1 {
			t.Errorf("%d %s, want 1", got, kind)
		}
	}
	for _, typ := range []struct {
		ok   bool
		name string
	}{
		{f.Receivers[component.MustNewType("otlp")] != nil, "otlp receiver"},
		{f.Processors[component.MustNewType("batch")] != nil, "batch processor"},
		{f.Exporters[component.MustNewType("clickhouse")] != nil, "clickhouse exporter"},
	} {
		if !typ.ok {
			t.Errorf("no %s", typ.name)
		}
	}
}

// The harness's configuration is one this collector accepts (validate
// resolves, unmarshals and validates it without starting anything).
func TestHarnessConfigValidates(t *testing.T) {
	if err := validate("testdata/config.yaml"); err != nil {
		t.Fatalf("validate testdata/config.yaml: %v", err)
	}
	// validate is not a no-op: a misspelt key fails.
	b, err := os.ReadFile("testdata/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "typo.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(b), "send_batch_size", "send_batch_sise", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := validate(bad); err == nil || !strings.Contains(err.Error(), "send_batch_sise") {
		t.Fatalf("validate with a typo: %v, want an error naming send_batch_sise", err)
	}
}

func validate(path string) error {
	set := otelcol.CollectorSettings{
		BuildInfo: component.NewDefaultBuildInfo(),
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
			DefaultScheme:     "file",
		}},
	}
	cmd := otelcol.NewCommand(set)
	cmd.SetArgs([]string{"validate", "--config", path})
	cmd.SilenceErrors = true
	return cmd.Execute()
}
