package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/testtier"
)

// syncBuffer is a bytes.Buffer a running serve writes to while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// takePort listens on a free loopback port for the test's duration and
// returns its address: a port some other program already holds.
func takePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// runServeFor runs serve with args and env until it returns or the timeout
// ends (then the test fails): a serve whose port is taken must not start.
func runServeFor(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, append([]string{"serve"}, args...)) }()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		cancel()
		<-done
		t.Fatalf("serve %v did not exit on a taken port; stdout:\n%s", args, out.String())
	}
	exitCode(err, &errb) // prints the message as the binary does
	return out.String(), errb.String(), err
}

func TestServeOnATakenPortExitsWithCode3NamingTheAddressAndHowToMoveIt(t *testing.T) {
	testtier.Slow(t)
	for _, tc := range []struct {
		name, flag, env, listener string
		viaEnv                    bool
	}{
		{name: "OTLP gRPC flag", flag: "--grpc-addr", env: "LOOMWORK_GRPC_ADDR", listener: "OTLP gRPC"},
		{name: "OTLP HTTP flag", flag: "--http-addr", env: "LOOMWORK_HTTP_ADDR", listener: "OTLP HTTP"},
		{name: "UI flag", flag: "--ui-addr", env: "LOOMWORK_UI_ADDR", listener: "UI"},
		{name: "OTLP HTTP environment variable", flag: "--http-addr", env: "LOOMWORK_HTTP_ADDR", listener: "OTLP HTTP", viaEnv: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			taken := takePort(t)
			dir := t.TempDir()
			ready := filepath.Join(dir, "ready.json")
			addrs := map[string]string{"--grpc-addr": "127.0.0.1:0", "--http-addr": "127.0.0.1:0", "--ui-addr": "127.0.0.1:0"}
			env := map[string]string{}
			if tc.viaEnv {
				delete(addrs, tc.flag)
				env[tc.env] = taken
			} else {
				addrs[tc.flag] = taken
			}
			args := []string{"--store", filepath.Join(dir, "traces.db"), "--ready-file", ready, "--log-level", "error"}
			for f, a := range addrs {
				args = append(args, f, a)
			}
			stdout, stderr, err := runServeFor(t, env, args...)

			var ee *ExitError
			if !errors.As(err, &ee) || ee.Code != ExitRuntimeErr {
				t.Fatalf("serve on taken %s: err %v, want exit code %d; stderr:\n%s", taken, err, ExitRuntimeErr, stderr)
			}
			if !errors.Is(err, syscall.EADDRINUSE) {
				t.Errorf("error %v does not unwrap to EADDRINUSE", err)
			}
			want := "loom-eval: serve: " + tc.listener + " address " + taken + " is in use (move it with " + tc.flag + " or " + tc.env + ")"
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
			if strings.Contains(stdout, "storing traces") {
				t.Errorf("serve reported ready although a port was taken:\n%s", stdout)
			}
			if _, err := os.Stat(ready); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("ready file after a failed start: %v", err)
			}
		})
	}
}

