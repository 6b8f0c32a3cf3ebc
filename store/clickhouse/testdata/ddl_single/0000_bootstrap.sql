-- step: database
CREATE DATABASE IF NOT EXISTS `loomwork` ;

-- step: schema_migrations table
CREATE TABLE IF NOT EXISTS `loomwork`.schema_migrations 
(
    version    UInt32,
    file       String,
    applied_at DateTime64(3)
)
ENGINE = MergeTree
ORDER BY version;

