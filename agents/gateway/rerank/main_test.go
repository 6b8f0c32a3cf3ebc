package rerank_test

import (
	"testing"

	"go.uber.org/goleak"
)

// bleve (linked through retrieval, which the wiring test uses) starts its
// analysis workers at init.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"))
}
