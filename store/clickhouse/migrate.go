package clickhouse

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// Migrations are SQL templates in migrations/NNNN_name.sql, applied in
// version order and recorded in schema_migrations. A file holds one or more
// steps, each introduced by a "-- name: what it creates" line, so a failure
// reads "create <what>: <server error>". An applied file must never change:
// add a new one instead.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	file    string
	steps   []ddlStep
}

type ddlStep struct {
	name string
	sql  string
	// eachNode: without a coordinator, the store runs this statement on
	// every node itself (it would otherwise run ON CLUSTER).
	eachNode bool
}

// ddl is what the templates see.
type ddl struct {
	// DB is the quoted database name.
	DB string
	// Clustered is true when DDL runs ON CLUSTER.
	Clustered bool
	// eachNode: a cluster without a coordinator (CoordinatorNone).
	eachNode bool
	cluster  string
	database string
	ttlDays  int
}

func newDDL(database, cluster string, ttl time.Duration) ddl {
	return newClusterDDL(database, cluster, "", ttl)
}

// eachNodeMarker stands where ON CLUSTER would under CoordinatorNone:
// render cuts it out and marks the step to be run on every node.
const eachNodeMarker = "/*loomwork:each-node*/"

func newClusterDDL(database, cluster, coordinator string, ttl time.Duration) ddl {
	return ddl{
		DB:        quoteIdent(database),
		Clustered: cluster != "",
		eachNode:  cluster != "" && coordinator == CoordinatorNone,
		cluster:   cluster,
		database:  database,
		ttlDays:   int(ttl / (24 * time.Hour)),
	}
}

// Local is the name of the table that holds the data on a node: name
// itself on a single server, name_local under a cluster (where name is the
// Distributed table in front of them).
func (d ddl) Local(name string) string {
	if d.Clustered {
		return name + "_local"
	}
	return name
}

// OnCluster is the ON CLUSTER clause, empty on a single server.
func (d ddl) OnCluster() string {
	if !d.Clustered {
		return ""
	}
	if d.eachNode {
		return eachNodeMarker
	}
	return "ON CLUSTER " + quoteString(d.cluster)
}

// ClusterName is the cluster as a string literal, for Distributed().
func (d ddl) ClusterName() string { return quoteString(d.cluster) }

// DatabaseName is the database as a string literal.
func (d ddl) DatabaseName() string { return quoteString(d.database) }

// Engine returns the MergeTree-family engine for table: engine itself on a
// single server, its Replicated form under a cluster with one replication
// path per shard and table.
func (d ddl) Engine(engine, table string) string {
	if !d.Replicated() {
		return engine
	}
	return "Replicated" + engine + "('/clickhouse/tables/{shard}/{database}/" + d.Local(table) + "', '{replica}')"
}

// EngineArgs is Engine for an engine with parameters (a
// ReplacingMergeTree's version column): engine(args) on a single server,
// the Replicated form with the path and replica before args under a
// cluster.
func (d ddl) EngineArgs(engine, args, table string) string {
	if !d.Replicated() {
		return engine + "(" + args + ")"
	}
	return "Replicated" + engine + "('/clickhouse/tables/{shard}/{database}/" + d.Local(table) + "', '{replica}', " + args + ")"
}

// Replicated reports whether local tables are Replicated*MergeTree (a
// cluster with a coordinator).
func (d ddl) Replicated() bool { return d.Clustered && !d.eachNode }

// TTLSet reports whether a TTL is configured.
func (d ddl) TTLSet() bool { return d.ttlDays > 0 }

// TTL is the TTL clause on a Date or DateTime64 column, empty without TTL.
func (d ddl) TTL(column string) string {
	if d.ttlDays <= 0 {
		return ""
	}
	return "TTL toDate(" + column + ") + INTERVAL " + strconv.Itoa(d.ttlDays) + " DAY"
}

// TTLOr is the row TTL expression on expiry (a DateTime column), or the
// earlier of it and the configured TTL on day (a Date expression) when one
// is set: a table may have one DELETE rule.
func (d ddl) TTLOr(day, expiry string) string {
	if d.ttlDays <= 0 {
		return expiry
	}
	return "least(toDateTime(" + day + " + INTERVAL " + strconv.Itoa(d.ttlDays) + " DAY, 'UTC'), " + expiry + ")"
}

// bootstrapSQL creates the database and the table recording migrations.
// Under a cluster every node replicates one schema_migrations table (one
// replication path for all shards), so any node sees what was applied.
const bootstrapSQL = `-- name: database
CREATE DATABASE IF NOT EXISTS {{.DB}} {{.OnCluster}};

-- name: schema_migrations table
CREATE TABLE IF NOT EXISTS {{.DB}}.schema_migrations {{.OnCluster}}
(
    version    UInt32,
    file       String,
    applied_at DateTime64(3)
)
ENGINE = {{if .Replicated}}ReplicatedMergeTree('/clickhouse/tables/{database}/schema_migrations', '{shard}-{replica}'){{else}}MergeTree{{end}}
ORDER BY version;
`

