// Package ablation runs every retrieval mode on a judged query set and
// reports what a researcher needs to pick one: recall@1/5/10, MRR@10 and
// nDCG@10 for gold and silver judgements separately with seeded bootstrap
// confidence intervals, per-query latency percentiles, per-query wins and
// losses between modes, and — with the leaky variant — how much finding
// the question itself changes each mode.
//
// The honest variant (Excluded) leaves each query's own issue out of the
// results and out of the fitted corpus statistics: every query is searched
// on a retrieval.HeldOut view (BM25 per query, LSA refitted in folds of the
// judged queries' issues). FullStats is the cheaper protocol that excludes
// it from the results only; run beside Excluded, the report gives the
// per-mode difference (StatsEffect).
//
// The learned reranker is trained on silver judgements and evaluated so
// that no model ever scores a query whose issue it was trained on: gold
// queries use a model trained on the silver queries of other issues, and
// the remaining silver queries are evaluated by issue-grouped
// cross-validation. Run checks this for every evaluated query and fails
// rather than report a leaked number. A reranker trained elsewhere
// (Config.Saved, a reranker.json) is scored without training; the judged
// queries it was trained on are left out of every mode (SavedOverlap) and
// the report says how many.
//
// WriteFiles writes a report's files into a folder (report.json,
// report.md, the ndcg.svg chart and the trained gold reranker,
// reranker.json), and Environment describes where and on what a run ran
// (the machine, the toolchain, the load at start, the corpus, the index
// and dense-model build) for the report's Environment.
package ablation
