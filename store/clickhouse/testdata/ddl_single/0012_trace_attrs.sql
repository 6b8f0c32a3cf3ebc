-- step: trace attributes table
CREATE TABLE IF NOT EXISTS `loomwork`.trace_attrs 
(
    project     LowCardinality(String),
    trace_id    String CODEC(ZSTD(1)),
    start       DateTime64(9) CODEC(Delta, ZSTD(1)),
    expire_at   DateTime CODEC(Delta, ZSTD(1)),
    keys        Array(LowCardinality(String)) CODEC(ZSTD(1)),
    key_values  Array(LowCardinality(String)) CODEC(ZSTD(1)),
    input_tokens_max             Nullable(Int64),
    input_tokens_min             Nullable(Int64),
    output_tokens_max            Nullable(Int64),
    output_tokens_min            Nullable(Int64),
    cache_read_tokens_max        Nullable(Int64),
    cache_read_tokens_min        Nullable(Int64),
    cache_creation_tokens_max    Nullable(Int64),
    cache_creation_tokens_min    Nullable(Int64),
    reasoning_tokens_max         Nullable(Int64),
    reasoning_tokens_min         Nullable(Int64)
)
ENGINE = MergeTree
ORDER BY (project, trace_id)
TTL expire_at
SETTINGS index_granularity = 8192;

-- step: trace attributes view
-- On each shard's own spans (spans are sharded by trace id, as are these
-- rows).
CREATE MATERIALIZED VIEW IF NOT EXISTS `loomwork`.trace_attrs_mv 
TO `loomwork`.trace_attrs
AS SELECT
    project,
    trace_id,
    min(start) AS start,
    max(expire_at) AS expire_at,
    groupUniqArrayArray(arrayConcat(attr_keys, arrayFilter((k, i) -> bitTest(attributes_in_columns, i), [
        'gen_ai.operation.name',
        'gen_ai.provider.name',
        'gen_ai.request.model',
        'gen_ai.response.model',
        'gen_ai.agent.name',
        'gen_ai.conversation.id',
        'gen_ai.tool.name',
        'gen_ai.tool.call.id',
        'gen_ai.usage.input_tokens',
        'gen_ai.usage.output_tokens',
        'gen_ai.usage.cache_read.input_tokens',
        'gen_ai.usage.cache_creation.input_tokens',
        'gen_ai.usage.reasoning.output_tokens',
        'gen_ai.retrieval.documents',
        'loomwork.citations'], range(15)))) AS keys,
    groupUniqArrayArray(arrayFilter(v -> v != '', [
        if(bitTest(attributes_in_columns, 0), concat('gen_ai.operation.name=', toString(operation)), ''),
        if(bitTest(attributes_in_columns, 1), concat('gen_ai.provider.name=', toString(provider)), ''),
        if(bitTest(attributes_in_columns, 2), concat('gen_ai.request.model=', toString(request_model)), ''),
        if(bitTest(attributes_in_columns, 3), concat('gen_ai.response.model=', toString(response_model)), ''),
        if(bitTest(attributes_in_columns, 4), concat('gen_ai.agent.name=', toString(agent_name)), ''),
        if(bitTest(attributes_in_columns, 6), concat('gen_ai.tool.name=', toString(tool_name)), '')])) AS key_values,
    maxIfOrNull(input_tokens, bitTest(attributes_in_columns, 8)) AS input_tokens_max,
    minIfOrNull(input_tokens, bitTest(attributes_in_columns, 8)) AS input_tokens_min,
    maxIfOrNull(output_tokens, bitTest(attributes_in_columns, 9)) AS output_tokens_max,
    minIfOrNull(output_tokens, bitTest(attributes_in_columns, 9)) AS output_tokens_min,
    maxIfOrNull(cache_read_tokens, bitTest(attributes_in_columns, 10)) AS cache_read_tokens_max,
    minIfOrNull(cache_read_tokens, bitTest(attributes_in_columns, 10)) AS cache_read_tokens_min,
    maxIfOrNull(cache_creation_tokens, bitTest(attributes_in_columns, 11)) AS cache_creation_tokens_max,
    minIfOrNull(cache_creation_tokens, bitTest(attributes_in_columns, 11)) AS cache_creation_tokens_min,
    maxIfOrNull(reasoning_tokens, bitTest(attributes_in_columns, 12)) AS reasoning_tokens_max,
    minIfOrNull(reasoning_tokens, bitTest(attributes_in_columns, 12)) AS reasoning_tokens_min
FROM `loomwork`.spans
GROUP BY project, trace_id;

-- step: trace attributes of the spans stored so far
INSERT INTO `loomwork`.trace_attrs
SELECT
    project,
    trace_id,
    min(start) AS start,
    max(expire_at) AS expire_at,
    groupUniqArrayArray(arrayConcat(attr_keys, arrayFilter((k, i) -> bitTest(attributes_in_columns, i), [
        'gen_ai.operation.name',
        'gen_ai.provider.name',
        'gen_ai.request.model',
        'gen_ai.response.model',
        'gen_ai.agent.name',
        'gen_ai.conversation.id',
        'gen_ai.tool.name',
        'gen_ai.tool.call.id',
        'gen_ai.usage.input_tokens',
        'gen_ai.usage.output_tokens',
        'gen_ai.usage.cache_read.input_tokens',
        'gen_ai.usage.cache_creation.input_tokens',
        'gen_ai.usage.reasoning.output_tokens',
        'gen_ai.retrieval.documents',
        'loomwork.citations'], range(15)))) AS keys,
    groupUniqArrayArray(arrayFilter(v -> v != '', [
        if(bitTest(attributes_in_columns, 0), concat('gen_ai.operation.name=', toString(operation)), ''),
        if(bitTest(attributes_in_columns, 1), concat('gen_ai.provider.name=', toString(provider)), ''),
        if(bitTest(attributes_in_columns, 2), concat('gen_ai.request.model=', toString(request_model)), ''),
        if(bitTest(attributes_in_columns, 3), concat('gen_ai.response.model=', toString(response_model)), ''),
        if(bitTest(attributes_in_columns, 4), concat('gen_ai.agent.name=', toString(agent_name)), ''),
        if(bitTest(attributes_in_columns, 6), concat('gen_ai.tool.name=', toString(tool_name)), '')])) AS key_values,
    maxIfOrNull(input_tokens, bitTest(attributes_in_columns, 8)) AS input_tokens_max,
    minIfOrNull(input_tokens, bitTest(attributes_in_columns, 8)) AS input_tokens_min,
    maxIfOrNull(output_tokens, bitTest(attributes_in_columns, 9)) AS output_tokens_max,
    minIfOrNull(output_tokens, bitTest(attributes_in_columns, 9)) AS output_tokens_min,
    maxIfOrNull(cache_read_tokens, bitTest(attributes_in_columns, 10)) AS cache_read_tokens_max,
    minIfOrNull(cache_read_tokens, bitTest(attributes_in_columns, 10)) AS cache_read_tokens_min,
    maxIfOrNull(cache_creation_tokens, bitTest(attributes_in_columns, 11)) AS cache_creation_tokens_max,
    minIfOrNull(cache_creation_tokens, bitTest(attributes_in_columns, 11)) AS cache_creation_tokens_min,
    maxIfOrNull(reasoning_tokens, bitTest(attributes_in_columns, 12)) AS reasoning_tokens_max,
    minIfOrNull(reasoning_tokens, bitTest(attributes_in_columns, 12)) AS reasoning_tokens_min
FROM `loomwork`.spans
GROUP BY project, trace_id
SETTINGS insert_deduplicate = 0;

