-- Version 5: projects (issue 21). Every trace belongs to one project, the
-- project of the key that sent its spans ('' is the default project, where
-- everything written before projects is). A trace id is unique within its
-- project, not across projects: two projects may send the same id (a
-- distributed trace crossing services of two teams) and each sees only its
-- own spans. SQLite cannot change a UNIQUE constraint in place, so the
-- table is rebuilt with the same rows and seq numbers (spans, tags, calls
-- and search terms refer to seq and stay valid).
--
-- The unique index leads with trace_id: the writer looks summaries up by
-- trace id for a batch (then matches the project), GetTrace and
-- ResolveTraceID by trace id and project.
CREATE TABLE traces_v5 (
	seq                   INTEGER PRIMARY KEY,
	trace_id              BLOB    NOT NULL,
	project               TEXT    NOT NULL DEFAULT '',
	service_name          TEXT    NOT NULL,
	root_name             TEXT    NOT NULL,
	agent_names           TEXT    NOT NULL,
	models                TEXT    NOT NULL,
	services              TEXT    NOT NULL,
	names_lower           TEXT    NOT NULL,
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
	tokens_total          INTEGER NOT NULL,
	after_root_ns         INTEGER NOT NULL DEFAULT 0,
	fragments             INTEGER NOT NULL DEFAULT 0,
	failed_model_calls    INTEGER NOT NULL DEFAULT 0,
	model_labels          TEXT    NOT NULL DEFAULT '[]'
);
INSERT INTO traces_v5 (seq, trace_id, project, service_name, root_name, agent_names, models, services, names_lower,
	start_ns, end_ns, duration_ns, span_count, error_count, model_calls, tool_calls,
	input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, tokens_total,
	after_root_ns, fragments, failed_model_calls, model_labels)
SELECT seq, trace_id, '', service_name, root_name, agent_names, models, services, names_lower,
	start_ns, end_ns, duration_ns, span_count, error_count, model_calls, tool_calls,
	input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, tokens_total,
	after_root_ns, fragments, failed_model_calls, model_labels FROM traces;
DROP TABLE traces;
ALTER TABLE traces_v5 RENAME TO traces;
CREATE UNIQUE INDEX traces_by_id ON traces (trace_id, project);
CREATE INDEX traces_by_start ON traces (start_ns, trace_id);
-- The retention job: a project's traces that started before a cutoff.
CREATE INDEX traces_by_project_start ON traces (project, start_ns);
