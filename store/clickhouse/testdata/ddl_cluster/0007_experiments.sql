-- step: experiments table
CREATE TABLE IF NOT EXISTS `loomwork`.experiments_local ON CLUSTER 'loomwork_cluster'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/experiments_local', '{replica}', updated)
ORDER BY (project, id);

-- step: experiments distributed table
CREATE TABLE IF NOT EXISTS `loomwork`.experiments ON CLUSTER 'loomwork_cluster'
AS `loomwork`.experiments_local
ENGINE = Distributed('loomwork_cluster', 'loomwork', 'experiments_local', cityHash64(id));

-- step: experiment trials table
CREATE TABLE IF NOT EXISTS `loomwork`.experiment_trials_local ON CLUSTER 'loomwork_cluster'
(
    project       LowCardinality(String),
    experiment_id String,
    case_id       String,
    trial         UInt32,
    trace_id      String,
    updated       DateTime64(9),
    doc           String CODEC(ZSTD(3))
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/experiment_trials_local', '{replica}', updated)
ORDER BY (project, experiment_id, case_id, trial);

-- step: experiment trials distributed table
CREATE TABLE IF NOT EXISTS `loomwork`.experiment_trials ON CLUSTER 'loomwork_cluster'
AS `loomwork`.experiment_trials_local
ENGINE = Distributed('loomwork_cluster', 'loomwork', 'experiment_trials_local', cityHash64(experiment_id));

