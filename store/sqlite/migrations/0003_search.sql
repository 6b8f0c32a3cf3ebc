-- Search index: what TraceQuery.Search and Session filter on and what
-- ListSessions groups by, kept per trace.
--
-- search_terms holds, for each trace, the distinct values its spans carry
-- under each search key: every attribute (by key), the span name, retrieved
-- and cited document ids, and the conversation (session) id. Values are
-- TEXT (strings up to store.MaxSearchValue bytes, booleans as 'true' and
-- 'false'), INTEGER (integers up to 2^53 in magnitude, where a double is
-- exact), REAL (other numbers), or the empty blob X'' for a key that is set
-- to something not comparable (a longer string, a map, an empty array): the
-- column has no type, so SQLite compares numbers as numbers and never
-- equates a number with text or a blob.
--
-- The key is (key_id, seq, value), not (key_id, value, seq): traces.seq
-- grows with arrival, so a batch's rows land at the end of each key's range
-- (a few pages per key) instead of a random page per distinct value (ids,
-- token counts), which made every commit write megabytes of WAL. A lookup
-- scans the key's range, one row per trace and distinct value.
CREATE TABLE search_keys (
	id   INTEGER PRIMARY KEY,
	kind INTEGER NOT NULL, -- 1 attribute, 2 span name, 3 retrieved document, 4 cited document, 5 conversation
	key  TEXT    NOT NULL, -- the attribute key; '' for the other kinds
	UNIQUE (kind, key)
);

CREATE TABLE search_terms (
	key_id INTEGER NOT NULL, -- search_keys.id
	seq    INTEGER NOT NULL, -- traces.seq
	value          NOT NULL,
	PRIMARY KEY (key_id, seq, value)
) WITHOUT ROWID;

-- Traces stored before this version are indexed by the first writable
-- open after the upgrade, newest first: seq < below_seq are left to do.
-- Searches fail with a clear error until the row is gone.
CREATE TABLE search_backfill (below_seq INTEGER NOT NULL);
INSERT INTO search_backfill SELECT max(seq) + 1 FROM traces HAVING count(*) > 0;
