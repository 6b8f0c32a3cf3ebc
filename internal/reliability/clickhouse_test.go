package reliability

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/loomwork/loomwork/internal/chlocal"
	"github.com/loomwork/loomwork/store"
	chstore "github.com/loomwork/loomwork/store/clickhouse"
)

// chServer is a private ClickHouse (chlocal.Process, started by the built
// loom-eval's clickhouse-local) behind a loopback TCP proxy. The proxy
// keeps the address serve was given across restarts: a restarted server
// gets new ports, as a real one moved by an orchestrator would keep its
// address but lose its connections.
type chServer struct {
	t     *testing.T
	cfg   chlocal.ProcessConfig
	p     *chlocal.Process
	proxy *tcpProxy
}

// startClickHouse starts a ClickHouse for t, or skips (fails under CI)
// when libchdb is not cached.
func startClickHouse(t *testing.T, loomEval string) *chServer {
	t.Helper()
	lib := chlocal.DefaultLibPath(os.Getenv)
	if _, err := os.Stat(lib); err != nil {
		msg := fmt.Sprintf("libchdb not cached at %s: run scripts/clickhouse.sh fetch", lib)
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " (CI must run the ClickHouse rows)")
		}
		t.Skip(msg)
	}
	c := &chServer{t: t, cfg: chlocal.ProcessConfig{
		Command: []string{loomEval, "clickhouse-local"}, LibPath: lib, Dir: t.TempDir(), ExitWithParent: true,
	}}
	c.proxy = newTCPProxy(t)
	c.start()
	t.Cleanup(func() {
		if c.p != nil {
			_ = syscall.Kill(c.p.Pid(), syscall.SIGCONT)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = c.p.Stop(ctx)
		}
		c.proxy.close()
	})
	return c
}

func (c *chServer) start() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := chlocal.StartProcess(ctx, c.cfg)
	if err != nil {
		c.t.Fatalf("start clickhouse: %v", err)
	}
	c.p = p
	c.proxy.setTarget(net.JoinHostPort(chlocal.ListenHost, strconv.Itoa(p.TCPPort)))
}

// DSN is the address serve uses: through the proxy.
func (c *chServer) DSN(db string) string {
	return "clickhouse://" + c.proxy.addr() + "/" + db
}

// kill9 kills the server with SIGKILL (its connections die with it).
func (c *chServer) kill9() {
	c.t.Helper()
	_ = syscall.Kill(c.p.Pid(), syscall.SIGKILL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = c.p.Stop(ctx) // reaps it
	c.p = nil
	c.proxy.setTarget("")
}

// restart starts a server on the same data directory.
func (c *chServer) restart() { c.start() }

// pause and resume SIGSTOP and SIGCONT the server: connections stay open
// and hang, as with a server stuck in I/O.
func (c *chServer) pause()  { _ = syscall.Kill(c.p.Pid(), syscall.SIGSTOP) }
func (c *chServer) resume() { _ = syscall.Kill(c.p.Pid(), syscall.SIGCONT) }

// conn opens a direct connection (not through the proxy).
func (c *chServer) conn() (clickhouse.Conn, error) {
	opts, err := clickhouse.ParseDSN(c.p.DSN("default"))
	if err != nil {
		return nil, err
	}
	opts.DialTimeout = 5 * time.Second
	return clickhouse.Open(opts)
}

// tcpProxy forwards loopback connections to a target that can change; an
// empty target refuses new connections (closes them at once).
type tcpProxy struct {
	ln     net.Listener
	target atomic.Value // string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newTCPProxy(t *testing.T) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, conns: map[net.Conn]struct{}{}}
	p.target.Store("")
	p.wg.Go(p.accept)
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) setTarget(addr string) { p.target.Store(addr) }

func (p *tcpProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.forward(c) })
	}
}

