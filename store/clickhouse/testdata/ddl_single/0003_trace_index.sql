-- step: stop the trace summaries view
DROP VIEW IF EXISTS `loomwork`.trace_summaries_mv ;

-- step: trace index table
-- Where each trace is in time: min(start) is the trace's start, max(end) its
-- end. ListTraces finds traces by start and sorts them by start or duration
-- from this table alone; both aggregates are idempotent, so a batch stored
-- twice changes nothing.
CREATE TABLE IF NOT EXISTS `loomwork`.trace_index 
(
    trace_id String CODEC(ZSTD(1)),
    day      Date,
    start    SimpleAggregateFunction(min, DateTime64(9)) CODEC(ZSTD(1)),
    end      SimpleAggregateFunction(max, DateTime64(9)) CODEC(ZSTD(1))
)
ENGINE = AggregatingMergeTree
PARTITION BY day
ORDER BY trace_id

SETTINGS index_granularity = 8192, non_replicated_deduplication_window = 10000;

-- step: trace index of the spans stored so far
INSERT INTO `loomwork`.trace_index (trace_id, day, start, end)
SELECT trace_id, toDate(min(start), 'UTC'), min(start), max(end)
FROM `loomwork`.spans
GROUP BY trace_id
SETTINGS insert_deduplicate = 0;

-- step: old trace summaries table
DROP TABLE IF EXISTS `loomwork`.trace_summaries  SYNC;

-- step: compact parts for spans
-- An insert writes a part; in the Wide format that is two files per column
-- (~80 files), and on ext4 creating files next to recently deleted ones
-- (merges delete parts all the time) was a quarter of ClickHouse's CPU in
-- the benchmark. Parts below 256 MiB now use the Compact format (one data
-- file); merges still produce Wide parts above that.
ALTER TABLE `loomwork`.spans  MODIFY SETTING min_bytes_for_wide_part = 268435456;

-- step: LZ4 for the attribute JSON columns
-- The JSON columns are most of a span's bytes, and a part's bytes are
-- compressed again by every merge that rewrites it. With ZSTD(1) the merges
-- were the largest share of ClickHouse's CPU in the ingest benchmark; LZ4
-- compresses and decompresses several times faster for a larger file
-- (docs/bench-ingest.md). Existing parts keep ZSTD until merged.
ALTER TABLE `loomwork`.spans 
    MODIFY COLUMN attributes String CODEC(LZ4),
    MODIFY COLUMN resource_attributes String CODEC(LZ4),
    MODIFY COLUMN events String CODEC(LZ4),
    MODIFY COLUMN links String CODEC(LZ4);

