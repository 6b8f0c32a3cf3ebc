-- Version 8: lists and sessions read indexes, and list rows carry call
-- groups instead of every call (issue 36).
--
-- call_groups is the JSON of store.TraceSummary.Groups: the billed calls
-- summed per (request model, response model), what the list prices. It is
-- written with the rest of the summary (a trace's groups are a few hundred
-- bytes however long the trace); trace_calls stays, for the calls of one
-- trace (store.CallReader). After this file the migration fills it for
-- every stored trace from trace_calls (resummarize.go).
ALTER TABLE traces ADD COLUMN call_groups TEXT NOT NULL DEFAULT '[]';

-- One index per sort key, led by the project every list is scoped to, so
-- that a page sorted by any key (either direction) walks an index and
-- stops after a page instead of sorting every matching summary, and so
-- that a time range prunes within the project. traces_by_start (start_ns,
-- trace_id) and traces_by_project_start (project, start_ns) are folded
-- into the first. Each costs a page write per new trace; measured in
-- docs/bench-bigdata.md.
DROP INDEX traces_by_start;
DROP INDEX traces_by_project_start;
CREATE INDEX traces_by_start    ON traces (project, start_ns, trace_id);
CREATE INDEX traces_by_duration ON traces (project, duration_ns, trace_id);
CREATE INDEX traces_by_spans    ON traces (project, span_count, trace_id);
CREATE INDEX traces_by_errors   ON traces (project, error_count, trace_id);
CREATE INDEX traces_by_tokens   ON traces (project, tokens_total, trace_id);

-- Sessions kept at ingest. session_turns lists each session's traces
-- (a trace with spans of several conversations is a turn of each);
-- sessions holds each session's figures, store.SumTurns over its turns'
-- summaries, recomputed for the sessions a write touches. The session list
-- walks sessions_by_last; a session's page (ListTraces with Session) reads
-- its turns by the primary key of session_turns.
CREATE TABLE session_turns (
	project TEXT    NOT NULL,
	session TEXT    NOT NULL,
	seq     INTEGER NOT NULL, -- traces.seq
	PRIMARY KEY (project, session, seq)
) WITHOUT ROWID;

CREATE TABLE sessions (
	project       TEXT    NOT NULL,
	session       TEXT    NOT NULL,
	turns         INTEGER NOT NULL,
	first_start_ns INTEGER NOT NULL,
	last_start_ns INTEGER NOT NULL,
	span_count    INTEGER NOT NULL,
	error_count   INTEGER NOT NULL,
	model_calls   INTEGER NOT NULL,
	tool_calls    INTEGER NOT NULL,
	input_tokens  INTEGER NOT NULL,
	output_tokens INTEGER NOT NULL,
	PRIMARY KEY (project, session)
) WITHOUT ROWID;
CREATE INDEX sessions_by_last ON sessions (project, last_start_ns, session);

-- The sessions of the traces indexed for search so far (the conversation
-- ids in search_terms, kind 5); traces a pending search backfill indexes
-- later get theirs then.
INSERT INTO session_turns (project, session, seq)
SELECT DISTINCT t.project, st.value, st.seq
FROM search_terms st JOIN traces t ON t.seq = st.seq
WHERE st.key_id = (SELECT id FROM search_keys WHERE kind = 5 AND key = '');

INSERT INTO sessions
SELECT st.project, st.session, count(*), min(t.start_ns), max(t.start_ns),
	sum(t.span_count), sum(t.error_count), sum(t.model_calls), sum(t.tool_calls), sum(t.input_tokens), sum(t.output_tokens)
FROM session_turns st JOIN traces t ON t.seq = st.seq
GROUP BY st.project, st.session;

-- Blooms of search terms, per chunk of 256 traces (by seq) and block of
-- the filter (bloom.go): which chunks may hold a term, so a search for a
-- rare value reads the terms of a few chunks instead of every trace's.
-- Filled for the stored traces by the migration (resummarize.go).
CREATE TABLE search_blooms (
	block INTEGER NOT NULL,
	chunk INTEGER NOT NULL, -- traces.seq >> 8
	bits  BLOB    NOT NULL, -- 4096 bits
	PRIMARY KEY (block, chunk)
) WITHOUT ROWID;
