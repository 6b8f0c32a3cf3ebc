-- step: attributes held by typed columns
ALTER TABLE `loomwork`.spans 
    ADD COLUMN IF NOT EXISTS attributes_in_columns UInt32 CODEC(ZSTD(1)),
    MODIFY COLUMN attributes String CODEC(ZSTD(1)),
    MODIFY COLUMN resource_attributes String CODEC(ZSTD(1)),
    MODIFY COLUMN events String CODEC(ZSTD(1)),
    MODIFY COLUMN links String CODEC(ZSTD(1));

