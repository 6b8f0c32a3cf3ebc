-- step: database
CREATE DATABASE IF NOT EXISTS `loomwork` ON CLUSTER 'loomwork_cluster';

-- step: schema_migrations table
CREATE TABLE IF NOT EXISTS `loomwork`.schema_migrations ON CLUSTER 'loomwork_cluster'
(
    version    UInt32,
    file       String,
    applied_at DateTime64(3)
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{database}/schema_migrations', '{shard}-{replica}')
ORDER BY version;

