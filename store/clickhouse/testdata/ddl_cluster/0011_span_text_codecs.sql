-- step: span text codecs and part format
ALTER TABLE `loomwork`.spans_local ON CLUSTER 'loomwork_cluster'
    MODIFY COLUMN attributes String CODEC(ZSTD(2)),
    MODIFY COLUMN events String CODEC(ZSTD(2)),
    MODIFY SETTING max_compress_block_size = 4194304, min_bytes_for_wide_part = 268435456;

