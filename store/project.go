package store

import (
	"context"
	"errors"
)

// Projects. Every trace belongs to one project: the project of the key that
// sent its spans, "" (the default project) when the collector runs without
// keys. A trace id is unique within a project; two projects may hold
// traces with the same id and neither sees the other's.
//
// The project a read is for travels in the context, like its deadline: the
// UI, the JSON API and the CLI put the authenticated key's project there
// once (WithProject; WithDefaultProject when no key is in play), and every
// Reader method of every backend reads only that project's traces.
//
// A context that names no project is a caller that forgot to say whose
// traces it reads. The ClickHouse backend, the multi-project store, fails
// such a read closed with an error wrapping ErrNoProject rather than
// reading the default project; the embedded SQLite store, a single
// user's file, still reads the default project.

type projectKey struct{}

// ErrNoProject is wrapped by a read whose context names no project (see
// WithProject, WithDefaultProject).
var ErrNoProject = errors.New("the read names no project (store.WithProject or store.WithDefaultProject)")

// WithProject returns ctx carrying the project that reads through it are
// scoped to.
func WithProject(ctx context.Context, project string) context.Context {
	return context.WithValue(ctx, projectKey{}, project)
}

// WithDefaultProject returns ctx scoped to the default project: the
// explicit choice of a caller with no key (the CLI without $LOOMWORK_KEY,
// the UI without keys).
func WithDefaultProject(ctx context.Context) context.Context { return WithProject(ctx, "") }

// ProjectOf returns the project ctx's reads are scoped to ("" for the
// default project, and for a context that names none: see ProjectFor).
func ProjectOf(ctx context.Context) string {
	p, _ := ctx.Value(projectKey{}).(string)
	return p
}

// ProjectFor returns the project ctx's reads are scoped to and whether ctx
// names one at all.
func ProjectFor(ctx context.Context) (string, bool) {
	p, ok := ctx.Value(projectKey{}).(string)
	return p, ok
}
