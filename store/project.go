package store

import "context"

// Projects. Every trace belongs to one project: the project of the key that
// sent its spans, "" (the default project) when the collector runs without
// keys. A trace id is unique within a project; two projects may hold
// traces with the same id and neither sees the other's.
//
// The project a read is for travels in the context, like its deadline: the
// UI, the JSON API and the CLI put the authenticated key's project there
// once (WithProject), and every Reader method of every backend reads only
// that project's traces (ProjectOf). A context without a project reads the
// default project, so code written before projects reads what it always
// read.

type projectKey struct{}

// WithProject returns ctx carrying the project that reads through it are
// scoped to.
func WithProject(ctx context.Context, project string) context.Context {
	return context.WithValue(ctx, projectKey{}, project)
}

// ProjectOf returns the project ctx's reads are scoped to ("" for the
// default project).
func ProjectOf(ctx context.Context) string {
	p, _ := ctx.Value(projectKey{}).(string)
	return p
}
