package chtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/chlocal"
)

// ClusterName is the remote_servers cluster StartCluster configures.
const ClusterName = "loomwork"

// Cluster is shards × replicas private ClickHouse servers on 127.0.0.1,
// each its own launcher process with its own data directory and ports,
// that all know the same remote_servers cluster (ClusterName).
//
// Replicas of a shard are kept equal by the Distributed table, which
// writes every insert to each of them (internal_replication=false): the
// engine in libchdb can run no ReplicatedMergeTree (clickhouse-local opens
// no interserver HTTP listener, so a replicated table stays read-only) and
// no ON CLUSTER DDL (it runs no DDL worker), so there is nothing for a
// Keeper to coordinate. docs/clickhouse.md has the measurements.
type Cluster struct {
	Shards, Replicas int
	// Nodes are shard-major: shard s (0-based), replica r is
	// Nodes[s*Replicas+r].
	Nodes   []*Node
	lib     string
	command []string
}

// Node is one server of a Cluster.
type Node struct {
	Shard, Replica int // 1-based, as in the server's macros
	Dir            string
	// TCPPort and HTTPPort are the server's own listeners, picked by the
	// OS at each start; everyone (the other nodes, tests, serve) reaches it
	// through ProxyPort.
	TCPPort, HTTPPort int
	// ProxyPort is the node's address in remote_servers and DSNs: a
	// gentleProxy in front of TCPPort (see proxy.go for why).
	ProxyPort int
	proxy     *gentleProxy
	// Process is the running server; nil while the node is down.
	Process *chlocal.Process
}

// Addr is the node's native-protocol address.
func (n *Node) Addr() string { return chlocal.ListenHost + ":" + strconv.Itoa(n.ProxyPort) }

// EnvClusterTest names the variable that asks for the cluster tests at full
// length (`make cluster-test` sets it to "full").
const EnvClusterTest = "LOOMWORK_CLUSTER_TEST"

// FullClusterTests reports whether the long cluster tests should run; a
// test that needs them skips with a message naming make cluster-test.
func FullClusterTests(t testing.TB) bool {
	t.Helper()
	return os.Getenv(EnvClusterTest) == "full"
}

// SkipUnlessFull skips t unless the full cluster tests were asked for.
func SkipUnlessFull(t testing.TB, why string) {
	t.Helper()
	if !FullClusterTests(t) {
		t.Skipf("%s; run it with make cluster-test (%s=full)", why, EnvClusterTest)
	}
}

// StartCluster starts shards × replicas servers for t and stops them when
// t ends. Like Start it skips (fails under CI) when libchdb is not cached;
// it ignores LOOMWORK_CLICKHOUSE_DSN, which names one server.
func StartCluster(t testing.TB, shards, replicas int) *Cluster {
	t.Helper()
	if shards < 1 || replicas < 1 {
		t.Fatalf("StartCluster: %d shards × %d replicas: need at least one of each", shards, replicas)
	}
	lib := chlocal.DefaultLibPath(os.Getenv)
	if _, err := os.Stat(lib); err != nil {
		msg := fmt.Sprintf("no ClickHouse cluster: libchdb is not cached at %s; run scripts/clickhouse.sh fetch", lib)
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " — CI must test the ClickHouse cluster")
		}
		t.Skip(msg)
	}
	command, err := launcherCommand()
	if err != nil {
		t.Fatalf("clickhouse launcher: %v", err)
	}
	c := &Cluster{Shards: shards, Replicas: replicas, lib: lib, command: command}
	root := t.TempDir()
	if keep := os.Getenv("LOOMWORK_CLUSTER_DIR"); keep != "" {
		// For a post-mortem: the nodes' data and logs stay there.
		root = filepath.Join(keep, nonIdent.ReplaceAllString(t.Name(), "_"))
		if err := os.RemoveAll(root); err != nil {
			t.Fatal(err)
		}
	}
	for s := 1; s <= shards; s++ {
		for r := 1; r <= replicas; r++ {
			n := &Node{Shard: s, Replica: r, Dir: filepath.Join(root, fmt.Sprintf("s%dr%d", s, r))}
			var err error
			n.proxy, err = newGentleProxy(chlocal.ListenHost + ":0")
			if err != nil {
				t.Fatalf("StartCluster: proxy: %v", err)
			}
			n.ProxyPort = n.proxy.ln.Addr().(*net.TCPAddr).Port
			c.Nodes = append(c.Nodes, n)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for _, n := range c.Nodes {
			if n.Process == nil {
				continue
			}
			if gone, how := n.Process.Exited(); gone {
				t.Errorf("clickhouse node s%dr%d (pid %d) died during the test (%v); its launcher log ends with:\n%s\nits server error log ends with:\n%s",
					n.Shard, n.Replica, n.Process.Pid(), how, tailLog(n.Process.LogPath(), 20), tailLog(filepath.Join(n.Dir, "server.err.log"), 40))
			}
			if n.Process != nil {
				if err := n.Process.Stop(ctx); err != nil {
					t.Errorf("stop clickhouse node s%dr%d: %v", n.Shard, n.Replica, err)
				}
			}
		}
		for _, n := range c.Nodes {
			if n.proxy != nil {
				n.proxy.close()
			}
		}
	})
	for i := range c.Nodes {
		if err := c.Start(i); err != nil {
			t.Fatalf("StartCluster: %v", err)
		}
	}
	return c
}

