package clickhouse

import (
	"context"
	"fmt"
	"net"
	"strconv"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// nodeConn is a connection to one node of the cluster, for DDL that a
// cluster without a coordinator cannot run ON CLUSTER.
type nodeConn struct {
	addr string
	conn driver.Conn
}

// nodeConns connects to every node of the store's cluster, as listed in
// system.clusters of the node the store is connected to; nil when the
// store runs DDL ON CLUSTER or on a single server. Every node must answer:
// a schema change that misses a node would leave the cluster's tables
// unequal.
func (s *Store) nodeConns(ctx context.Context) ([]nodeConn, error) {
	if !s.ddl.eachNode {
		return nil, nil
	}
	rows, err := s.query(ctx, "SELECT host_address, port FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num", s.ddl.cluster)
	if err != nil {
		return nil, fmt.Errorf("list the nodes of cluster %s: %w", s.ddl.cluster, err)
	}
	var addrs []string
	for rows.Next() {
		var host string
		var port uint16
		if err := rows.Scan(&host, &port); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list the nodes of cluster %s: %w", s.ddl.cluster, err)
		}
		addrs = append(addrs, net.JoinHostPort(host, strconv.Itoa(int(port))))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the nodes of cluster %s: %w", s.ddl.cluster, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("cluster %s: no such cluster in system.clusters of the server connected to (remote_servers)", s.ddl.cluster)
	}
	var nodes []nodeConn
	for _, a := range addrs {
		opts := *s.opts
		opts.Addr = []string{a}
		conn, err := ch.Open(&opts)
		if err == nil {
			err = conn.Ping(ctx)
			if err != nil {
				conn.Close()
			}
		}
		if err != nil {
			closeNodes(nodes)
			return nil, fmt.Errorf("connect to node %s of cluster %s (every node must be up to change the schema): %w", a, s.ddl.cluster, err)
		}
		nodes = append(nodes, nodeConn{addr: a, conn: conn})
	}
	return nodes, nil
}

func closeNodes(nodes []nodeConn) {
	for _, n := range nodes {
		n.conn.Close()
	}
}

func nodeExecers(nodes []nodeConn) []execer {
	out := make([]execer, len(nodes))
	for i, n := range nodes {
		out[i] = n.conn
	}
	return out
}
