// Package ablation runs every retrieval mode on a judged query set and
// reports what a researcher needs to pick one: recall@1/5/10, MRR@10 and
// nDCG@10 for gold and silver judgements separately with seeded bootstrap
// confidence intervals, per-query latency percentiles, per-query wins and
// losses between modes, and — with the leaky variant — how much finding
// the question itself changes each mode.
//
// The learned reranker is trained on silver judgements and evaluated so
// that no model ever scores a query whose issue it was trained on: gold
// queries use a model trained on the silver queries of other issues, and
// the remaining silver queries are evaluated by issue-grouped
// cross-validation. Run checks this for every evaluated query and fails
// rather than report a leaked number.
package ablation
