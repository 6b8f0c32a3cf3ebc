// Package retrieval is the search service the research agent uses at run time
// and the thing the retrieval ablation measures.
//
// A corpus is documentation split into sections by heading (each keeping its
// page path and mkdocs anchor) plus closed issues as whole documents. Five
// modes rank it:
//
//   - bm25: bleve with BM25 scoring over a field-aware mapping (title,
//     headings, body, path), persisted on disk and rebuilt only when the
//     corpus's content hash changes;
//   - dense: brute-force cosine over vectors from an [Embedder] (a pure-Go LSA
//     model by default, or any OpenAI-compatible /v1/embeddings endpoint
//     through agents/gateway/openai.Embeddings);
//   - rrf: reciprocal rank fusion of bm25 and dense;
//   - weighted: min-max normalised score fusion of bm25 and dense;
//   - rerank: rrf candidates re-scored by a [Reranker] (a learned logistic
//     regression over hand-built features, or a hosted /v1/rerank API:
//     [Remote] over a [RemoteReranker] such as agents/gateway/rerank.Client).
//
// retrieval has no HTTP client for model endpoints of its own: it declares
// the interfaces it consumes ([Embedder], [RemoteReranker]) and the clients
// live with the gateway (credentials as gateway.Secret, one exchange that
// classifies failures and scrubs the key); the binary wires them in.
// retrieval imports nothing under agents/ (agents/research imports it).
//
// Exclusion is part of the query: [Query.ExcludeIssues] removes an issue and
// every issue marked as its duplicate from the ranking of every mode, before
// fusion and reranking, so an evaluation never sees its own question.
//
// Exclusion from the results leaves the corpus statistics (BM25's document
// frequencies, the LSA fit) with the question's own text in them; a
// [HeldOut] serves searches whose statistics leave given issues out too,
// which the ablation's honest variant uses.
//
// Every search emits one OpenTelemetry span named "retrieval" with the
// gen_ai retrieval attributes.
package retrieval
