package clickhouse

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden DDL files in testdata/")

// renderAll renders the bootstrap and every migration as the statements
// Open would run, one file per migration.
func renderAll(t *testing.T, d ddl) map[string]string {
	t.Helper()
	out := map[string]string{}
	join := func(steps []ddlStep) string {
		var b strings.Builder
		for _, s := range steps {
			b.WriteString("-- step: " + s.name + "\n" + s.sql + ";\n\n")
		}
		return b.String()
	}
	boot, err := d.render("bootstrap", bootstrapSQL)
	if err != nil {
		t.Fatal(err)
	}
	out["0000_bootstrap.sql"] = join(boot)
	migs, err := d.migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migs {
		out[m.file] = join(m.steps)
	}
	return out
}

func checkGolden(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, got := range files {
		path := filepath.Join("testdata", dir, name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run: go test ./store/clickhouse -run %s -update)", err, t.Name())
		}
		if string(want) != got {
			t.Errorf("%s differs from the rendered DDL (if the change is intended, run: go test ./store/clickhouse -run %s -update)\n--- got:\n%s", path, t.Name(), got)
		}
	}
}

func TestClusterDDLUsesOnClusterReplicatedTablesAndDistributedTables(t *testing.T) {
	files := renderAll(t, newDDL("loomwork", "loomwork_cluster", 30*24*time.Hour))
	checkGolden(t, "ddl_cluster", files)
	all := strings.Join([]string{files["0001_spans.sql"], files["0002_trace_summaries.sql"], files["0003_trace_index.sql"], files["0004_otlp_envelope.sql"], files["0006_projects.sql"]}, "")
	for _, want := range []string{
		"CREATE TABLE IF NOT EXISTS `loomwork`.spans_local ON CLUSTER 'loomwork_cluster'",
		"ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/spans_local', '{replica}')",
		"ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/trace_summaries_local', '{replica}')",
		"ENGINE = Distributed('loomwork_cluster', 'loomwork', 'spans_local', cityHash64(trace_id))",
		"ENGINE = Distributed('loomwork_cluster', 'loomwork', 'trace_summaries_local', cityHash64(trace_id))",
		"TO `loomwork`.trace_summaries_local",
		"FROM `loomwork`.spans_local AS s",
		"TTL toDate(start) + INTERVAL 30 DAY",
		"ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/trace_index_local', '{replica}')",
		"ENGINE = Distributed('loomwork_cluster', 'loomwork', 'trace_index_local', cityHash64(trace_id))",
		"DROP VIEW IF EXISTS `loomwork`.trace_summaries_mv ON CLUSTER 'loomwork_cluster'",
		"DROP TABLE IF EXISTS `loomwork`.trace_summaries_local ON CLUSTER 'loomwork_cluster' SYNC",
		"ALTER TABLE `loomwork`.spans_local ON CLUSTER 'loomwork_cluster' MODIFY SETTING min_bytes_for_wide_part",
		"TTL toDate(day) + INTERVAL 30 DAY",
		// Columns are added to the local tables and to the Distributed one.
		"ALTER TABLE `loomwork`.spans_local ON CLUSTER 'loomwork_cluster'\n    ADD COLUMN IF NOT EXISTS flags UInt32",
		// Projects (0006): the local tables get the column in their
		// sorting key, the Distributed ones the column; the configured
		// TTL is folded into the per-row expiry.
		"ALTER TABLE `loomwork`.spans_local ON CLUSTER 'loomwork_cluster'\n    ADD COLUMN IF NOT EXISTS project LowCardinality(String)",
		"MODIFY ORDER BY (toStartOfHour(start), trace_id, span_id, project)",
		"MODIFY ORDER BY (trace_id, project)",
		"ALTER TABLE `loomwork`.spans ON CLUSTER 'loomwork_cluster'\n    ADD COLUMN IF NOT EXISTS project LowCardinality(String)",
		"ALTER TABLE `loomwork`.trace_index ON CLUSTER 'loomwork_cluster'\n    ADD COLUMN IF NOT EXISTS project LowCardinality(String)",
		"MODIFY TTL least(toDateTime(toDate(start) + INTERVAL 30 DAY, 'UTC'), expire_at)",
		"MODIFY TTL least(toDateTime(day + INTERVAL 30 DAY, 'UTC'), expire_at)",
		"ALTER TABLE `loomwork`.spans ON CLUSTER 'loomwork_cluster'\n    ADD COLUMN IF NOT EXISTS flags UInt32,",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("cluster DDL lacks %q", want)
		}
	}
	if !strings.Contains(files["0000_bootstrap.sql"], "CREATE DATABASE IF NOT EXISTS `loomwork` ON CLUSTER 'loomwork_cluster'") {
		t.Errorf("bootstrap does not create the database ON CLUSTER:\n%s", files["0000_bootstrap.sql"])
	}
}