// Start starts node i (again, on its data directory and ports).
func (c *Cluster) Start(i int) error {
	n := c.Nodes[i]
	if n.Process != nil {
		return fmt.Errorf("node s%dr%d is already running", n.Shard, n.Replica)
	}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return err
	}
	cfg := filepath.Join(n.Dir, "config.xml")
	if err := os.WriteFile(cfg, []byte(c.NodeConfig(n)), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", cfg, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := chlocal.StartProcess(ctx, chlocal.ProcessConfig{
		Command:        c.command,
		LibPath:        c.lib,
		Dir:            n.Dir,
		ExitWithParent: true,
		ConfigFile:     cfg,
		// Ports 0: the server binds ports the OS picks, so nothing can take
		// them between choosing and binding (ports chosen by listening and
		// closing first lost that race to parallel test packages in CI:
		// "Address already in use"). Everyone reaches the node through its
		// proxy, whose port never changes; the proxy follows the node.
	})
	if err != nil {
		return fmt.Errorf("start clickhouse node s%dr%d: %w", n.Shard, n.Replica, err)
	}
	n.Process = p
	n.TCPPort, n.HTTPPort = p.TCPPort, p.HTTPPort
	n.proxy.setTarget(net.JoinHostPort(chlocal.ListenHost, strconv.Itoa(p.TCPPort)))
	return nil
}

// Kill SIGKILLs node i: no shutdown, no flush.
func (c *Cluster) Kill(i int) error {
	n := c.Nodes[i]
	if n.Process == nil {
		return nil
	}
	err := n.Process.Kill()
	n.Process = nil
	n.proxy.setTarget("") // until it starts again, on new ports
	return err
}

// DSN lists every node, so a client fails over to the next when one is
// down (the driver tries them in order, round robin across connections).
func (c *Cluster) DSN(db string, params ...string) string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	q := append([]string{"connection_open_strategy=round_robin"}, params...)
	return "clickhouse://" + strings.Join(addrs, ",") + "/" + db + "?" + strings.Join(q, "&")
}

// NodeConfig is node n's server configuration: the cluster's
// remote_servers, n's macros and modest memory limits (four servers and
// their tests share one machine).
func (c *Cluster) NodeConfig(n *Node) string {
	var b strings.Builder
	b.WriteString("<clickhouse>\n")
	b.WriteString("  <max_server_memory_usage>2000000000</max_server_memory_usage>\n")
	b.WriteString("  <mark_cache_size>67108864</mark_cache_size>\n")
	b.WriteString("  <index_mark_cache_size>16777216</index_mark_cache_size>\n")
	b.WriteString("  <uncompressed_cache_size>0</uncompressed_cache_size>\n")
	b.WriteString("  <background_pool_size>4</background_pool_size>\n")
	// Warnings and errors (a crash's stack trace) go to Dir/server.err.log.
	level := "warning"
	if l := os.Getenv("LOOMWORK_CLUSTER_LOG_LEVEL"); l != "" {
		level = l
	}
	fmt.Fprintf(&b, "  <logger><level>%s</level><log>%s</log><errorlog>%s</errorlog></logger>\n", level,
		filepath.Join(n.Dir, "server.log"), filepath.Join(n.Dir, "server.err.log"))
	fmt.Fprintf(&b, "  <macros><shard>%d</shard><replica>r%d</replica></macros>\n", n.Shard, n.Replica)
	fmt.Fprintf(&b, "  <remote_servers><%s>\n", ClusterName)
	for s := 1; s <= c.Shards; s++ {
		// false: the Distributed table writes each insert to every
		// replica itself; there is no replicated table to do it.
		b.WriteString("    <shard><internal_replication>false</internal_replication>\n")
		for _, m := range c.Nodes {
			if m.Shard == s {
				fmt.Fprintf(&b, "      <replica><host>%s</host><port>%d</port></replica>\n", chlocal.ListenHost, m.ProxyPort)
			}
		}
		b.WriteString("    </shard>\n")
	}
	fmt.Fprintf(&b, "  </%s></remote_servers>\n", ClusterName)
	b.WriteString("</clickhouse>\n")
	return b.String()
}

// Server is node n as a Server (its DSN, Exec and QueryUint); n must be
// running.
func (n *Node) Server() *Server {
	u, err := parseDSN("clickhouse://" + n.Addr() + "/default")
	if err != nil {
		panic(err) // a DSN built from a host and a port always parses
	}
	return &Server{base: u, Process: n.Process}
}

// NewDatabaseName returns a unique database name for t; the store creates
// it on every node. It is dropped on every running node when t ends if t
// passed (kept for inspection if not).
func (c *Cluster) NewDatabaseName(t testing.TB) string {
	t.Helper()
	name := nonIdent.ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	db := strings.ToLower("c_" + name + "_" + hex.EncodeToString(rnd[:]))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept ClickHouse database %s of failed test on the cluster's nodes", db)
			return
		}
		for _, n := range c.Nodes {
			if n.Process != nil {
				n.Server().Exec(t, "DROP DATABASE IF EXISTS "+db+" SYNC")
			}
		}
	})
	return db
}

// tailLog is the last n lines of a log, without the engine's most
// repetitive warnings and the frames of stack traces.
func tailLog(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if strings.Contains(l, "Temporarily pause scheduling") || strings.Contains(l, "Fatal> ClientBase: ") && strings.Contains(l, " @ 0x") {
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
