// Package result is the retrieval ablation's result format: the report
// `loom-eval ablate --format json` writes (and `--out DIR` saves as
// report.json), the metric names its rows carry, and its renderings as
// text, Markdown and the nDCG@10 SVG chart.
//
// It imports nothing of the search index: retrieval/ablation (the runner)
// produces a Report, and readers such as the web UI decode and render one
// without linking bleve or the retrieval service. Modes are stored by name
// (retrieval.Mode's string value), so a result names the modes it was run
// with even when the reader does not know them.
package result
