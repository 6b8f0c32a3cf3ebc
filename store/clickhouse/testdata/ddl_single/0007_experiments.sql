-- step: experiments table
CREATE TABLE IF NOT EXISTS `loomwork`.experiments 
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
ENGINE = ReplacingMergeTree(updated)
ORDER BY (project, id);

-- step: experiment trials table
CREATE TABLE IF NOT EXISTS `loomwork`.experiment_trials 
(
    project       LowCardinality(String),
    experiment_id String,
    case_id       String,
    trial         UInt32,
    trace_id      String,
    updated       DateTime64(9),
    doc           String CODEC(ZSTD(3))
)
ENGINE = ReplacingMergeTree(updated)
ORDER BY (project, experiment_id, case_id, trial);

