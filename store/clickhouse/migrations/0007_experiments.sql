-- Version 7: experiments (issue 34). An experiment's record and its graded
-- trials are opaque JSON documents (datasets.Experiment, datasets.Trial;
-- the store does not know their format) with the fields the list filters
-- and orders by copied into columns, keyed within a project like traces.
--
-- A put writes the record again and every trial it carries: both tables
-- are ReplacingMergeTree with the put's time as the version, so the
-- latest put of a key wins, and readers read FINAL (the tables are small:
-- one row per experiment, one per trial). Under a cluster both are
-- sharded by the experiment id, so an experiment and its trials live on
-- one shard and FINAL collapses each key where it is stored. No TTL:
-- experiments are kept until deleted.

-- name: experiments table
CREATE TABLE IF NOT EXISTS {{.DB}}.{{.Local "experiments"}} {{.OnCluster}}
(
    project        LowCardinality(String),
    id             String,
    name           String,
    created        DateTime64(9),
    label          String,
    dataset_sha256 String,
    status         LowCardinality(String),
    updated        DateTime64(9),
    record         String CODEC(ZSTD(3)),
    dataset        Nullable(String) CODEC(ZSTD(3))
)
ENGINE = {{.EngineArgs "ReplacingMergeTree" "updated" "experiments"}}
ORDER BY (project, id);
{{- if .Clustered}}

-- name: experiments distributed table
CREATE TABLE IF NOT EXISTS {{.DB}}.experiments {{.OnCluster}}
AS {{.DB}}.{{.Local "experiments"}}
ENGINE = Distributed({{.ClusterName}}, {{.DatabaseName}}, '{{.Local "experiments"}}', cityHash64(id));
{{- end}}

-- name: experiment trials table
CREATE TABLE IF NOT EXISTS {{.DB}}.{{.Local "experiment_trials"}} {{.OnCluster}}
(
    project       LowCardinality(String),
    experiment_id String,
    case_id       String,
    trial         UInt32,
    trace_id      String,
    updated       DateTime64(9),
    doc           String CODEC(ZSTD(3))
)
ENGINE = {{.EngineArgs "ReplacingMergeTree" "updated" "experiment_trials"}}
ORDER BY (project, experiment_id, case_id, trial);
{{- if .Clustered}}

-- name: experiment trials distributed table
CREATE TABLE IF NOT EXISTS {{.DB}}.experiment_trials {{.OnCluster}}
AS {{.DB}}.{{.Local "experiment_trials"}}
ENGINE = Distributed({{.ClusterName}}, {{.DatabaseName}}, '{{.Local "experiment_trials"}}', cityHash64(experiment_id));
{{- end}}
