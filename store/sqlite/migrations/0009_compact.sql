-- Version 9: traces below 10,000 spans keep no row per span (issue 36).
--
-- A trace's spans live in span_blocks: each block the spans of the
-- traces of one batch, their typed fields column by column (ids as
-- bytes, times as deltas, strings through a dictionary of the block's
-- own) and their payloads, compressed together (compact.go).
-- trace_blocks lists a trace's blocks. Such a trace (traces.compact = 1)
-- has no rows in spans, search_terms or trace_calls: its reads decode its
-- blocks (a small trace is read whole anyway), an attribute search tests
-- the spans of the traces the search blooms name, and its billed calls
-- are derived from its spans. Per span this is what the data compresses
-- to, where a row per span, its three indexes and a row per distinct
-- search value cost ~700 bytes.
--
-- A trace that reaches 10,000 spans (window.go: bigTraceSpans; the trace
-- page reads such a trace by window) is moved to span rows, with their
-- window indexes, search terms and calls, as every trace stored before
-- this version is (compact = 0): nothing stored is rewritten.
ALTER TABLE traces ADD COLUMN compact INTEGER NOT NULL DEFAULT 0;

CREATE TABLE span_blocks (
	id   INTEGER PRIMARY KEY,
	data BLOB NOT NULL -- compressed (codec.go pack) compact block
);

CREATE TABLE trace_blocks (
	trace_seq INTEGER NOT NULL, -- traces.seq
	block_id  INTEGER NOT NULL, -- span_blocks.id
	PRIMARY KEY (trace_seq, block_id)
) WITHOUT ROWID;

-- The strings summary rows repeat (root names, services, agents, models,
-- lower-cased span names), once each: a row written from this version on
-- holds their ids (names.go), where it spelled them out.
CREATE TABLE summary_strings (
	id    INTEGER PRIMARY KEY,
	value TEXT NOT NULL UNIQUE
);

-- The list's service, agent and model filters test the summary's JSON
-- lists during a walk and find rare values through the search blooms,
-- where the tags now go (search kinds 6, 7 and 8): trace_tags, 10 bytes a
-- span, goes. After this file the migration adds the stored traces'
-- tags to the blooms (resummarize.go).
DROP TABLE trace_tags;

-- Per chunk of traces (traces.seq >> 8, as the blooms) and search key, the
-- least and greatest number its traces hold under the key: a comparison
-- (<, <=, >, >=) that few traces satisfy tests the spans of the chunks
-- whose range reaches it only, where it probed every trace's terms.
-- Filled here for the stored traces from their search terms.
CREATE TABLE search_ranges (
	key_id INTEGER NOT NULL, -- search_keys.id
	chunk  INTEGER NOT NULL,
	lo     REAL    NOT NULL,
	hi     REAL    NOT NULL,
	PRIMARY KEY (key_id, chunk)
) WITHOUT ROWID;
INSERT INTO search_ranges (key_id, chunk, lo, hi)
SELECT key_id, seq >> 8, min(value), max(value) FROM search_terms
WHERE typeof(value) IN ('integer', 'real') GROUP BY key_id, seq >> 8;
