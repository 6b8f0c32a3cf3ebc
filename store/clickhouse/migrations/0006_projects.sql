-- Version 6: projects and per-project retention (issue 21).
--
-- Every span and trace_index row carries its project ('' is the default
-- project, which every row stored before this version is in) and its
-- expiry, computed when written from the project's retention (far future,
-- 2106-01-01, for a project that keeps its traces for ever, and for every
-- older row). Reads filter on project = the reader's project.
--
-- The project goes at the end of the sorting key, not into the primary
-- key: ClickHouse can append a column to ORDER BY only in the ALTER that
-- adds it, and without a default expression; the primary key (what the
-- sparse index is built from) cannot change by ALTER at all. It has to be
-- in the sorting key because ReplacingMergeTree and AggregatingMergeTree
-- collapse rows by it: without it, the same (trace id, span id) sent by two
-- projects would collapse into one row. Reads still find a trace by its id
-- through the primary key and filter the project in the granules read.
--
-- TTL expire_at deletes expired rows in merges (OPTIMIZE ... FINAL forces
-- one). A configured Config.TTL is folded into the same expression (one
-- DELETE rule is all a table may have), and ttl_only_drop_parts goes to 0:
-- a day's part holds several projects, so whole-part drops would never
-- remove one project's rows. materialize_ttl_after_modify = 0: rows
-- stored before this version keep the old rule until merged and expire
-- never by expire_at (its default), so rewriting every part now would buy
-- nothing.

-- name: project and expiry of spans
ALTER TABLE {{.DB}}.{{.Local "spans"}} {{.OnCluster}}
    ADD COLUMN IF NOT EXISTS project LowCardinality(String) CODEC(ZSTD(1)),
    ADD COLUMN IF NOT EXISTS expire_at DateTime DEFAULT toDateTime('2106-01-01 00:00:00', 'UTC') CODEC(Delta, ZSTD(1)),
    MODIFY ORDER BY (toStartOfHour(start), trace_id, span_id, project);

-- name: TTL of spans
ALTER TABLE {{.DB}}.{{.Local "spans"}} {{.OnCluster}}
    MODIFY TTL {{.TTLOr "toDate(start)" "expire_at"}}
    SETTINGS materialize_ttl_after_modify = 0;

-- name: row-level TTL for spans
ALTER TABLE {{.DB}}.{{.Local "spans"}} {{.OnCluster}} MODIFY SETTING ttl_only_drop_parts = 0;
{{- if .Clustered}}

-- name: project and expiry of the spans distributed table
ALTER TABLE {{.DB}}.spans {{.OnCluster}}
    ADD COLUMN IF NOT EXISTS project LowCardinality(String),
    ADD COLUMN IF NOT EXISTS expire_at DateTime DEFAULT toDateTime('2106-01-01 00:00:00', 'UTC');
{{- end}}

-- name: project and expiry of the trace index
-- expire_at is the latest expiry of the trace's rows: the index row stays
-- while any of the trace's spans may.
ALTER TABLE {{.DB}}.{{.Local "trace_index"}} {{.OnCluster}}
    ADD COLUMN IF NOT EXISTS project LowCardinality(String) CODEC(ZSTD(1)),
    ADD COLUMN IF NOT EXISTS expire_at SimpleAggregateFunction(max, DateTime) DEFAULT toDateTime('2106-01-01 00:00:00', 'UTC') CODEC(ZSTD(1)),
    MODIFY ORDER BY (trace_id, project);

-- name: TTL of the trace index
ALTER TABLE {{.DB}}.{{.Local "trace_index"}} {{.OnCluster}}
    MODIFY TTL {{.TTLOr "day" "expire_at"}}
    SETTINGS materialize_ttl_after_modify = 0;

-- name: row-level TTL for the trace index
ALTER TABLE {{.DB}}.{{.Local "trace_index"}} {{.OnCluster}} MODIFY SETTING ttl_only_drop_parts = 0;
{{- if .Clustered}}

-- name: project and expiry of the trace index distributed table
ALTER TABLE {{.DB}}.trace_index {{.OnCluster}}
    ADD COLUMN IF NOT EXISTS project LowCardinality(String),
    ADD COLUMN IF NOT EXISTS expire_at SimpleAggregateFunction(max, DateTime) DEFAULT toDateTime('2106-01-01 00:00:00', 'UTC');
{{- end}}
