-- Version 12: what each trace's spans hold, for the attribute searches
-- (issue 36).
--
-- An attribute search ("key is set", "an integer attribute above a
-- value", "a model equals") asked the spans: at 100,000 traces and two
-- big traces (2.4 million spans) a common key or value read every span's
-- trace id, 270-400 ms of server CPU (docs/bench-bigdata.md). Now a
-- materialized view on the spans insert keeps, per trace and per insert
-- block, the union of its spans' attribute keys (those of the JSON and
-- those typed columns hold), the "key=value" strings of the
-- low-cardinality typed string attributes (operation, provider, request
-- and response model, agent, tool name), and the least and greatest value
-- of each typed integer attribute among the spans that carry it. A
-- search reads these rows instead of the spans.
--
-- The rows are a plain MergeTree, never merged per trace: every question
-- asked of them is answered by one row (a trace has a key if any of its
-- rows lists it, an integer above x if any row's greatest is), and a span
-- stored twice (a retried insert) changes no answer. So the sets can be
-- LowCardinality (an AggregatingMergeTree's union cannot), of which a
-- search for a common key reads a thirtieth of the bytes. Keys and values of a
-- JSON attribute other than those (and tool call ids, conversation ids,
-- evidence) are still read from the spans, through their skip indexes.
-- The typed keys are listed in typedAttrs' bit order (typedattrs.go;
-- TestTraceAttrsListTheTypedAttributes keeps the two equal). Spans stored
-- before this version are folded in once, by the last step.

{{- /* The view's and the backfill's SELECT, one text for both. */ -}}
{{define "trace attributes"}}SELECT
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
    minIfOrNull(reasoning_tokens, bitTest(attributes_in_columns, 12)) AS reasoning_tokens_min{{end}}
-- name: trace attributes table
CREATE TABLE IF NOT EXISTS {{.DB}}.{{.Local "trace_attrs"}} {{.OnCluster}}
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
ENGINE = {{.Engine "MergeTree" "trace_attrs"}}
ORDER BY (project, trace_id)
TTL {{.TTLOr "toDate(start)" "expire_at"}}
SETTINGS index_granularity = 8192;
{{- if .Clustered}}

-- name: trace attributes distributed table
CREATE TABLE IF NOT EXISTS {{.DB}}.trace_attrs {{.OnCluster}}
AS {{.DB}}.{{.Local "trace_attrs"}}
ENGINE = Distributed({{.ClusterName}}, {{.DatabaseName}}, '{{.Local "trace_attrs"}}', cityHash64(trace_id));
{{- end}}

-- name: trace attributes view
-- On each shard's own spans (spans are sharded by trace id, as are these
-- rows).
CREATE MATERIALIZED VIEW IF NOT EXISTS {{.DB}}.{{.Local "trace_attrs_mv"}} {{.OnCluster}}
TO {{.DB}}.{{.Local "trace_attrs"}}
AS {{template "trace attributes"}}
FROM {{.DB}}.{{.Local "spans"}}
GROUP BY project, trace_id;

-- name: trace attributes of the spans stored so far
INSERT INTO {{.DB}}.trace_attrs
{{template "trace attributes"}}
FROM {{.DB}}.spans
GROUP BY project, trace_id
SETTINGS insert_deduplicate = 0;