// startServe runs serve with a ready file until the test ends, and returns
// what the ready file says once it appears, the file's path, and a stop
// function (safe to call more than once) that ends serve and returns its
// error.
func startServe(t *testing.T, env map[string]string, args ...string) (ServeReady, string, func() error) {
	t.Helper()
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready.json")
	var errb syncBuffer
	m := &Main{Stdout: io.Discard, Stderr: &errb, Getenv: func(k string) string { return env[k] }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	args = append([]string{"serve", "--store", filepath.Join(dir, "traces.db"), "--ready-file", ready, "--log-level", "warn"}, args...)
	go func() { done <- m.Run(ctx, args) }()
	var (
		once    sync.Once
		stopErr error
	)
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				stopErr = errors.New("serve did not stop within 30 s of its context ending")
			}
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop serve: %v", err)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(ready)
		if err == nil {
			var r ServeReady
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatalf("ready file is not JSON: %v\n%s", err, b)
			}
			return r, ready, stop
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("serve exited before it was ready: %v; stderr:\n%s", err, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready file after 20 s; stderr:\n%s", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServeWithPortZeroWritesTheAddressesInUseToTheReadyFileAndTheyAnswer(t *testing.T) {
	r, readyPath, stop := startServe(t, nil, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--ui-addr", "127.0.0.1:0")
	port0 := regexp.MustCompile(`^127\.0\.0\.1:([1-9][0-9]*)$`)
	for name, a := range map[string]string{"grpc_addr": r.GRPCAddr, "http_addr": r.HTTPAddr, "ui_addr": r.UIAddr} {
		if !port0.MatchString(a) {
			t.Errorf("ready file %s = %q, want the bound 127.0.0.1:PORT", name, a)
		}
	}
	if r.PID != os.Getpid() || r.UIURL != "http://"+r.UIAddr || r.Store == "" {
		t.Errorf("ready file = %+v", r)
	}

	resp, err := http.Get("http://" + r.UIAddr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz on the ready file's UI address: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"status": "ok"`) || !strings.Contains(string(body), `"reachable": true`) {
		t.Errorf("GET /healthz = %d %q", resp.StatusCode, body)
	}
	for _, args := range [][]string{{"demo", "--endpoint", r.GRPCAddr, "--ui", r.UIURL}, {"demo", "--http", "--endpoint", r.HTTPAddr, "--ui", r.UIURL}} {
		var out, errb bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		if err := m.Run(context.Background(), append(args, "--timeout", "10s")); err != nil {
			t.Errorf("%v against the ready file's address: %v\n%s", args, err, errb.String())
		}
	}

	if err := stop(); err != nil {
		t.Fatalf("serve stopped with %v", err)
	}
	if _, err := os.Stat(readyPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ready file left after serve stopped: %v", err)
	}
}

func TestServeAndDemoTakeTheirAddressesFromTheEnvironment(t *testing.T) {
	// Free ports for the environment to name: take one each, then release it.
	var free []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		free = append(free, ln.Addr().String())
		ln.Close()
	}
	env := map[string]string{"LOOMWORK_GRPC_ADDR": free[0], "LOOMWORK_HTTP_ADDR": free[1], "LOOMWORK_UI_ADDR": free[2]}
	r, _, _ := startServe(t, env)
	if r.GRPCAddr != free[0] || r.HTTPAddr != free[1] || r.UIAddr != free[2] {
		t.Fatalf("serve listens on %s, %s, %s; the environment said %v", r.GRPCAddr, r.HTTPAddr, r.UIAddr, env)
	}
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}
	if err := m.Run(context.Background(), []string{"demo", "--timeout", "10s"}); err != nil {
		t.Fatalf("demo without --endpoint: %v\n%s", err, errb.String())
	}
	for _, want := range []string{"to " + free[0] + " over OTLP/gRPC", "http://" + free[2] + "/traces/", "http://" + free[2] + "/api/v1/traces/"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestServeHelpNamesTheAddressFlagsEnvironmentVariablesAndReadyFile(t *testing.T) {
	var errb bytes.Buffer
	m := &Main{Stdout: io.Discard, Stderr: &errb, Getenv: func(k string) string {
		return map[string]string{"LOOMWORK_UI_ADDR": "127.0.0.1:9999"}[k]
	}}
	err := m.Run(context.Background(), []string{"serve", "-h"})
	if code := exitCode(err, io.Discard); code != ExitOK {
		t.Fatalf("serve -h exit %d: %v", code, err)
	}
	help := errb.String()
	for _, want := range []string{"-grpc-addr", "$LOOMWORK_GRPC_ADDR", "-http-addr", "$LOOMWORK_HTTP_ADDR", "-ui-addr", "$LOOMWORK_UI_ADDR", `(default "127.0.0.1:9999")`, "-ready-file", "port 0 picks a free one"} {
		if !strings.Contains(help, want) {
			t.Errorf("serve -h lacks %q:\n%s", want, help)
		}
	}
}

// The tour's first command after make demo: serve finds its UI port held
// by the serve make demo left running (issue 40: "UI address
// 127.0.0.1:8080 is in use", exit 3, and nothing more). It still exits 3,
// and now says which process holds the port — by pid, make demo's by its
// pid file — and what to do: use that server, or make stop.
func TestServeNamesWhatHoldsItsPort(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the holder is read from /proc")
	}
	taken := takePort(t) // held by this process, as make demo's serve holds :8080
	t.Chdir(t.TempDir())
	args := []string{"--store", "traces.db", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--ui-addr", taken, "--log-level", "error"}
	_, stderr, err := runServeFor(t, nil, args...)
	if exitCodeOf(err) != ExitRuntimeErr || !strings.Contains(stderr, fmt.Sprintf("is in use (move it with --ui-addr or LOOMWORK_UI_ADDR): pid %d holds it (", os.Getpid())) {
		t.Errorf("another program on the port: exit %d, stderr:\n%s", exitCodeOf(err), stderr)
	}
	os.MkdirAll(".loomwork", 0o755)
	os.WriteFile(".loomwork/serve.pid", []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
	_, stderr, err = runServeFor(t, nil, args...)
	for _, want := range []string{fmt.Sprintf("pid %d holds it (", os.Getpid()), "the loom-eval serve that make demo left running", "use it as it is", "`make stop`"} {
		if exitCodeOf(err) != ExitRuntimeErr || !strings.Contains(stderr, want) {
			t.Errorf("make demo's serve on the port: exit %d, stderr lacks %q:\n%s", exitCodeOf(err), want, stderr)
		}
	}
}
