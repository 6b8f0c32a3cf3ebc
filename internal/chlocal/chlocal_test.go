package chlocal_test

import (
	"context"
	"errors"
	"github.com/loomwork/loomwork/internal/testtier"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/loomwork/loomwork/internal/chlocal"
	"github.com/loomwork/loomwork/internal/chlocal/chtest"
)

func TestParsePortsAcceptsOnlyACompleteLine(t *testing.T) {
	for _, tc := range []struct {
		in        string
		tcp, http int
		ok        bool
	}{
		{"9000\t8123\n", 9000, 8123, true},
		{"9000\t8123", 0, 0, false}, // not yet complete
		{"", 0, 0, false},
		{"9000\n", 0, 0, false},
		{"0\t8123\n", 0, 0, false},
		{"9000\t70000\n", 0, 0, false},
		{"x\ty\n", 0, 0, false},
	} {
		tcp, http, ok := chlocal.ParsePorts(tc.in)
		if tcp != tc.tcp || http != tc.http || ok != tc.ok {
			t.Errorf("ParsePorts(%q) = %d, %d, %v; want %d, %d, %v", tc.in, tcp, http, ok, tc.tcp, tc.http, tc.ok)
		}
	}
}

func TestConfigValidateNamesEveryMissingSetting(t *testing.T) {
	err := chlocal.Config{}.Validate()
	if err == nil {
		t.Fatal("empty config validated")
	}
	for _, want := range []string{"lib:", "path:", "ports-file:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestServerRunReportsAMissingLibrary(t *testing.T) {
	dir := t.TempDir()
	srv, err := chlocal.NewServer(chlocal.Config{
		LibPath:   filepath.Join(dir, "nope", "libchdb.so"),
		DataDir:   filepath.Join(dir, "data"),
		PortsFile: filepath.Join(dir, "ports"),
	})
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "scripts/clickhouse.sh fetch") {
		t.Fatalf("Run with a missing library: %v; want an error naming the fetch command", err)
	}
}

func TestDefaultLibPathFollowsTheCacheVariables(t *testing.T) {
	env := map[string]string{"HOME": "/home/u"}
	got := chlocal.DefaultLibPath(func(k string) string { return env[k] })
	if want := "/home/u/.cache/loomwork/chdb/" + chlocal.Version + "/libchdb.so"; got != want {
		t.Errorf("DefaultLibPath = %s, want %s", got, want)
	}
	env["LOOMWORK_CACHE"] = "/c"
	got = chlocal.DefaultLibPath(func(k string) string { return env[k] })
	if want := "/c/chdb/" + chlocal.Version + "/libchdb.so"; got != want {
		t.Errorf("DefaultLibPath = %s, want %s", got, want)
	}
}

// launcher returns the launcher command, skipping (or failing in CI) when
// libchdb is not cached.
func launcher(t *testing.T) (command []string, lib string) {
	t.Helper()
	lib = chlocal.DefaultLibPath(os.Getenv)
	if _, err := os.Stat(lib); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("libchdb not cached at %s (run scripts/clickhouse.sh fetch)", lib)
		}
		t.Skipf("libchdb not cached at %s; run scripts/clickhouse.sh fetch", lib)
	}
	bin := filepath.Join(t.TempDir(), "launcher")
	cmd := exec.Command("go", "build", "-o", bin, "./launcher")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build launcher: %v\n%s", err, out)
	}
	return []string{bin}, lib
}

