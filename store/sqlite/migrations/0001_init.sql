-- Loomwork embedded trace store, schema version 1.
--
-- traces holds one summary row per trace; spans one row per (trace, span_id).
-- Identifiers are stored as raw bytes (16 and 8), times as int64 unix
-- nanoseconds. Every typed field of store.Span has its own column; the bulky,
-- rarely-filtered parts (attribute map, events, links, retrieved and cited
-- document ids) live in payload_blocks, compressed (see codec.go). Resource
-- attributes repeat for every span of a batch, so they are stored once in
-- resources and referenced by id.
--
-- Trace ids are random. Everything written per span is keyed by the trace's
-- sequence number (traces.seq, increasing in arrival order) instead, so that
-- inserts land on the last pages of each index rather than dirtying a random
-- page per span: with random keys every 512-span commit wrote megabytes of
-- WAL. The random id is indexed once per trace, in traces.

CREATE TABLE resources (
	id    INTEGER PRIMARY KEY,
	hash  BLOB NOT NULL UNIQUE,  -- sha256 prefix of the canonical JSON
	attrs BLOB NOT NULL          -- compressed store.Attributes JSON
);

-- One row per trace, maintained in the same transaction as the span insert
-- (from newly inserted spans only), so ListTraces never reads spans.
CREATE TABLE traces (
	seq                   INTEGER PRIMARY KEY,
	trace_id              BLOB    NOT NULL UNIQUE,
	service_name          TEXT    NOT NULL, -- root_service when a root arrived, else first_service
	-- The earliest-starting root (ties: smallest span id); NULLs until one arrives.
	root_name             TEXT    NOT NULL,
	root_service          TEXT    NOT NULL,
	root_start_ns         INTEGER,
	root_span_id          BLOB,
	-- The earliest-starting span of any kind, for service_name without a root.
	first_service         TEXT    NOT NULL,
	first_start_ns        INTEGER NOT NULL,
	first_span_id         BLOB    NOT NULL,
	agent_names           TEXT    NOT NULL, -- JSON array, sorted and distinct
	models                TEXT    NOT NULL, -- JSON array, sorted and distinct
	services              TEXT    NOT NULL, -- JSON array, sorted and distinct
	names_lower           TEXT    NOT NULL, -- distinct lower-cased span names, each followed by U+001F
	start_ns              INTEGER NOT NULL,
	end_ns                INTEGER NOT NULL,
	duration_ns           INTEGER NOT NULL,
	span_count            INTEGER NOT NULL,
	error_count           INTEGER NOT NULL,
	model_calls           INTEGER NOT NULL,
	tool_calls            INTEGER NOT NULL,
	input_tokens          INTEGER NOT NULL,
	output_tokens         INTEGER NOT NULL,
	cache_read_tokens     INTEGER NOT NULL,
	cache_creation_tokens INTEGER NOT NULL,
	reasoning_tokens      INTEGER NOT NULL,
	tokens_total          INTEGER NOT NULL  -- input + output, the SortTokens key
);

-- The default sort (newest first) and time-range filters. Start times
-- arrive roughly in order, so this index grows at its end. The other sort
-- keys (duration, spans, errors, tokens) are served by scanning and sorting
-- the matching summaries: an index each would cost random page writes on
-- every batch, for queries much rarer than ingest.
CREATE INDEX traces_by_start ON traces (start_ns, trace_id);

-- Exact-match filters (service, agent, model). kind: 1 service, 2 agent,
-- 3 model.
CREATE TABLE trace_tags (
	kind  INTEGER NOT NULL,
	value TEXT    NOT NULL,
	seq   INTEGER NOT NULL, -- traces.seq
	PRIMARY KEY (kind, value, seq)
) WITHOUT ROWID;

CREATE TABLE spans (
	trace_seq             INTEGER NOT NULL, -- traces.seq
	span_id               BLOB    NOT NULL,
	parent_span_id        BLOB,             -- NULL for a root span
	trace_state           TEXT    NOT NULL,
	name                  TEXT    NOT NULL,
	kind                  TEXT    NOT NULL,
	start_ns              INTEGER NOT NULL,
	end_ns                INTEGER NOT NULL,
	status_code           TEXT    NOT NULL,
	status_message        TEXT    NOT NULL,
	service_name          TEXT    NOT NULL,
	scope_name            TEXT    NOT NULL,
	scope_version         TEXT    NOT NULL,
	operation             TEXT    NOT NULL,
	provider              TEXT    NOT NULL,
	request_model         TEXT    NOT NULL,
	response_model        TEXT    NOT NULL,
	agent_name            TEXT    NOT NULL,
	conversation_id       TEXT    NOT NULL,
	tool_name             TEXT    NOT NULL,
	tool_call_id          TEXT    NOT NULL,
	has_usage             INTEGER NOT NULL,
	input_tokens          INTEGER NOT NULL,
	output_tokens         INTEGER NOT NULL,
	cache_read_tokens     INTEGER NOT NULL,
	cache_creation_tokens INTEGER NOT NULL,
	reasoning_tokens      INTEGER NOT NULL,
	cost_usd              REAL,             -- NULL when the sender set none
	resource_id           INTEGER,          -- resources.id; NULL without resource attributes
	-- The span's payload is bytes [payload_off, payload_off+payload_len) of
	-- the decompressed payload block payload_block.
	payload_block         INTEGER NOT NULL,
	payload_off           INTEGER NOT NULL,
	payload_len           INTEGER NOT NULL
);

-- Idempotency (INSERT OR IGNORE) and GetTrace.
CREATE UNIQUE INDEX spans_by_trace ON spans (trace_seq, span_id);

-- Payloads of up to ~64 KB of spans of one batch (grouped by trace),
-- compressed together: spans share most attribute keys and values, so a
-- block compresses to a fraction of per-span compression and costs one
-- encoder call instead of hundreds. A block is stored only if at least one
-- of its spans was newly inserted.
CREATE TABLE payload_blocks (
	id   INTEGER PRIMARY KEY,
	data BLOB NOT NULL
);
