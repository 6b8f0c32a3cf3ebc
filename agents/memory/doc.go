// Package memory owns what an agent knows between runs: a durable store of
// records (episodic — what happened; semantic — what is true; procedural —
// how to do it) with a write policy, and the distiller that turns a
// finished run's journal into candidate records.
//
// The write policy has three gates. A write below the salience threshold is
// rejected (an agent that remembers everything remembers noise). A write
// whose text is a near-duplicate of a record of the same kind in the same
// scope (token Jaccard >= the merge threshold) merges into it: the record
// keeps the higher salience, restarts its decay clock at the later write and
// counts a hit. Salience decays with a half-life, s·2^(-(now-t0)/h), and
// Forget deletes what has decayed below the threshold that admitted it.
//
// Retrieval scores a record by lexical overlap (the share of the query's
// distinct tokens the record contains) × decayed salience × (1 + 0.1·hits)
// × a per-kind weight, returns nothing with zero overlap, and never mutates
// the store: a query must not change the ranking of the next one. Touch is
// the separate, explicit way to count a use.
//
// Records are scoped by tenant, agent and namespace; no read or write
// crosses a scope. The store is one SQLite file (WAL, synchronous=FULL),
// conventionally beside the run journal. The clock is injected.
package memory
