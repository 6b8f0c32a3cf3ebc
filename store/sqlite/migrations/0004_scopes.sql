-- Loomwork embedded trace store, schema version 2: the rest of a span's
-- OTLP envelope.
--
-- Besides its name and version (spans.scope_name, scope_version) an
-- instrumentation scope carries attributes, a dropped-attributes count and
-- a schema URL, and a resource a schema URL and a dropped-attributes count
-- besides its attributes. They are the same for every span of one OTLP
-- ScopeSpans, so, like resource attributes, each distinct combination is
-- stored once, compressed, as the JSON
--   {"a": scope attributes, "d": scope dropped count, "u": scope schema URL,
--    "ru": resource schema URL, "rd": resource dropped count}
-- and spans refer to it. A span whose envelope has none of these (most
-- senders set no scope attributes) refers to nothing: scope_id is NULL, as
-- it is for every span stored before this version.

CREATE TABLE scopes (
	id   INTEGER PRIMARY KEY,
	hash BLOB NOT NULL UNIQUE,  -- sha256 prefix of the JSON above
	data BLOB NOT NULL          -- compressed JSON (see codec.go)
);

ALTER TABLE spans ADD COLUMN scope_id INTEGER; -- scopes.id; NULL: no scope data
