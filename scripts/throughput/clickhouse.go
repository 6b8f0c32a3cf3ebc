package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clickhouse is one fresh ClickHouse 26.7 (libchdb, started as `loom-eval
// clickhouse-local`, as scripts/clickhouse.sh does) on a data directory of
// its own.
type clickhouse struct {
	proc    *process
	TCPAddr string // 127.0.0.1:PORT (native protocol)
	HTTP    string // http://127.0.0.1:PORT
	PID     int
}

// startClickHouse starts ClickHouse on dir/data with the same process
// arrangement as the target (startProcess), which is why the harness
// starts it itself rather than through scripts/clickhouse.sh (whose
// server is always in a session of its own). The library is the one
// `scripts/clickhouse.sh fetch` cached.
func startClickHouse(ctx context.Context, repo, loomEval, dir, sessions string) (*clickhouse, error) {
	lib, err := exec.CommandContext(ctx, filepath.Join(repo, "scripts", "clickhouse.sh"), "lib").Output()
	if err != nil {
		return nil, fmt.Errorf("scripts/clickhouse.sh lib: %w (run scripts/clickhouse.sh fetch once)", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("clickhouse directory: %w", err)
	}
	ports := filepath.Join(dir, "clickhouse.ports")
	logPath := filepath.Join(dir, "clickhouse.log")
	p, err := startProcess(loomEval, []string{"clickhouse-local", "--lib", strings.TrimSpace(string(lib)),
		"--path", filepath.Join(dir, "data"), "--ports-file", ports, "--parent-pid", strconv.Itoa(os.Getpid())}, logPath, sessions)
	if err != nil {
		return nil, err
	}
	ch := &clickhouse{proc: p, PID: p.PID}
	err = p.waitReady(ctx, 2*time.Minute, logPath, func() bool {
		b, err := os.ReadFile(ports)
		if err != nil {
			return false
		}
		tcp, http, ok := strings.Cut(strings.TrimSpace(string(b)), "\t")
		if !ok {
			return false
		}
		ch.TCPAddr, ch.HTTP = "127.0.0.1:"+tcp, "http://127.0.0.1:"+http
		v, err := ch.queryInts(ctx, "SELECT 1")
		return err == nil && len(v) == 1 && v[0] == 1
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("clickhouse: %w", err), p.stop(20*time.Second))
	}
	return ch, nil
}

func (c *clickhouse) stop() error { return c.proc.stop(30 * time.Second) }

// query runs q on the HTTP interface and returns the body trimmed
// (TabSeparated unless q says otherwise).
func (c *clickhouse) query(ctx context.Context, q string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.HTTP+"/", strings.NewReader(q))
	if err != nil {
		return "", fmt.Errorf("query %.60q: %w", q, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("query %.60q: %w", q, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("query %.60q: read answer: %w", q, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("query %.60q: HTTP %d: %s", q, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return strings.TrimSpace(string(b)), nil
}

// queryInts runs q, which must return one row of integers.
func (c *clickhouse) queryInts(ctx context.Context, q string) ([]int64, error) {
	s, err := c.query(ctx, q)
	if err != nil {
		return nil, err
	}
	var out []int64
	for f := range strings.FieldsSeq(s) {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("query %.60q: answer %q is not integers", q, s)
		}
		out = append(out, v)
	}
	return out, nil
}

// diskBytes is the sum of bytes_on_disk over the active parts of every
// table of db (data, marks, primary index, skip indexes, checksums).
func (c *clickhouse) diskBytes(ctx context.Context, db string) (int64, error) {
	v, err := c.queryInts(ctx, fmt.Sprintf("SELECT sum(bytes_on_disk) FROM system.parts WHERE database = '%s' AND active", db))
	if err != nil || len(v) != 1 {
		return 0, fmt.Errorf("bytes on disk of %s: %w (got %v)", db, err, v)
	}
	return v[0], nil
}

// optimizeAll runs OPTIMIZE TABLE … FINAL on every MergeTree table of db.
func (c *clickhouse) optimizeAll(ctx context.Context, db string) error {
	s, err := c.query(ctx, fmt.Sprintf("SELECT name FROM system.tables WHERE database = '%s' AND engine LIKE '%%MergeTree%%'", db))
	if err != nil {
		return err
	}
	for name := range strings.FieldsSeq(s) {
		if _, err := c.query(ctx, fmt.Sprintf("OPTIMIZE TABLE `%s`.`%s` FINAL", db, name)); err != nil {
			return err
		}
	}
	return nil
}
