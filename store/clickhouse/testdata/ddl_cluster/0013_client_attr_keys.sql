-- step: attribute keys given by the writer
ALTER TABLE `loomwork`.spans_local ON CLUSTER 'loomwork_cluster'
    MODIFY COLUMN attr_keys Array(LowCardinality(String)) DEFAULT JSONExtractKeys(attributes) CODEC(ZSTD(1));

-- step: attribute keys given by the writer, spans distributed table
ALTER TABLE `loomwork`.spans ON CLUSTER 'loomwork_cluster'
    MODIFY COLUMN attr_keys Array(LowCardinality(String)) DEFAULT JSONExtractKeys(attributes);

