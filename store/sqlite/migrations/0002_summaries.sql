-- Version 2: trace summaries are store.Summarize's, the one rule every view
-- of a trace shows (billed calls by structure: a span whose descendants
-- report usage repeats their usage and is not counted again). WriteSpans
-- keeps each trace's row current with a store.SummaryBuilder (incremental:
-- a batch costs its own size, not the trace's); after this file, the
-- migration recomputes every existing row (resummarize.go), in the same
-- transaction.
--
-- The incremental root and first-span bookkeeping is no longer needed:
-- Summarize finds the root and the first span itself.
ALTER TABLE traces ADD COLUMN after_root_ns       INTEGER NOT NULL DEFAULT 0;
ALTER TABLE traces ADD COLUMN fragments           INTEGER NOT NULL DEFAULT 0;
ALTER TABLE traces ADD COLUMN failed_model_calls  INTEGER NOT NULL DEFAULT 0;
ALTER TABLE traces ADD COLUMN model_labels        TEXT    NOT NULL DEFAULT '[]'; -- JSON array, sorted and distinct
ALTER TABLE traces DROP COLUMN root_service;
ALTER TABLE traces DROP COLUMN root_start_ns;
ALTER TABLE traces DROP COLUMN root_span_id;
ALTER TABLE traces DROP COLUMN first_service;
ALTER TABLE traces DROP COLUMN first_start_ns;
ALTER TABLE traces DROP COLUMN first_span_id;

-- The billed calls of each trace (store.Call's fields), kept by the
-- builder's deltas: a call that turns out to be an aggregate (a descendant
-- reporting usage arrived later) is deleted. The list prices a page's
-- traces from these rows, in canonical order, without reading spans.
CREATE TABLE trace_calls (
	trace_seq             INTEGER NOT NULL, -- traces.seq
	start_ns              INTEGER NOT NULL,
	span_id               BLOB    NOT NULL,
	name                  TEXT    NOT NULL,
	request_model         TEXT    NOT NULL,
	response_model        TEXT    NOT NULL,
	flags                 INTEGER NOT NULL, -- 1: failed, 2: has usage
	input_tokens          INTEGER NOT NULL,
	output_tokens         INTEGER NOT NULL,
	cache_read_tokens     INTEGER NOT NULL,
	cache_creation_tokens INTEGER NOT NULL,
	reasoning_tokens      INTEGER NOT NULL,
	cost_usd              REAL,             -- the sender's explicit cost; NULL when none
	PRIMARY KEY (trace_seq, start_ns, span_id)
) WITHOUT ROWID;
