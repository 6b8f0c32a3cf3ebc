package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/sandbox"
	"github.com/loomwork/loomwork/internal/testtier"
)

func TestParseByteSize(t *testing.T) {
	good := map[string]int64{"0": 0, "4096": 4096, "64KiB": 64 << 10, "256MiB": 256 << 20, "1GiB": 1 << 30, "2M": 2 << 20, "10 MB": 10 << 20, "7B": 7}
	for in, want := range good {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("%q: got %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "1.5GiB", "MiB", "12XB", "99999999999GiB"} {
		if _, err := parseByteSize(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestSandboxUsageErrors(t *testing.T) {
	var stderr bytes.Buffer
	m := &Main{Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(string) string { return "" }}
	for _, args := range [][]string{{}, {"run"}, {"exec"}, {"exec", "--memory", "lots", "--", "true"}, {"exec", "--cpu", "10ms", "--", "true"}} {
		err := m.runSandbox(context.Background(), args)
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != ExitUsage {
			t.Errorf("%v: want a usage error, got %v", args, err)
		}
	}
}

// TestRootSandboxExecCLI builds loom-eval and runs commands through it: the
// helper re-exec of the real binary, JSON and human output, exit codes.
func TestRootSandboxExecCLI(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // the built binary; sandboxed commands wait
	bin := buildLoomEval(t)

	run := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), code
	}

	stdout, stderr, code := run("sandbox", "exec", "--json", "--", "/usr/bin/python3", "-I", "-c",
		"import os; print(os.path.exists('/etc/passwd'), os.getuid())")
	if code != ExitOK {
		t.Fatalf("exit %d; stderr: %s", code, stderr)
	}
	var res sandbox.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("decode --json output: %v\n%s", err, stdout)
	}
	if res.Stdout != "False 1000\n" || res.Reason != sandbox.ReasonExit || res.Limits != sandbox.DefaultLimits() {
		t.Errorf("got stdout %q reason %s limits %+v", res.Stdout, res.Reason, res.Limits)
	}

	// A command the sandbox cannot start is bad input (exit 2), named.
	_, stderr, code = run("sandbox", "exec", "--", "/nonexistent")
	if code != ExitUsage || !strings.Contains(stderr, "start /nonexistent: no such file or directory") {
		t.Errorf("sandbox exec -- /nonexistent: exit %d, want %d; stderr: %s", code, ExitUsage, stderr)
	}

	stdout, _, code = run("sandbox", "exec", "--memory", "64MiB", "--", "/usr/bin/python3", "-I", "-c",
		"x = []\nwhile True: x.append(bytearray(1 << 20))")
	if code != ExitFailure || !strings.Contains(stdout, "reason: memory") || !strings.Contains(stdout, "oom_kill=") {
		t.Errorf("memory hog: exit %d, output:\n%s", code, stdout)
	}

	// --egress: an allowed address through the proxy, a refused one, both
	// listed; a credential whose variable is unset is a usage error.
	ln, err := net.Listen("tcp4", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello from upstream"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	policy := filepath.Join(t.TempDir(), "egress.json")
	os.WriteFile(policy, []byte(fmt.Sprintf(`{"allow":[{"cidr":"127.0.0.2/32","ports":[%d]}]}`, port)), 0o644)
	stdout, stderr, code = run("sandbox", "exec", "--egress", policy, "--", "/usr/bin/python3", "-I", "-c", fmt.Sprintf(`import socket
print(socket.create_connection(('127.0.0.2', %d), timeout=5).recv(100).decode())
try:
    socket.create_connection(('192.0.2.1', 443), timeout=5)
except OSError as e:
    print('refused', e.errno)`, port))
	if code != ExitOK || !strings.Contains(stdout, "hello from upstream\nrefused 113") ||
		!strings.Contains(stdout, fmt.Sprintf("allow tcp  127.0.0.2:%d: matches allow[0] 127.0.0.2/32 [proxy]", port)) ||
		!strings.Contains(stdout, "deny  tcp  192.0.2.1:443: tcp to 192.0.2.1:443: the address is in no allowed cidr") {
		t.Errorf("--egress: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	os.WriteFile(policy, []byte(fmt.Sprintf(`{"allow":[{"host":"api.test","ports":[%d]}],
		"credentials":[{"name":"t","host":"api.test","port":%d,"value_env":"LOOMWORK_TEST_UNSET_TOKEN"}]}`, port, port)), 0o644)
	_, stderr, code = run("sandbox", "exec", "--egress", policy, "--", "/usr/bin/true")
	if code != ExitUsage || !strings.Contains(stderr, "LOOMWORK_TEST_UNSET_TOKEN is empty or unset") {
		t.Errorf("unset credential variable: exit %d, stderr %s", code, stderr)
	}
}

// TestSandboxEgressCredentialsComeFromMainsEnvironment: --egress reads a
// credential's value_env through Main's environment, not the process's
// (which an embedding program or a test does not control).
func TestSandboxEgressCredentialsComeFromMainsEnvironment(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "egress.json")
	if err := os.WriteFile(policy, []byte(`{"allow":[{"host":"api.test","ports":[443]}],
		"credentials":[{"name":"t","host":"api.test","port":443,"value_env":"LOOMWORK_TEST_EGRESS_TOKEN"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LOOMWORK_TEST_EGRESS_TOKEN", "from-the-process")

	env := map[string]string{"LOOMWORK_TEST_EGRESS_TOKEN": "from-main"}
	m := &Main{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(k string) string { return env[k] }}
	e, err := loadEgress(policy, m.getenv)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(e.Credentials[0].Value); got != "from-main" {
		t.Errorf("credential value %q, want Main's %q", got, "from-main")
	}

	// Main's environment lacks it: the process's value is not used.
	var stderr bytes.Buffer
	m = &Main{Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(string) string { return "" }}
	err = m.runSandbox(context.Background(), []string{"exec", "--egress", policy, "--", "/usr/bin/true"})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitUsage || !strings.Contains(err.Error(), "LOOMWORK_TEST_EGRESS_TOKEN is empty or unset") {
		t.Errorf("sandbox exec with the variable only in the process's environment: %v, want a usage error naming it", err)
	}
}

// failingReader fails every read.
type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("stdin went away") }

func TestSandboxStdinReadErrorSaysSandboxExec(t *testing.T) {
	_, err := sandboxStdin(failingReader{}, "-")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitRuntimeErr || !strings.HasPrefix(ee.Err.Error(), "sandbox exec: --stdin -: read stdin: stdin went away") {
		t.Errorf("stdin read error: %v", err)
	}
}