// render executes a template and splits the result into named steps.
func (d ddl) render(name, text string) ([]ddlStep, error) {
	tmpl, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, d); err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	steps, err := splitSteps(name, buf.String())
	if err != nil {
		return nil, err
	}
	for i, st := range steps {
		if strings.Contains(st.sql, eachNodeMarker) {
			steps[i].eachNode = true
			steps[i].sql = strings.ReplaceAll(st.sql, " "+eachNodeMarker, "")
			steps[i].sql = strings.ReplaceAll(steps[i].sql, eachNodeMarker, "")
		}
	}
	return steps, nil
}

// splitSteps cuts rendered SQL at "-- name:" lines.
func splitSteps(file, sql string) ([]ddlStep, error) {
	var steps []ddlStep
	var cur *ddlStep
	var body strings.Builder
	flush := func() {
		if cur != nil {
			cur.sql = strings.TrimSuffix(strings.TrimSpace(body.String()), ";")
			steps = append(steps, *cur)
		}
		body.Reset()
	}
	for i, line := range strings.Split(sql, "\n") {
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), "-- name:"); ok {
			flush()
			cur = &ddlStep{name: strings.TrimSpace(n)}
			continue
		}
		if cur == nil {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "--") {
				return nil, fmt.Errorf("%s line %d: SQL before the first '-- name:' line", file, i+1)
			}
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	flush()
	for _, s := range steps {
		if strings.Count(strings.TrimSpace(stripComments(s.sql)), ";") > 0 {
			return nil, fmt.Errorf("%s: step %q holds more than one statement", file, s.name)
		}
	}
	return steps, nil
}

func stripComments(sql string) string {
	var b strings.Builder
	for _, l := range strings.Split(sql, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// migrations renders every embedded migration for d, in version order.
func (d ddl) migrations() ([]migration, error) {
	files, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	seen := map[int]string{}
	for _, f := range files {
		base := path.Base(f)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive version, e.g. 0003_name.sql", base)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", other, base, v)
		}
		seen[v] = base
		text, err := migrationFiles.ReadFile(f)
		if err != nil {
			return nil, err
		}
		steps, err := d.render(base, string(text))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, file: base, steps: steps})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// execer is the part of the driver connection migrate needs.
type execer interface {
	Exec(ctx context.Context, query string, args ...any) error
}

// migrate brings the schema up to date (up to version upTo when it is
// positive: tests build older schemas) and returns the versions it applied.
func (s *Store) migrate(ctx context.Context, upTo int) ([]int, error) {
	boot, err := s.ddl.render("bootstrap", bootstrapSQL)
	if err != nil {
		return nil, err
	}
	nodes, err := s.nodeConns(ctx)
	if err != nil {
		return nil, err
	}
	defer closeNodes(nodes)
	if err := runSteps(ctx, s.conn, nodes, boot); err != nil {
		return nil, err
	}
	migs, err := s.ddl.migrations()
	if err != nil {
		return nil, err
	}
	applied := map[int]bool{}
	rows, err := s.query(ctx, "SELECT DISTINCT version FROM "+s.ddl.DB+".schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read schema_migrations: %w", err)
		}
		applied[int(v)] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	var done []int
	for _, m := range migs {
		if applied[m.version] || (upTo > 0 && m.version > upTo) {
			continue
		}
		s.log.Info("applying migration", "file", m.file, "database", s.ddl.database)
		if err := runSteps(ctx, s.conn, nodes, m.steps); err != nil {
			return done, fmt.Errorf("migration %s: %w", m.file, err)
		}
		// Steps SQL cannot do, before the version is recorded: a Start
		// that fails here runs the migration (its DDL is idempotent)
		// and the step again.
		if m.version == versionSummaries {
			if _, err := s.backfillSummaries(ctx, time.Time{}); err != nil {
				return done, fmt.Errorf("migration %s: %w", m.file, err)
			}
		}
		// Without a coordinator each node has its own schema_migrations.
		record := []execer{s.conn}
		if s.ddl.eachNode {
			record = nodeExecers(nodes)
		}
		for _, c := range record {
			if err := c.Exec(ctx, "INSERT INTO "+s.ddl.DB+".schema_migrations (version, file, applied_at) VALUES (?, ?, now64(3))",
				uint32(m.version), m.file); err != nil {
				return done, fmt.Errorf("record migration %s: %w", m.file, err)
			}
		}
		done = append(done, m.version)
	}
	return done, nil
}

// runSteps runs each step on conn, or on every node when the step is
// marked eachNode (a cluster without a coordinator).
func runSteps(ctx context.Context, conn execer, nodes []nodeConn, steps []ddlStep) error {
	for _, st := range steps {
		if !st.eachNode {
			if err := conn.Exec(ctx, st.sql); err != nil {
				return fmt.Errorf("create %s: %w", st.name, err)
			}
			continue
		}
		if len(nodes) == 0 {
			return fmt.Errorf("create %s: no cluster node to run it on", st.name)
		}
		for _, n := range nodes {
			if err := n.conn.Exec(ctx, st.sql); err != nil {
				return fmt.Errorf("create %s on node %s: %w", st.name, n.addr, err)
			}
		}
	}
	return nil
}

// quoteIdent quotes a ClickHouse identifier with backquotes.
func quoteIdent(s string) string {
	return "`" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "`", "\\`") + "`"
}

// quoteString returns s as a ClickHouse string literal.
func quoteString(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `'`, `\'`) + "'"
}