func query(t *testing.T, p *chlocal.Process, q string) uint64 {
	t.Helper()
	opts, err := clickhouse.ParseDSN(p.DSN("default"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n uint64
	if err := conn.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func exec1(t *testing.T, p *chlocal.Process, q string) {
	t.Helper()
	opts, _ := clickhouse.ParseDSN(p.DSN("default"))
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Exec(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// listeners returns the local addresses (hex, as /proc/net/tcp{,6} writes
// them) of sockets listening on port. Reading the kernel's table proves
// what the server bound without sending traffic to any non-loopback address.
func listeners(t *testing.T, port int) []string {
	t.Helper()
	var out []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 4 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			host, portHex, ok := strings.Cut(fields[1], ":")
			if !ok {
				continue
			}
			if n, err := strconv.ParseInt(portHex, 16, 32); err == nil && int(n) == port {
				out = append(out, host)
			}
		}
	}
	return out
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestProcessServesOnLoopbackKeepsDataAcrossRestartAndStopsByPid(t *testing.T) {
	testtier.Slow(t)
	command, lib := launcher(t)
	dir := t.TempDir()
	ctx := context.Background()
	start := func() *chlocal.Process {
		p, err := chlocal.StartProcess(ctx, chlocal.ProcessConfig{Command: command, LibPath: lib, Dir: dir, ExitWithParent: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Stop(ctx) })
		return p
	}
	p := start()
	if !strings.HasPrefix(p.DSN("x"), "clickhouse://127.0.0.1:") {
		t.Errorf("DSN %s is not on 127.0.0.1", p.DSN("x"))
	}
	if v := query(t, p, "SELECT toUInt64(splitByChar('.', version())[1])"); v != 26 {
		t.Errorf("server major version %d, want 26", v)
	}
	// The server has no password: it must listen on 127.0.0.1 only, never
	// on a wildcard or another address of this machine.
	for _, port := range []int{p.TCPPort, p.HTTPPort} {
		ls := listeners(t, port)
		if len(ls) == 0 {
			t.Errorf("no listener on port %d in /proc/net/tcp", port)
		}
		for _, h := range ls {
			if h != "0100007F" { // 127.0.0.1, little-endian hex
				t.Errorf("port %d listens on %s, want 127.0.0.1 only", port, h)
			}
		}
	}
	exec1(t, p, "CREATE TABLE default.kept (x UInt64) ENGINE = MergeTree ORDER BY x")
	exec1(t, p, "INSERT INTO default.kept SELECT number FROM numbers(1000)")

	pid := p.Pid()
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("pid %d still alive after Stop", pid)
	}
	if _, err := os.Stat(filepath.Join(dir, "clickhouse.ports")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ports file left behind after a clean stop: %v", err)
	}

	p = start()
	if n := query(t, p, "SELECT count() FROM default.kept"); n != 1000 {
		t.Errorf("after restart the table has %d rows, want 1000", n)
	}
}

func TestProcessStopsWhenItsParentIsGone(t *testing.T) {
	testtier.Slow(t)
	command, lib := launcher(t)
	// --parent-pid 1 names a process that is not the launcher's parent, which
	// is what the launcher sees once its real parent died.
	p, err := chlocal.StartProcess(context.Background(), chlocal.ProcessConfig{
		Command: append(command, "--parent-pid", "1"), LibPath: lib, Dir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		b, _ := os.ReadFile(p.LogPath())
		if strings.Contains(string(b), "parent process is gone") && strings.Contains(string(b), "ClickHouse stopped") {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := os.ReadFile(p.LogPath())
	t.Fatalf("launcher with a dead parent did not stop; log:\n%s", b)
}

func TestStartProcessReportsTheLogWhenTheLauncherFails(t *testing.T) {
	testtier.Slow(t)
	command, _ := launcher(t)
	_, err := chlocal.StartProcess(context.Background(), chlocal.ProcessConfig{
		Command: command, LibPath: filepath.Join(t.TempDir(), "missing.so"), Dir: t.TempDir(),
	})
	if err == nil {
		t.Fatal("StartProcess with a missing library succeeded")
	}
	if !strings.Contains(err.Error(), "exited during start-up") || !strings.Contains(err.Error(), "missing.so") {
		t.Errorf("error %q should say the launcher exited and quote its log", err)
	}
}

func TestTwoTestDatabasesDoNotShareTables(t *testing.T) {
	testtier.Slow(t)
	srv := chtest.Start(t)
	a, b := srv.NewDatabase(t), srv.NewDatabase(t)
	if a == b {
		t.Fatalf("NewDatabase returned %s twice", a)
	}
	opts, err := clickhouse.ParseDSN(srv.DSN(a))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	if err := conn.Exec(ctx, "CREATE TABLE "+a+".only_a (x UInt8) ENGINE = Memory"); err != nil {
		t.Fatal(err)
	}
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = 'only_a'", b).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("table created in %s is visible in %s", a, b)
	}
}

func TestConfigValidateRejectsPortsOutOfRange(t *testing.T) {
	base := chlocal.Config{LibPath: "x", DataDir: "d", PortsFile: "p"}
	if err := base.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	bad := base
	bad.TCPPort, bad.HTTPPort = -1, 70000
	err := bad.Validate()
	if err == nil || !strings.Contains(err.Error(), "tcp port: -1") || !strings.Contains(err.Error(), "http port: 70000") {
		t.Errorf("Validate with ports -1 and 70000: %v", err)
	}
}
