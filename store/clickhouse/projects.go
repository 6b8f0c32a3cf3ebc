package clickhouse

import (
	"context"
	"strings"

	"github.com/loomwork/loomwork/store"
)

// Projects (migration 0006): every row of spans and trace_index carries
// its project, and every read is scoped to store.ProjectFor(ctx) (a read
// whose context names none fails with store.ErrNoProject). Each query
// on either table gets the condition projectCond returns, in every
// subquery that reads a table: a trace id, a prefix, a session or a search
// matching another project's rows finds nothing.

// projectCond is the condition selecting ctx's project's rows. The project
// is a string literal, not a bound parameter: it goes into subqueries whose
// positional arguments are assembled in many places, and a literal cannot
// end up in the wrong position. quoteString escapes it. A context naming no
// project is an error wrapping store.ErrNoProject: a caller that forgot the
// project must not silently read the default project's traces (those of
// everything sent without a key).
func projectCond(ctx context.Context) (string, error) {
	p, ok := store.ProjectFor(ctx)
	if !ok {
		return "", store.ErrNoProject
	}
	return "project = " + quoteString(p), nil
}

// and joins conditions with AND, skipping empty ones.
func and(conds ...string) string {
	var out []string
	for _, c := range conds {
		if c != "" {
			out = append(out, c)
		}
	}
	return strings.Join(out, " AND ")
}