func (p *tcpProxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *tcpProxy) forward(c net.Conn) {
	defer c.Close()
	target := p.target.Load().(string)
	if target == "" {
		return
	}
	up, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	p.track(c, true)
	p.track(up, true)
	defer p.track(c, false)
	defer p.track(up, false)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done // either side closing ends both
}

func (p *tcpProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// clickhouseKeys reads every stored span of db: the suite's keys with how
// many rows each has (ReplacingMergeTree collapses repeats in merges and
// readers collapse the rest, so a count above 1 is a raw duplicate row).
func clickhouseKeys(t *testing.T, c *chServer, db string, nonce [8]byte) (map[uint64]int, storeCounts) {
	t.Helper()
	conn, err := c.conn()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var sc storeCounts
	if err := conn.QueryRow(ctx, "SELECT count(), uniqExact(trace_id, span_id) FROM "+db+".spans").Scan(&sc.Rows, &sc.Distinct); err != nil {
		t.Fatalf("count spans in %s: %v", db, err)
	}
	rows, err := conn.Query(ctx, "SELECT trace_id, span_id FROM "+db+".spans")
	if err != nil {
		t.Fatalf("read span ids of %s: %v", db, err)
	}
	defer rows.Close()
	keys := map[uint64]int{}
	for rows.Next() {
		var tid, sid string
		if err := rows.Scan(&tid, &sid); err != nil {
			t.Fatal(err)
		}
		k, ok := keyOfHex(tid, sid, nonce)
		if !ok {
			sc.Foreign++
			continue
		}
		keys[k]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return keys, sc
}

// waitClickHouseSettled waits until db's distinct span count stops
// growing for quiet (the spool drained), at most within.
func waitClickHouseSettled(t *testing.T, c *chServer, db string, quiet, within time.Duration) uint64 {
	t.Helper()
	var last uint64
	lastChange := time.Now()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		n, err := clickhouseDistinct(c, db)
		if err == nil && n != last {
			last, lastChange = n, time.Now()
		}
		if time.Since(lastChange) >= quiet {
			return last
		}
		time.Sleep(500 * time.Millisecond)
	}
	return last
}

func clickhouseDistinct(c *chServer, db string) (uint64, error) {
	conn, err := c.conn()
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n uint64
	err = conn.QueryRow(ctx, "SELECT uniqExact(trace_id, span_id) FROM "+db+".spans").Scan(&n)
	var ex *clickhouse.Exception
	if errors.As(err, &ex) && ex.Code == 60 { // UNKNOWN_TABLE: serve has not migrated yet
		return 0, nil
	}
	return n, err
}

// visibleDuplicates reads, through the store's own reader, every trace
// that has a span with more than one raw row (at most 200 traces) and
// counts spans GetTrace returns more than once: the duplicates a user
// sees. Raw repeats are the ReplacingMergeTree's to collapse; the store
// contract is that readers never see them.
func visibleDuplicates(t *testing.T, c *chServer, db string) (visible int64, rawTraces int) {
	t.Helper()
	conn, err := c.conn()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rows, err := conn.Query(ctx, "SELECT DISTINCT trace_id FROM (SELECT trace_id, span_id FROM "+db+".spans GROUP BY trace_id, span_id HAVING count() > 1) LIMIT 200")
	if err != nil {
		t.Fatalf("find duplicated rows in %s: %v", db, err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if len(ids) == 0 {
		return 0, 0
	}
	st, err := chstore.Open(ctx, chstore.Config{DSN: c.p.DSN(db)})
	if err != nil {
		t.Fatalf("open the clickhouse store: %v", err)
	}
	defer st.Shutdown(context.Background())
	for _, id := range ids {
		spans, err := st.GetTrace(store.WithDefaultProject(ctx), id)
		if err != nil {
			t.Fatalf("GetTrace %s: %v", id, err)
		}
		seen := map[string]bool{}
		for _, sp := range spans {
			if seen[sp.SpanID] {
				visible++
			}
			seen[sp.SpanID] = true
		}
	}
	return visible, len(ids)
}
