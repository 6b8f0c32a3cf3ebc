package chlocal_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/internal/testtier"
)

// freePorts returns n loopback ports no one listens on right now.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
		defer ln.Close()
	}
	return ports
}

// scripts/clickhouse.sh start runs the server with a loom-eval built from
// the current sources when there is one (make install's on the PATH),
// rather than compiling loom-eval again — issue 40 measured 113 s for a
// start that was mostly that build — and on the ports asked for.
func TestClickHouseScriptStartsWithACurrentLoomEvalOnTheGivenPorts(t *testing.T) {
	testtier.Slow(t) // a ClickHouse server
	command, lib := launcher(t)
	// A loom-eval on the PATH whose clickhouse-local is the launcher, built
	// just now: newer than every source file.
	bin := t.TempDir()
	fake := fmt.Sprintf("#!/bin/sh\n[ \"$1\" = clickhouse-local ] || exit 2\nshift\n[ \"$1\" = -h ] && exit 0\nexec %s \"$@\"\n", command[0])
	if err := os.WriteFile(filepath.Join(bin, "loom-eval"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 2)
	dir := filepath.Join(t.TempDir(), "ch")
	script := filepath.Join("..", "..", "scripts", "clickhouse.sh")
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "LOOM_EVAL=", "LOOMWORK_CACHE="+filepath.Dir(filepath.Dir(filepath.Dir(lib))))
	cmd := exec.Command(script, "start", "--tcp-port", fmt.Sprint(ports[0]), "--http-port", fmt.Sprint(ports[1]), dir)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Cleanup(func() {
		stop := exec.Command(script, "stop", dir)
		stop.Env = env
		if out, err := stop.CombinedOutput(); err != nil {
			t.Errorf("clickhouse.sh stop: %v\n%s", err, out)
		}
	})
	if err != nil {
		t.Fatalf("clickhouse.sh start: %v\n%s", err, stderr.String())
	}
	if want := "using " + filepath.Join(bin, "loom-eval") + " clickhouse-local"; !strings.Contains(stderr.String(), want) || strings.Contains(stderr.String(), "building") {
		t.Errorf("stderr lacks %q (or built something):\n%s", want, stderr.String())
	}
	if want := fmt.Sprintf("LOOMWORK_CLICKHOUSE_DSN=clickhouse://127.0.0.1:%d/default\nLOOMWORK_CLICKHOUSE_HTTP=http://127.0.0.1:%d\n", ports[0], ports[1]); !strings.HasPrefix(stdout.String(), want) {
		t.Errorf("stdout = %q, want it to start %q", stdout.String(), want)
	}
}
