-- step: trace summaries table
-- Per-trace rollup for ListTraces, fed by the materialized view below. Every
-- aggregate is idempotent, so a span stored twice (a retried batch that
-- block deduplication did not catch) never counts twice: min/max/argMin and
-- set unions are idempotent by nature, and per-span numbers are kept in a
-- maxMap keyed by span id (one entry per span however often it arrives)
-- and summed at read time.
CREATE TABLE IF NOT EXISTS `loomwork`.trace_summaries 
(
    trace_id      String CODEC(ZSTD(1)),
    day           Date,
    start         SimpleAggregateFunction(min, DateTime64(9)),
    end           SimpleAggregateFunction(max, DateTime64(9)),
    -- (has root, name, service) of the earliest root span, ties by span id.
    root          AggregateFunction(argMinIf, Tuple(UInt8, String, String), Tuple(DateTime64(9), String), UInt8),
    -- service of the earliest span, for traces whose root has not arrived.
    first_service AggregateFunction(argMin, String, Tuple(DateTime64(9), String)),
    services      SimpleAggregateFunction(groupUniqArrayArray, Array(String)),
    agents        SimpleAggregateFunction(groupUniqArrayArray, Array(String)),
    models        SimpleAggregateFunction(groupUniqArrayArray, Array(String)),
    names         SimpleAggregateFunction(groupUniqArrayArray, Array(String)),
    -- span id -> (error, model call, tool call, input, output, cache read,
    -- cache creation, reasoning tokens; tokens of model calls only).
    spans         SimpleAggregateFunction(maxMap, Tuple(Array(String), Array(UInt8), Array(UInt8), Array(UInt8), Array(Int64), Array(Int64), Array(Int64), Array(Int64), Array(Int64)))
)
ENGINE = AggregatingMergeTree
PARTITION BY day
ORDER BY trace_id

SETTINGS index_granularity = 8192;

-- step: trace summaries view
CREATE MATERIALIZED VIEW IF NOT EXISTS `loomwork`.trace_summaries_mv 
TO `loomwork`.trace_summaries
AS SELECT
    trace_id,
    toDate(min(s.start)) AS day,
    min(s.start) AS start,
    max(s.end) AS end,
    argMinIfState((toUInt8(1), toString(name), toString(service_name)), (s.start, span_id), parent_span_id = '') AS root,
    argMinState(toString(service_name), (s.start, span_id)) AS first_service,
    groupUniqArray(toString(service_name)) AS services,
    groupUniqArrayIf(toString(agent_name), agent_name != '') AS agents,
    groupUniqArrayArray(arrayFilter(m -> m != '', [toString(request_model), toString(response_model)])) AS models,
    groupUniqArray(toString(name)) AS names,
    maxMap((
        [span_id],
        [toUInt8(status_code = 'error')],
        [toUInt8(model_call)],
        [toUInt8(operation = 'execute_tool')],
        [if(model_call, input_tokens, 0)],
        [if(model_call, output_tokens, 0)],
        [if(model_call, cache_read_tokens, 0)],
        [if(model_call, cache_creation_tokens, 0)],
        [if(model_call, reasoning_tokens, 0)]
    )) AS spans
FROM `loomwork`.spans AS s
GROUP BY trace_id;

