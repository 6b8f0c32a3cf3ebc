-- Version 7: traces read by the window a user looks at (issue 36).
--
-- A trace page, its expansions and the JSON API read a huge trace a page
-- at a time instead of whole (store.WindowReader):
--
-- spans_by_parent lists one span's children in canonical order (start,
-- span id) from a keyset token, and counts them from the index alone; a
-- root span's NULL parent sorts first, so the roots are one range too.
-- spans_by_start pages every span of a trace in canonical order (the API,
-- `traces get --all`, the in-trace search), where GetTrace sorted the
-- whole trace in Go. Both grow at their end for a trace being written
-- (trace_seq leads), as spans_by_trace does. Measured on generated agent
-- spans (10 traces of 10,000, VACUUMed), the two cost 65 bytes per span
-- together (docs/bench-bigdata-trace.md).
CREATE INDEX spans_by_parent ON spans (trace_seq, parent_span_id, start_ns, span_id);
CREATE INDEX spans_by_start ON spans (trace_seq, start_ns, span_id);

-- What a reader derived from a trace's spans and keeps (the rollup's tree
-- part: critical path, tops, aggregates), with the span count it was
-- derived from: a reader recomputes when the trace's count has changed.
-- trace_id guards against a seq that a later trace reuses after retention
-- deleted the first.
CREATE TABLE trace_derived (
	trace_seq  INTEGER NOT NULL, -- traces.seq
	kind       TEXT    NOT NULL,
	trace_id   BLOB    NOT NULL,
	span_count INTEGER NOT NULL,
	data       BLOB    NOT NULL,
	PRIMARY KEY (trace_seq, kind)
) WITHOUT ROWID;
