// Package chtest gives tests a real ClickHouse and a fresh database in it.
//
// Start uses the server named by LOOMWORK_CLICKHOUSE_DSN (CI starts one with
// scripts/clickhouse.sh start); when that is unset and libchdb.so is cached
// (scripts/clickhouse.sh fetch), it starts a private server as a child
// process for the calling test and stops it by pid when the test ends. With
// neither, the test is skipped with a message naming the command to run —
// except under CI (the CI environment variable set), where it fails: no CI
// run silently skips the ClickHouse backend.
//
// Every NewDatabase call creates a uniquely named database, so tests sharing
// one server never see each other's data.
package chtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/loomwork/loomwork/internal/chlocal"
	"github.com/loomwork/loomwork/internal/testtier"
)

// EnvDSN names the environment variable holding the DSN of a running
// ClickHouse (the `default` database is fine: tests create their own).
const EnvDSN = "LOOMWORK_CLICKHOUSE_DSN"

// Server is a ClickHouse a test can use.
type Server struct {
	base *url.URL
	// Process is the private server when Start started one, else nil.
	Process *chlocal.Process
}

// Start returns a ClickHouse for t and everything t runs (subtests
// included); a private server is stopped when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		u, err := parseDSN(dsn)
		if err != nil {
			t.Fatalf("%s: %v", EnvDSN, err)
		}
		return &Server{base: u}
	}
	lib := chlocal.DefaultLibPath(os.Getenv)
	if _, err := os.Stat(lib); err != nil {
		msg := fmt.Sprintf("no ClickHouse: %s is unset and libchdb is not cached at %s; run scripts/clickhouse.sh fetch (and optionally: eval \"$(scripts/clickhouse.sh start /tmp/loomwork-ch)\"; export %s)", EnvDSN, lib, EnvDSN)
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " — CI must test the ClickHouse backend")
		}
		t.Skip(msg)
	}
	command, err := launcherCommand()
	if err != nil {
		t.Fatalf("clickhouse launcher: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := chlocal.StartProcess(ctx, chlocal.ProcessConfig{
		Command:        command,
		LibPath:        lib,
		Dir:            t.TempDir(),
		ExitWithParent: true,
	})
	if err != nil {
		t.Fatalf("start clickhouse: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Errorf("stop clickhouse: %v", err)
		}
	})
	u, err := parseDSN(p.DSN("default"))
	if err != nil {
		t.Fatal(err)
	}
	return &Server{base: u, Process: p}
}

func parseDSN(dsn string) (*url.URL, error) {
	if _, err := clickhouse.ParseDSN(dsn); err != nil {
		return nil, fmt.Errorf("parse dsn: %w", err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse dsn: %w", err)
	}
	return u, nil
}

// EnvPID names the environment variable holding the pid of the server named
// by EnvDSN (scripts/clickhouse.sh start prints it), so benchmarks can report
// its CPU and memory.
const EnvPID = "LOOMWORK_CLICKHOUSE_PID"

// PID is the server's process id: the private server's, else EnvPID's when
// it is set with EnvDSN, else 0 (unknown).
func (s *Server) PID() int {
	if s.Process != nil {
		return s.Process.Pid()
	}
	pid, err := strconv.Atoi(os.Getenv(EnvPID))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// DSN returns the server's DSN with database db.
func (s *Server) DSN(db string) string {
	u := *s.base
	u.Path = "/" + db
	return u.String()
}

var nonIdent = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// NewDatabase creates an empty database with a unique name and returns its
// name. It is dropped when t ends if t passed (kept for inspection if not).
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := nonIdent.ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	db := strings.ToLower("t_" + name + "_" + hex.EncodeToString(rnd[:]))
	s.Exec(t, "CREATE DATABASE "+db)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept ClickHouse database %s of failed test at %s", db, s.DSN(db))
			return
		}
		s.Exec(t, "DROP DATABASE IF EXISTS "+db+" SYNC")
	})
	return db
}

// Exec runs one statement on the server (in database default), failing t
// on error.
func (s *Server) Exec(t testing.TB, q string) {
	t.Helper()
	s.withConn(t, func(ctx context.Context, conn driver.Conn) error { return conn.Exec(ctx, q) }, q)
}

// withConn runs f on a fresh connection to database default with a
// minute's deadline, failing t (naming what) on any error.
func (s *Server) withConn(t testing.TB, f func(context.Context, driver.Conn) error, what string) {
	t.Helper()
	opts, err := clickhouse.ParseDSN(s.DSN("default"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatalf("connect to clickhouse: %v", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f(ctx, conn); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// launcherCommand returns the command that runs the ClickHouse launcher:
// $LOOM_EVAL clickhouse-local if LOOM_EVAL is set, else the small launcher
// binary in internal/chlocal/launcher, built once per test process (the Go
// build cache makes that a link step).
func launcherCommand() ([]string, error) {
	if le := os.Getenv("LOOM_EVAL"); le != "" {
		return []string{le, "clickhouse-local"}, nil
	}
	buildOnce.Do(func() {
		dir := filepath.Join(chlocal.CacheDir(os.Getenv), "bin")
		if buildErr = os.MkdirAll(dir, 0o755); buildErr != nil {
			return
		}
		// One binary per source tree: worktrees of different branches
		// share the cache, and one's launcher may lack the other's flags.
		// The tree's root, not this file's path: the suite builds with
		// -trimpath, under which a source path names no folder.
		root, err := testtier.FindModuleRoot()
		if err != nil {
			buildErr = err
			return
		}
		sum := sha256.Sum256([]byte(root))
		final := filepath.Join(dir, "chlocal-launcher-"+hex.EncodeToString(sum[:6]))
		tmp := final + "." + strconv.Itoa(os.Getpid())
		cmd := exec.Command("go", "build", "-o", tmp, "github.com/loomwork/loomwork/internal/chlocal/launcher")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build launcher: %w: %s", err, out)
			return
		}
		// Rename is atomic, so concurrent test processes never run a
		// half-written binary.
		if buildErr = os.Rename(tmp, final); buildErr == nil {
			buildPath = final
		}
	})
	if buildErr != nil {
		return nil, buildErr
	}
	return []string{buildPath}, nil
}

// QueryUint runs a query returning one unsigned integer (a count), failing
// t on error.
func (s *Server) QueryUint(t testing.TB, q string) uint64 {
	t.Helper()
	var n uint64
	s.withConn(t, func(ctx context.Context, conn driver.Conn) error { return conn.QueryRow(ctx, q).Scan(&n) }, q)
	return n
}
