package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// --cpu-profile writes a Go CPU profile (gzipped protobuf, what go tool
// pprof reads) when serve stops; a path that cannot be created is a usage
// error before serve starts anything.
func TestServeWritesItsCPUProfileWhenItStops(t *testing.T) {
	dir := t.TempDir()
	prof, ready := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "ready.json")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var stderr bytes.Buffer
	m := &Main{Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(string) string { return "" }}
	done := make(chan error, 1)
	go func() {
		done <- m.Run(ctx, []string{"serve", "--store", filepath.Join(dir, "traces.db"), "--grpc-addr", "127.0.0.1:0",
			"--http-addr", "off", "--ui-addr", "127.0.0.1:0", "--ready-file", ready, "--log-level", "warn", "--cpu-profile", prof})
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not ready within 30s; stderr: %s", stderr.String())
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v; stderr: %s", err, stderr.String())
	}
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("%s is %d bytes, not a gzipped profile", prof, len(b))
	}

	err = (&Main{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(string) string { return "" }}).Run(context.Background(),
		[]string{"serve", "--store", filepath.Join(dir, "traces2.db"), "--cpu-profile", filepath.Join(dir, "no", "such", "dir", "cpu.pprof")})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitUsage {
		t.Fatalf("an uncreatable --cpu-profile: %v, want a usage error", err)
	}
}
