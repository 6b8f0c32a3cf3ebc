-- Version 2: trace summaries are store.Summarize's, the one rule every view
-- of a trace shows (billed calls by structure: a span whose descendants
-- report usage repeats their usage and is not counted again). WriteSpans
-- recomputes a trace's row from its stored spans and the new ones; after
-- this file, the migration recomputes every existing row (resummarize.go),
-- in the same transaction.
--
-- The incremental root and first-span bookkeeping is no longer needed:
-- Summarize finds the root and the first span itself.
ALTER TABLE traces ADD COLUMN after_root_ns       INTEGER NOT NULL DEFAULT 0;
ALTER TABLE traces ADD COLUMN fragments           INTEGER NOT NULL DEFAULT 0;
ALTER TABLE traces ADD COLUMN failed_model_calls  INTEGER NOT NULL DEFAULT 0;
ALTER TABLE traces ADD COLUMN model_labels        TEXT    NOT NULL DEFAULT '[]'; -- JSON array, sorted and distinct
ALTER TABLE traces ADD COLUMN calls               BLOB;                         -- compressed JSON of the billed calls; NULL when none
ALTER TABLE traces DROP COLUMN root_service;
ALTER TABLE traces DROP COLUMN root_start_ns;
ALTER TABLE traces DROP COLUMN root_span_id;
ALTER TABLE traces DROP COLUMN first_service;
ALTER TABLE traces DROP COLUMN first_start_ns;
ALTER TABLE traces DROP COLUMN first_span_id;
