package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clickhouse is one fresh ClickHouse 26.7 started by scripts/clickhouse.sh
// on a data directory of its own.
type clickhouse struct {
	repo, dir string
	TCPAddr   string // 127.0.0.1:PORT (native protocol)
	HTTP      string // http://127.0.0.1:PORT
	PID       int
}

// startClickHouse runs `scripts/clickhouse.sh start DIR` with LOOM_EVAL
// set to the binary built for this run, so the script builds nothing.
func startClickHouse(ctx context.Context, repo, loomEval, dir string, logw io.Writer) (*clickhouse, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "scripts", "clickhouse.sh"), "start", dir)
	cmd.Env = append(os.Environ(), "LOOM_EVAL="+loomEval)
	cmd.Stderr = logw
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("scripts/clickhouse.sh start %s: %w", dir, err)
	}
	ch := &clickhouse{repo: repo, dir: dir}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		switch k {
		case "LOOMWORK_CLICKHOUSE_DSN":
			u, err := url.Parse(v)
			if err != nil {
				return nil, fmt.Errorf("clickhouse.sh printed DSN %q: %w", v, err)
			}
			ch.TCPAddr = u.Host
		case "LOOMWORK_CLICKHOUSE_HTTP":
			ch.HTTP = v
		case "LOOMWORK_CLICKHOUSE_PID":
			ch.PID, _ = strconv.Atoi(v)
		}
	}
	if ch.TCPAddr == "" || ch.HTTP == "" || ch.PID == 0 {
		return nil, fmt.Errorf("scripts/clickhouse.sh start %s printed %q: want DSN, HTTP and PID", dir, out)
	}
	return ch, nil
}

func (c *clickhouse) stop(logw io.Writer) error {
	cmd := exec.Command(filepath.Join(c.repo, "scripts", "clickhouse.sh"), "stop", c.dir)
	cmd.Stdout, cmd.Stderr = logw, logw
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("scripts/clickhouse.sh stop %s: %w", c.dir, err)
	}
	return nil
}

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
