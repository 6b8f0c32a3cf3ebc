// Package web is Loomwork's UI: server-rendered HTML pages (templ) for
// traces, runs, reports and ablations, and the JSON API behind them. It holds
// presentation only: traces come from a store.Reader, rollups from
// scorer/rollup, and everything a client sent is escaped on the way out.
//
// Large traces stay fast because the trace page never renders every span:
// the waterfall is a depth-first list of rows in which big subtrees start
// collapsed, paginated at PageRows rows, and expanded on demand (a link that
// works without JavaScript, or a fetch of just that subtree's rows).
package web