func TestSingleServerDDLHasNoClusterClauses(t *testing.T) {
	files := renderAll(t, newDDL("loomwork", "", 0))
	checkGolden(t, "ddl_single", files)
	for name, sql := range files {
		// No configured TTL: the only TTL is the per-project expiry (0006,
		// and the traces and trace_attrs tables' own in 0009 and 0012).
		for _, bad := range []string{"ON CLUSTER", "Replicated", "Distributed", "_local", "INTERVAL"} {
			if strings.Contains(sql, bad) {
				t.Errorf("%s: single-server DDL contains %q", name, bad)
			}
		}
		if strings.Contains(sql, "TTL") && name != "0006_projects.sql" && name != "0009_traces.sql" && name != "0012_trace_attrs.sql" {
			t.Errorf("%s: single-server DDL without a TTL configured contains TTL", name)
		}
	}
	if n := strings.Count(files["0006_projects.sql"], "MODIFY TTL expire_at"); n != 2 {
		t.Errorf("0006: %d MODIFY TTL expire_at, want 2 (spans, trace_index):\n%s", n, files["0006_projects.sql"])
	}
	if n := strings.Count(files["0012_trace_attrs.sql"], "\nTTL expire_at\n"); n != 1 {
		t.Errorf("0012: %d TTL expire_at, want 1 (trace_attrs):\n%s", n, files["0012_trace_attrs.sql"])
	}
	if n := strings.Count(files["0009_traces.sql"], "\nTTL expire_at\n"); n != 1 {
		t.Errorf("0009: %d TTL expire_at, want 1 (traces):\n%s", n, files["0009_traces.sql"])
	}
}

func TestSplitStepsRejectsSQLWithoutAStepName(t *testing.T) {
	if _, err := splitSteps("x.sql", "CREATE TABLE t (x UInt8) ENGINE = Memory;"); err == nil || !strings.Contains(err.Error(), "x.sql line 1") {
		t.Errorf("splitSteps without a name line: %v", err)
	}
	if _, err := splitSteps("y.sql", "-- name: two\nSELECT 1; SELECT 2;"); err == nil || !strings.Contains(err.Error(), `"two"`) {
		t.Errorf("splitSteps with two statements in a step: %v", err)
	}
}

// Without a coordinator the same templates give plain MergeTree tables,
// no ON CLUSTER anywhere, and every statement that would run ON CLUSTER
// marked to run on each node; the backfill INSERT runs once.
func TestClusterWithoutCoordinatorRunsDDLOnEachNode(t *testing.T) {
	d := newClusterDDL("loomwork", "lw", CoordinatorNone, 0)
	boot, err := d.render("bootstrap", bootstrapSQL)
	if err != nil {
		t.Fatal(err)
	}
	migs, err := d.migrations()
	if err != nil {
		t.Fatal(err)
	}
	steps := boot
	for _, m := range migs {
		steps = append(steps, m.steps...)
	}
	keeper := newDDL("loomwork", "lw", 0)
	kboot, _ := keeper.render("bootstrap", bootstrapSQL)
	kmigs, _ := keeper.migrations()
	ksteps := kboot
	for _, m := range kmigs {
		ksteps = append(ksteps, m.steps...)
	}
	if len(steps) != len(ksteps) {
		t.Fatalf("%d steps without a coordinator, %d with Keeper: the two forms must run the same statements", len(steps), len(ksteps))
	}
	var distributed, once int
	for i, st := range steps {
		for _, bad := range []string{"ON CLUSTER", "Replicated", eachNodeMarker} {
			if strings.Contains(st.sql, bad) {
				t.Errorf("step %q contains %q:\n%s", st.name, bad, st.sql)
			}
		}
		onCluster := strings.Contains(ksteps[i].sql, "ON CLUSTER")
		if st.eachNode != onCluster {
			t.Errorf("step %q: eachNode=%v, but its Keeper form has ON CLUSTER=%v", st.name, st.eachNode, onCluster)
		}
		if strings.Contains(st.sql, "ENGINE = Distributed('lw', 'loomwork', ") {
			distributed++
		}
		if !st.eachNode {
			once++
			if !strings.HasPrefix(st.sql, "INSERT INTO `loomwork`.trace_index") && !strings.HasPrefix(st.sql, "INSERT INTO `loomwork`.trace_attrs") {
				t.Errorf("step %q runs once, on one node: %s", st.name, st.sql)
			}
		}
	}
	if distributed < 2 || once != 2 {
		t.Errorf("%d Distributed tables (want spans and trace_index at least), %d steps run once (want the two backfills only: trace_index, trace_attrs)", distributed, once)
	}
	if !strings.Contains(boot[1].sql, "ENGINE = MergeTree") {
		t.Errorf("schema_migrations without a coordinator is not a plain MergeTree:\n%s", boot[1].sql)
	}
}
