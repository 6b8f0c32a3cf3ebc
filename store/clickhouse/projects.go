package clickhouse

import (
	"context"
	"strings"

	"github.com/loomwork/loomwork/store"
)

// Projects (migration 0006): every row of spans and trace_index carries
// its project, and every read is scoped to store.ProjectOf(ctx). Each query
// on either table gets the condition projectCond returns, in every
// subquery that reads a table: a trace id, a prefix, a session or a search
// matching another project's rows finds nothing.

// projectCond is the condition selecting ctx's project's rows. The project
// is a string literal, not a bound parameter: it goes into subqueries whose
// positional arguments are assembled in many places, and a literal cannot
// end up in the wrong position. quoteString escapes it.
func projectCond(ctx context.Context) string {
	return "project = " + quoteString(store.ProjectOf(ctx))
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
