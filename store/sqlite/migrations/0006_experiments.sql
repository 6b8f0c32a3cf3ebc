-- Version 6: experiments (issue 34). An experiment's record and its graded
-- trials are opaque JSON documents (datasets.Experiment, datasets.Trial;
-- the store does not know their format) with the few fields the list
-- filters and orders by copied into columns. Both tables are keyed within
-- a project, like traces: an id is unique within its project.
CREATE TABLE experiments (
	project        TEXT    NOT NULL DEFAULT '',
	id             TEXT    NOT NULL,
	name           TEXT    NOT NULL,
	created_ns     INTEGER NOT NULL,
	label          TEXT    NOT NULL,
	dataset_sha256 TEXT    NOT NULL,
	status         TEXT    NOT NULL,
	updated_ns     INTEGER NOT NULL,
	record         TEXT    NOT NULL,
	dataset        TEXT,
	PRIMARY KEY (project, id)
) WITHOUT ROWID;
-- The list: a project's experiments, newest first.
CREATE INDEX experiments_by_created ON experiments (project, created_ns, id);
CREATE TABLE experiment_trials (
	project       TEXT    NOT NULL DEFAULT '',
	experiment_id TEXT    NOT NULL,
	case_id       TEXT    NOT NULL,
	trial         INTEGER NOT NULL,
	trace_id      TEXT    NOT NULL,
	doc           TEXT    NOT NULL,
	PRIMARY KEY (project, experiment_id, case_id, trial)
) WITHOUT ROWID;
