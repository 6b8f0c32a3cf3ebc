package retrieval_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loomwork/loomwork/retrieval"
	"github.com/loomwork/loomwork/retrieval/judged"
)

const tinyDir = "testdata/tiny"

type fixture struct {
	ds  *judged.Dataset
	svc *retrieval.Service
	exp *tracetest.InMemoryExporter
}

// startTiny starts a service over the tiny fixture dataset with a learned
// reranker trained on its silver queries.
func startTiny(t *testing.T, cacheDir string) fixture {
	t.Helper()
	ds, err := judged.Load(tinyDir, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ds.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	svc, err := retrieval.New(retrieval.Config{Corpus: c, CacheDir: cacheDir, Duplicates: ds.Duplicates(),
		LSA: retrieval.LSAConfig{Dims: 8, MinDF: 1, Seed: 7}, Tracer: tp.Tracer("test"), DataSourceID: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	var ex []retrieval.Example
	for _, q := range ds.Queries {
		if len(q.Gold) > 0 {
			continue
		}
		cands, err := svc.Candidates(ctx, q.Text, []int{q.Issue})
		if err != nil {
			t.Fatal(err)
		}
		rel := q.Relevant(judged.Silver)
		for _, c := range cands {
			ex = append(ex, retrieval.Example{QueryID: q.ID, Issue: q.Issue, Features: c.Features, Label: rel[c.Doc.Unit()] > 0})
		}
	}
	model, err := retrieval.TrainLogistic(ex, retrieval.TrainConfig{Epochs: 300})
	if err != nil {
		t.Fatal(err)
	}
	exp.Reset()
	return fixture{ds: ds, svc: svc.WithReranker(model), exp: exp}
}

func TestOwnIssueAndItsDuplicatesNeverAppearInAnyMode(t *testing.T) {
	f := startTiny(t, "")
	ctx := context.Background()
	dups := f.ds.Duplicates()
	leakedSomewhere := false
	for _, is := range f.ds.Issues {
		forbidden := map[string]bool{retrieval.IssueID(is.Number): true}
		for a, bs := range dups {
			for _, b := range bs {
				if a == is.Number {
					forbidden[retrieval.IssueID(b)] = true
				}
				if b == is.Number {
					forbidden[retrieval.IssueID(a)] = true
				}
			}
		}
		for _, m := range retrieval.AllModes {
			res, err := f.svc.Search(ctx, retrieval.Query{Text: is.QueryText(), Mode: m, K: 100, ExcludeIssues: []int{is.Number}})
			if err != nil {
				t.Fatalf("issue %d, %s: %v", is.Number, m, err)
			}
			for _, h := range res.Hits {
				if forbidden[h.ID] {
					t.Errorf("issue %d, mode %s: excluded document %s returned at rank %d", is.Number, m, h.ID, h.Rank)
				}
			}
			// The same query without exclusion finds its own issue: the
			// exclusion above is doing the work.
			leaky, err := f.svc.Search(ctx, retrieval.Query{Text: is.QueryText(), Mode: m, K: 100})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range leaky.Hits {
				if h.ID == retrieval.IssueID(is.Number) {
					leakedSomewhere = true
				}
			}
		}
	}
	if !leakedSomewhere {
		t.Fatal("no mode ever returned a query's own issue without exclusion; the test cannot tell exclusion works")
	}
}

func TestDuplicateExclusionWorksInBothDirections(t *testing.T) {
	f := startTiny(t, "")
	// 112 is marked a duplicate of 101: excluding either removes both.
	for _, ex := range []int{101, 112} {
		res, err := f.svc.Search(context.Background(), retrieval.Query{Text: "header primary color stays blue site.yml", Mode: retrieval.ModeBM25, K: 50, ExcludeIssues: []int{ex}})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(res.Excluded, ",") != "issue:101,issue:112" {
			t.Errorf("excluding %d removed %v, want issue:101 and issue:112", ex, res.Excluded)
		}
		for _, h := range res.Hits {
			if h.ID == "issue:101" || h.ID == "issue:112" {
				t.Errorf("excluding %d still returned %s", ex, h.ID)
			}
		}
	}
}

func TestEveryModeRanksTheJudgedPageForAPlainQuestion(t *testing.T) {
	f := startTiny(t, "")
	for _, m := range retrieval.AllModes {
		res, err := f.svc.Search(context.Background(), retrieval.Query{Text: "add line numbers to code blocks linenums", Mode: m, K: 5})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, h := range res.Hits {
			if h.Page == "docs/reference/code-blocks.md" {
				found = true
			}
		}
		if !found {
			t.Errorf("mode %s: code-blocks page not in top 5: %+v", m, res.Hits)
		}
	}
}

func TestSearchEmitsOneRetrievalSpanWithGenAIAttributes(t *testing.T) {
	f := startTiny(t, "")
	res, err := f.svc.Search(context.Background(), retrieval.Query{Text: "dark color scheme toggle", Mode: retrieval.ModeRRF, K: 3, ExcludeIssues: []int{109}})
	if err != nil {
		t.Fatal(err)
	}
	spans := f.exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("got %d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Name != "retrieval" {
		t.Errorf("span name %q, want retrieval", s.Name)
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, a := range s.Attributes {
		attrs[a.Key] = a.Value
	}
	if v := attrs["gen_ai.operation.name"].AsString(); v != "retrieval" {
		t.Errorf("gen_ai.operation.name = %q", v)
	}
	if v := attrs["gen_ai.retrieval.query.text"].AsString(); v != "dark color scheme toggle" {
		t.Errorf("query text = %q", v)
	}
	if v := attrs["gen_ai.data_source.id"].AsString(); v != "tiny" {
		t.Errorf("data source = %q", v)
	}
	var want []string
	for _, h := range res.Hits {
		want = append(want, h.ID)
	}
	if got := attrs["gen_ai.retrieval.documents"].AsStringSlice(); strings.Join(got, ",") != strings.Join(want, ",") || len(got) != 3 {
		t.Errorf("documents = %v, want the returned ids %v", got, want)
	}
	if got := attrs["loomwork.retrieval.excluded"].AsStringSlice(); strings.Join(got, ",") != "issue:109" {
		t.Errorf("excluded = %v", got)
	}
}

func TestFailedSearchMarksSpanAsError(t *testing.T) {
	f := startTiny(t, "")
	if _, err := f.svc.Search(context.Background(), retrieval.Query{Text: " ", Mode: retrieval.ModeBM25}); err == nil {
		t.Fatal("empty query accepted")
	}
	spans := f.exp.GetSpans()
	if len(spans) != 1 || spans[0].Status.Code.String() != "Error" {
		t.Fatalf("spans = %+v, want one error span", spans)
	}
}

func TestIndexIsRebuiltOnlyWhenTheCorpusChanges(t *testing.T) {
	dir := t.TempDir()
	ds, err := judged.Load(tinyDir, "")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ds.Corpus()
	start := func(c *retrieval.Corpus) retrieval.BuildInfo {
		svc, err := retrieval.New(retrieval.Config{Corpus: c, CacheDir: dir, LSA: retrieval.LSAConfig{Dims: 4, MinDF: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		res, err := svc.Search(context.Background(), retrieval.Query{Text: "navigation tabs", Mode: retrieval.ModeBM25, K: 1})
		if err != nil || len(res.Hits) != 1 {
			t.Fatalf("search after start: %v %v", res, err)
		}
		if err := svc.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		return svc.Info()
	}
	if !start(c).IndexRebuilt {
		t.Error("first start did not build the index")
	}
	if start(c).IndexRebuilt {
		t.Error("second start with the same corpus rebuilt the index")
	}
	docs := append([]retrieval.Document(nil), c.Docs()...)
	docs = append(docs, retrieval.IssueDocument(999, "new issue", "a new closed issue"))
	c2, err := retrieval.NewCorpus(docs)
	if err != nil {
		t.Fatal(err)
	}
	if !start(c2).IndexRebuilt {
		t.Error("a changed corpus did not rebuild the index")
	}
	// A crash between building and recording the hash forces a rebuild.
	if err := os.Remove(filepath.Join(dir, "bm25.hash")); err != nil {
		t.Fatal(err)
	}
	if !start(c2).IndexRebuilt {
		t.Error("a missing hash file did not rebuild the index")
	}
}

func TestSearchBeforeStartAndShutdownTwice(t *testing.T) {
	ds, _ := judged.Load(tinyDir, "")
	c, _ := ds.Corpus()
	svc, err := retrieval.New(retrieval.Config{Corpus: c})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Search(context.Background(), retrieval.Query{Text: "x"}); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Errorf("search before start: %v", err)
	}
	if err := svc.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
	if err := svc.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

func TestRerankWithoutRerankerIsAClearError(t *testing.T) {
	ds, _ := judged.Load(tinyDir, "")
	c, _ := ds.Corpus()
	svc, _ := retrieval.New(retrieval.Config{Corpus: c, LSA: retrieval.LSAConfig{Dims: 4, MinDF: 1}})
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer svc.Shutdown(context.Background())
	if _, err := svc.Search(context.Background(), retrieval.Query{Text: "tabs", Mode: retrieval.ModeRerank}); err == nil || !strings.Contains(err.Error(), "needs a reranker") {
		t.Errorf("rerank without reranker: %v", err)
	}
}

func TestHTTPSearch(t *testing.T) {
	f := startTiny(t, "")
	srv := httptest.NewServer(f.svc.Handler())
	defer srv.Close()
	post := func(body string) (int, map[string]any) {
		t.Helper()
		res, err := http.Post(srv.URL+"/v1/search", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
			t.Fatalf("answer is not JSON: %v", err)
		}
		return res.StatusCode, m
	}
	code, m := post(`{"query":"collapsible admonition","mode":"bm25","k":2,"exclude_issues":[105]}`)
	if code != 200 {
		t.Fatalf("status %d: %v", code, m)
	}
	hits := m["hits"].([]any)
	if len(hits) != 2 || hits[0].(map[string]any)["page"] != "docs/reference/admonitions.md" {
		t.Errorf("hits = %v", hits)
	}
	bad := map[string]string{
		`{"query":`:                           "invalid JSON",
		`{"query":"x","mod":"bm25"}`:          `unknown field "mod"`,
		`{"query":"x","k":"ten"}`:             `field "k"`,
		`{"query":""}`:                        "query: must not be empty",
		`{"query":"x","mode":"magic"}`:        `unknown mode "magic"`,
		`{"query":"x","k":5000}`:              "k: must be between 1 and 1000",
		`{"query":"x","exclude_issues":[-1]}`: "exclude_issues[0]",
		`{"query":"x","dense_weight":2}`:      "dense_weight",
		``:                                    "request body is empty",
		`{"query":"x"} {"query":"y"}`:         "trailing data",
	}
	for body, want := range bad {
		code, m := post(body)
		msg, _ := m["error"].(map[string]any)["message"].(string)
		if code != 400 || !strings.Contains(msg, want) {
			t.Errorf("body %q: status %d message %q, want 400 containing %q", body, code, msg, want)
		}
	}
	res, err := http.Get(srv.URL + "/v1/search")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET status %d, want 405", res.StatusCode)
	}
}

// FuzzDecodeSearchRequest: a body is either rejected with a message, or
// decoded into a request that re-encodes to JSON which decodes to the same
// request (nothing accepted is lost or invented); and a decoded request's
// query validates exactly when its fields are in range.
func FuzzDecodeSearchRequest(f *testing.F) {
	f.Add([]byte(`{"query":"x","mode":"rrf","k":3,"exclude_issues":[1,2],"rrf_k":10,"dense_weight":0.3}`))
	f.Add([]byte(`{"query":1}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"query":" ","k":-1,"dense_weight":2}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := retrieval.DecodeSearchRequest(body)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("a rejection without a message")
			}
			return
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", req, err)
		}
		back, err := retrieval.DecodeSearchRequest(again)
		if len(req.ExcludeIssues) == 0 {
			req.ExcludeIssues = nil // [] and absent mean the same and encode the same
		}
		if err != nil || !reflect.DeepEqual(back, req) {
			t.Fatalf("%s decoded to %+v, which round-trips to %+v (%v)", body, req, back, err)
		}
		q := retrieval.Query{Text: req.Query, Mode: retrieval.Mode(req.Mode), K: req.K, ExcludeIssues: req.ExcludeIssues, RRFK: req.RRFK, DenseWeight: req.DenseWeight}
		inRange := strings.TrimSpace(req.Query) != "" && req.K >= 0 && req.K <= retrieval.MaxK &&
			!(req.RRFK < 0 || math.IsNaN(req.RRFK) || math.IsInf(req.RRFK, 0)) &&
			(req.DenseWeight == nil || (*req.DenseWeight >= 0 && *req.DenseWeight <= 1))
		for _, n := range req.ExcludeIssues {
			inRange = inRange && n > 0
		}
		if req.Mode != "" {
			_, merr := retrieval.ParseMode(req.Mode)
			inRange = inRange && merr == nil
		}
		if verr := q.Validate(); (verr == nil) != inRange {
			t.Fatalf("%s: Validate() = %v, but the fields are in range: %v", body, verr, inRange)
		}
	})
}
