// Package research is the reference agent that reads documentation and cites
// it. It runs on agents/runtime like any agent — a name, a system prompt and
// two tools — and knows nothing of the runtime's journal, context layer or
// spans:
//
//   - search_docs (query → top-k hits with ids, titles and snippets) searches
//     the retrieval service in-process; every search carries the run's
//     excluded issues (Task.Attributes "exclude_issues", see TaskAttributes)
//     in the query's own exclusion field, so an evaluation never retrieves
//     the issue its question came from. The evidence ids it reports (a
//     documentation page, or "issue:N") go on the runtime's retrieval span.
//   - read_doc (id → the section's text) refuses excluded issues too, so a
//     model cannot read its own question by guessing its id.
//
// The final answer cites ids in square brackets ([docs/page.md#anchor]);
// Citations extracts them at page granularity, the unit the judged set
// judges.
//
// Policy is the scripted stand-in for a model: a deterministic function of
// the conversation it is shown (search with the task text, read the top
// documentation hits, answer citing what it read). It never sees the judged
// page, and every answer it gives is labelled "scripted".
package research
