package main

import (
	"io"
	"log/slog"
	"runtime/debug"
	"testing"

	"github.com/loomwork/loomwork/collector"
)

// serve sets its GC target (collector.DefaultGCPercent) unless an
// operator's GOGC or
// --gc-percent wins, and --memory-limit-mib puts the runtime's soft limit
// below the memory limiter's refusal point unless GOMEMLIMIT is set.
func TestServeGCTargetPrefersFlagThenGOGCThenDefault(t *testing.T) {
	prevPercent := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(prevPercent)
		debug.SetMemoryLimit(prevLimit)
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	current := func() int {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}

	for _, tc := range []struct {
		name   string
		env    map[string]string
		flag   int
		want   int
		before int
	}{
		{"default", nil, 0, collector.DefaultGCPercent, collector.DefaultGCPercent / 2},
		{"GOGC set: the runtime's value stays", map[string]string{"GOGC": "150"}, 0, 150, 150},
		{"flag wins over GOGC", map[string]string{"GOGC": "150"}, 250, 250, 150},
	} {
		debug.SetGCPercent(tc.before)
		tuneGC(env(tc.env), tc.flag, 0, log)
		if got := current(); got != tc.want {
			t.Errorf("%s: GC percent %d, want %d", tc.name, got, tc.want)
		}
	}

	debug.SetMemoryLimit(prevLimit)
	tuneGC(env(nil), 0, 1000, log)
	if got, want := debug.SetMemoryLimit(-1), int64(1000)<<20*6/10; got != want {
		t.Errorf("--memory-limit-mib 1000: soft memory limit %d, want %d (60%%, below the limiter's 70%% refusal point)", got, want)
	}
	debug.SetMemoryLimit(prevLimit)
	tuneGC(env(map[string]string{"GOMEMLIMIT": "2GiB"}), 0, 1000, log)
	if got := debug.SetMemoryLimit(-1); got != prevLimit {
		t.Errorf("with GOMEMLIMIT set, serve changed the soft memory limit to %d", got)
	}
}

// The spool is for ClickHouse only, on by default there, and "off" turns
// it off; the embedded store always writes directly.
func TestServeSpoolsOnlyForClickHouse(t *testing.T) {
	for _, tc := range []struct{ backend, flag, want string }{
		{"sqlite", "", ""},
		{"sqlite", "/var/spool/x", ""},
		{"clickhouse", "", defaultSpoolDir},
		{"clickhouse", " off ", ""},
		{"clickhouse", "/var/spool/x", "/var/spool/x"},
	} {
		if got := spoolFor(tc.backend, tc.flag); got != tc.want {
			t.Errorf("spoolFor(%q, %q) = %q, want %q", tc.backend, tc.flag, got, tc.want)
		}
	}
}
