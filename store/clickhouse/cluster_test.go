package clickhouse_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
	"github.com/loomwork/loomwork/store/storetest"
)

// clusterDSN is the store URL of db on c: every node, the cluster, no
// coordinator (the libchdb engine runs no replicated table; see
// docs/clickhouse.md).
func clusterDSN(c *chtest.Cluster, db string) string {
	return c.DSN(db, "cluster="+chtest.ClusterName, "cluster_coordinator=none")
}

func openCluster(t testing.TB, dsn string) *clickhouse.Store {
	t.Helper()
	cfg, err := clickhouse.ConfigFromDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(store.WithDefaultProject(context.Background()), 2*time.Minute)
	defer cancel()
	s, err := clickhouse.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	return s
}

// TestClusterConformance runs the shared trace-store suite against 2
// shards × 2 replicas: four servers, reads and writes through the
// Distributed tables.
func TestClusterConformance(t *testing.T) {
	testtier.Slow(t)
	chtest.SkipUnlessFull(t, "the conformance suite on a 4-node cluster takes 4–6 min on 2 shared cores, over CI's budget for one test")
	c := chtest.StartCluster(t, 2, 2)
	var mu sync.Mutex
	lastDB := map[string]string{}
	key := func(t *testing.T) string {
		name := t.Name()
		if i := strings.Index(name, "/"); i >= 0 {
			if j := strings.Index(name[i+1:], "/"); j >= 0 {
				return name[:i+1+j]
			}
		}
		return name
	}
	storetest.RunAll(t, storetest.Harness{
		Open: func(t *testing.T) store.Store {
			db := c.NewDatabaseName(t)
			mu.Lock()
			lastDB[key(t)] = db
			mu.Unlock()
			return openCluster(t, clusterDSN(c, db))
		},
		Reopen: func(t *testing.T) store.Store {
			mu.Lock()
			db := lastDB[key(t)]
			mu.Unlock()
			if db == "" {
				t.Fatal("Reopen before Open")
			}
			return openCluster(t, clusterDSN(c, db))
		},
		New: func(t *testing.T) store.Store {
			cfg, err := clickhouse.ConfigFromDSN(clusterDSN(c, c.NewDatabaseName(t)))
			if err != nil {
				t.Fatal(err)
			}
			s, err := clickhouse.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	})
}

// TestClusterOfTwoShardsOfTwoReplicas starts one cluster of 2 shards × 2
// replicas (about ten seconds, more on a busy machine) for the checks that
// need one; each runs in a database of its own, at the same time.
func TestClusterOfTwoShardsOfTwoReplicas(t *testing.T) {
	testtier.Slow(t)
	c := chtest.StartCluster(t, 2, 2)
	t.Run("ShardsByTraceAndWritesEveryReplica", func(t *testing.T) {
		t.Parallel()
		clusterShardsByTraceAndWritesEveryReplica(t, c)
	})
	t.Run("ProjectIsolation", func(t *testing.T) {
		t.Parallel()
		clusterProjectIsolation(t, c)
	})
}

// clusterShardsByTraceAndWritesEveryReplica looks below the store's
// API, node by node: every span is on both replicas of exactly one shard,
// a trace never spans shards, and both shards hold data.
func clusterShardsByTraceAndWritesEveryReplica(t *testing.T, c *chtest.Cluster) {
	db := c.NewDatabaseName(t)
	s := openCluster(t, clusterDSN(c, db))
	defer s.Shutdown(store.WithDefaultProject(context.Background()))
	const traces, perTrace = 200, 10
	spans := storetest.GenerateTraces(traces, perTrace, 7)
	ctx := store.WithDefaultProject(context.Background())
	if err := s.WriteSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	perNode := make([]uint64, len(c.Nodes))
	for i, n := range c.Nodes {
		srv := n.Server()
		perNode[i] = srv.QueryUint(t, "SELECT count() FROM "+db+".spans_local")
		if got := srv.QueryUint(t, "SELECT count() FROM "+db+".spans"); got != traces*perTrace {
			t.Errorf("node s%dr%d: the Distributed table counts %d spans, want %d", n.Shard, n.Replica, got, traces*perTrace)
		}
		if tables := srv.QueryUint(t, "SELECT count() FROM system.tables WHERE database = '"+db+"' AND engine LIKE 'Replicated%'"); tables != 0 {
			t.Errorf("node s%dr%d has %d Replicated tables; without a coordinator there must be none", n.Shard, n.Replica, tables)
		}
	}
	t.Logf("spans per node (s1r1, s1r2, s2r1, s2r2): %v", perNode)
	if perNode[0] != perNode[1] || perNode[2] != perNode[3] {
		t.Errorf("replicas differ: shard 1 %d/%d, shard 2 %d/%d spans", perNode[0], perNode[1], perNode[2], perNode[3])
	}
	if perNode[0]+perNode[2] != traces*perTrace {
		t.Errorf("shards hold %d + %d spans, want %d in all", perNode[0], perNode[2], traces*perTrace)
	}
	if perNode[0] == 0 || perNode[2] == 0 {
		t.Errorf("a shard is empty (%d, %d): nothing is sharded", perNode[0], perNode[2])
	}
	split := c.Nodes[0].Server().QueryUint(t, fmt.Sprintf(
		"SELECT count() FROM (SELECT trace_id FROM remote('%s', %s.spans_local) GROUP BY trace_id HAVING uniqExact(_shard_num) > 1)",
		c.Nodes[0].Addr()+","+c.Nodes[2].Addr(), db))
	if split != 0 {
		t.Errorf("%d traces have spans on both shards", split)
	}
}

// clusterProjectIsolation runs the project checks on 2 shards × 2
// replicas without a coordinator: migration 0006 ran on every node (local
// and Distributed tables), and the project filter holds through the
// Distributed tables.
func clusterProjectIsolation(t *testing.T, c *chtest.Cluster) {
	storetest.RunProjects(t, storetest.Harness{
		Open: func(t *testing.T) store.Store {
			return openCluster(t, clusterDSN(c, c.NewDatabaseName(t)))
		},
	})
	db := c.NewDatabaseName(t)
	s := openCluster(t, clusterDSN(c, db))
	defer s.Shutdown(store.WithDefaultProject(context.Background()))
	for _, n := range c.Nodes {
		for _, table := range []string{"spans_local", "trace_index_local", "spans", "trace_index"} {
			if got := n.Server().QueryUint(t, "SELECT count() FROM system.columns WHERE database = '"+db+"' AND table = '"+table+"' AND name IN ('project', 'expire_at')"); got != 2 {
				t.Errorf("node s%dr%d: %s has %d of the columns project, expire_at", n.Shard, n.Replica, table, got)
			}
		}
	}
}
