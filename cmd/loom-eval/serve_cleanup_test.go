package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// freeAddrs returns n loopback addresses that were free a moment ago.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ln.Addr().String())
		ln.Close()
	}
	return out
}

// assertServeReleased fails t when a goroutine started since ignore was
// taken is still running, or when one of addrs cannot be bound again.
func assertServeReleased(t *testing.T, ignore goleak.Option, addrs ...string) {
	t.Helper()
	goleak.VerifyNone(t, ignore)
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("%s is still held: %v", a, err)
			continue
		}
		ln.Close()
	}
}

// TestServeFailedStartReleasesEverythingItAcquired starts serve up to each
// failure that flags can cause, at each step of its start. Whatever it
// acquired before the failure (the UI's listener, the store, the
// collector and its listeners, the retention job, the approvals journal,
// the UI server) is released: no goroutine is left and every listen
// address can be bound again; the error names the part that failed.
// (The approvals journal left the collector and the store running; a
// retention job that failed to start left the UI's listener open.)
func TestServeFailedStartReleasesEverythingItAcquired(t *testing.T) {
	for _, tc := range []struct {
		name string
		// args are the flags that make the step fail; dir is the test's
		// folder (a regular file named "file" is in it), taken a port
		// some other program holds.
		args func(dir, taken string) []string
		// taken is the listener given the taken port, if any.
		taken string
		want  string // in the error
		code  int
	}{
		{name: "UI address in use", taken: "--ui-addr",
			args: func(string, string) []string { return nil },
			want: "UI address {taken} is in use (move it with --ui-addr", code: ExitRuntimeErr},
		{name: "store cannot open",
			args: func(dir, _ string) []string { return []string{"--store", filepath.Join(dir, "file", "traces.db")} },
			want: "serve: --store: open trace store {dir}/file/traces.db", code: ExitRuntimeErr},
		{name: "OTLP HTTP address in use", taken: "--http-addr",
			args: func(string, string) []string { return nil },
			want: "OTLP HTTP address {taken} is in use (move it with --http-addr", code: ExitRuntimeErr},
		{name: "retention job cannot start",
			args: func(dir, _ string) []string {
				return []string{"--keys", filepath.Join(dir, "keys.json"), "--retention-interval", "-1s"}
			},
			want: "serve: --retention-interval: retention: interval must not be negative", code: ExitUsage},
		{name: "approvals journal cannot open",
			args: func(dir, _ string) []string {
				return []string{"--approvals-journal", filepath.Join(dir, "file", "approvals.db")}
			},
			want: "serve: --approvals-journal {dir}/file/approvals.db", code: ExitRuntimeErr},
		{name: "ready file cannot be written",
			args: func(dir, _ string) []string {
				return []string{"--ready-file", filepath.Join(dir, "missing", "ready.json")}
			},
			want: "serve: --ready-file", code: ExitRuntimeErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			free := freeAddrs(t, 3)
			addrs := map[string]string{"--grpc-addr": free[0], "--http-addr": free[1], "--ui-addr": free[2]}
			taken := ""
			if tc.taken != "" {
				taken = takePort(t)
				addrs[tc.taken] = taken
			}
			args := []string{"--store", filepath.Join(dir, "traces.db"), "--log-level", "error"}
			var check []string
			for _, f := range []string{"--grpc-addr", "--http-addr", "--ui-addr"} {
				args = append(args, f, addrs[f])
				if f != tc.taken {
					check = append(check, addrs[f])
				}
			}
			args = append(args, tc.args(dir, taken)...)

			ignore := goleak.IgnoreCurrent()
			stdout, stderr, err := runServeFor(t, nil, args...)
			if code := exitCode(err, &strings.Builder{}); code != tc.code {
				t.Errorf("exit code %d, want %d (%v)", code, tc.code, err)
			}
			want := strings.NewReplacer("{dir}", dir, "{taken}", taken).Replace(tc.want)
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
			if strings.Contains(stdout, "storing traces") {
				t.Errorf("serve said it was serving:\n%s", stdout)
			}
			assertServeReleased(t, ignore, check...)
		})
	}
}

// TestServeShutdownReleasesEverything: serve with every part (the UI, the
// keys' retention job, an approvals journal, a ready file) stops leaving
// no goroutine and every address free.
func TestServeShutdownReleasesEverything(t *testing.T) {
	dir := t.TempDir()
	// Ports the kernel picks (":0"), read back from the ready file: an
	// address picked free beforehand can be taken by another test's
	// server before serve binds it.
	ignore := goleak.IgnoreCurrent()
	info, ready, stop := startServe(t, nil, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--ui-addr", "127.0.0.1:0",
		"--keys", filepath.Join(dir, "keys.json"), "--approvals-journal", filepath.Join(dir, "approvals.db"))
	if err := stop(); err != nil {
		t.Fatalf("serve stopped with %v", err)
	}
	if _, err := os.Stat(ready); !os.IsNotExist(err) {
		t.Errorf("ready file after serve stopped: %v", err)
	}
	assertServeReleased(t, ignore, info.GRPCAddr, info.HTTPAddr, info.UIAddr)
}
