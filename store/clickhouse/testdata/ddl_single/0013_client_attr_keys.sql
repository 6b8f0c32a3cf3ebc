-- step: attribute keys given by the writer
ALTER TABLE `loomwork`.spans 
    MODIFY COLUMN attr_keys Array(LowCardinality(String)) DEFAULT JSONExtractKeys(attributes) CODEC(ZSTD(1));

