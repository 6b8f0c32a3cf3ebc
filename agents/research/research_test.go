package research_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loomwork/loomwork/datasets/datasettest"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/retrieval/judged"
)

// datasetDir is the repository's shipped judged set.
func datasetDir(t testing.TB) string { return datasettest.ShippedDir(t) }

var (
	indexOnce sync.Once
	index     *research.DatasetIndex
)

func sharedIndex(t *testing.T) *research.DatasetIndex {
	dir := datasetDir(t)
	indexOnce.Do(func() { index = &research.DatasetIndex{Dir: dir} })
	return index
}

func TestMain(m *testing.M) {
	code := m.Run()
	if index != nil {
		index.Close(context.Background())
	}
	os.Exit(code)
}

func TestCitationsAreExtractedAtPageGranularity(t *testing.T) {
	got := research.Citations("See [docs/setup/a.md#x] and [docs/setup/a.md#y], also [issue:12], not [http://x] or docs/b.md.")
	if strings.Join(got, ",") != "docs/setup/a.md,issue:12" {
		t.Fatalf("citations = %v", got)
	}
}

// TestResearchAgentEndToEndNeverRetrievesItsOwnIssue runs the agent with the
// scripted policy against the real index for every gold query of the shipped
// judged set (the baseline's research cases), journaled, traced and under the
// context layer, and checks that the query's own issue — and its
// duplicates — is never retrieved, read or cited.
func TestResearchAgentEndToEndNeverRetrievesItsOwnIssue(t *testing.T) {
	testtier.NoRace(t, "TestReadDocRefusesTheExcludedIssueWhateverTheModelAsks")
	testtier.Slow(t) // every gold query through the runtime, the real index and the o200k_base context layer
	ctx := context.Background()
	idx := sharedIndex(t)
	ds, err := judged.Load(idx.Dir, "")
	if err != nil {
		t.Fatal(err)
	}
	agent, err := research.New(research.Config{Index: idx})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := contextlayer.NewTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(t.TempDir(), "j.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(ctx)
	spec := research.DefaultContext()
	rt, err := runtime.New(runtime.Config{Model: research.Policy(research.PolicyConfig{Counter: tok}), Journal: j, TracerProvider: tp, Context: &spec})
	if err != nil {
		t.Fatal(err)
	}
	dups := ds.Duplicates()
	gold, retrievedJudged, citedJudged := 0, 0, 0
	for _, q := range ds.Queries {
		if len(q.Gold) == 0 {
			continue
		}
		gold++
		own := ownIssues(q.Issue, dups)
		res, err := rt.Run(ctx, agent, runtime.Task{RunID: q.ID, Input: q.Text, CaseID: q.ID, Attributes: research.TaskAttributes(q.Issue)})
		if err != nil {
			t.Fatalf("%s: %v", q.ID, err)
		}
		for _, d := range append(append([]string{}, res.Documents...), res.Citations...) {
			if own[d] {
				t.Errorf("%s: own issue %s was retrieved or cited", q.ID, d)
			}
		}
		if len(res.Documents) == 0 || res.Label != llm.LabelScripted {
			t.Fatalf("%s: documents %v, label %q", q.ID, res.Documents, res.Label)
		}
		// The answer cites only what the run read.
		evs, _ := j.Events(ctx, q.ID)
		read := map[string]bool{}
		for _, e := range evs {
			if e.Kind == journal.KindToolResult && e.Tool == "read_doc" {
				var tr journal.ToolResult
				json.Unmarshal(e.Payload, &tr)
				for _, d := range tr.Documents {
					read[d] = true
				}
			}
			if own[issueInText(e.Payload, own)] {
				t.Errorf("%s: seq %d (%s) mentions its own issue", q.ID, e.Seq, e.Kind)
			}
		}
		for _, c := range res.Citations {
			if !read[c] {
				t.Errorf("%s: cites %s, which it never read", q.ID, c)
			}
		}
		rel := q.Relevant(judged.Gold)
		if slices.ContainsFunc(res.Documents, func(d string) bool { return rel[d] > 0 }) {
			retrievedJudged++
		}
		if slices.ContainsFunc(res.Citations, func(d string) bool { return rel[d] > 0 }) {
			citedJudged++
		}
	}
	if gold < 10 {
		t.Fatalf("only %d gold queries", gold)
	}
	t.Logf("gold queries %d: judged page retrieved in %d, cited in %d", gold, retrievedJudged, citedJudged)

	// The trace carries retrieval documents, citations and the context layer.
	var sawRetrieval, sawCitations, sawContext bool
	for _, s := range rec.Ended() {
		a := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			a[kv.Key] = kv.Value
		}
		switch {
		case s.Name() == "retrieval search_docs" && len(a["gen_ai.retrieval.documents"].AsStringSlice()) > 0:
			sawRetrieval = true
		case s.Name() == "invoke_agent research" && a["loomwork.citations"].Type() == attribute.STRINGSLICE:
			sawCitations = true
		case strings.HasPrefix(s.Name(), "chat") && a["loomwork.context.tokens_after"].AsInt64() > 0 && a["loomwork.context.tokenizer"].AsString() == "o200k_base":
			sawContext = true
		}
	}
	if !sawRetrieval || !sawCitations || !sawContext {
		t.Fatalf("trace: retrieval documents %v, citations %v, context layer %v", sawRetrieval, sawCitations, sawContext)
	}
}

func ownIssues(n int, dups map[int][]int) map[string]bool {
	own := map[string]bool{fmt.Sprintf("issue:%d", n): true}
	for a, bs := range dups {
		for _, b := range bs {
			if a == n {
				own[fmt.Sprintf("issue:%d", b)] = true
			}
			if b == n {
				own[fmt.Sprintf("issue:%d", a)] = true
			}
		}
	}
	return own
}

// issueInText returns the first own-issue id that appears quoted in raw.
func issueInText(raw []byte, own map[string]bool) string {
	for id := range own {
		if strings.Contains(string(raw), `"`+id+`"`) {
			return id
		}
	}
	return ""
}

func TestReadDocRefusesTheExcludedIssueWhateverTheModelAsks(t *testing.T) {
	ctx := context.Background()
	idx := sharedIndex(t)
	ds, err := judged.Load(idx.Dir, "")
	if err != nil {
		t.Fatal(err)
	}
	agent, _ := research.New(research.Config{Index: idx})
	var readDoc, search runtime.Tool
	for _, tl := range agent.Tools {
		switch tl.Name {
		case "read_doc":
			readDoc = tl
		case "search_docs":
			search = tl
		}
	}
	q := ds.Queries[0]
	attrs := research.TaskAttributes(q.Issue)
	_, err = readDoc.Run(ctx, runtime.ToolInput{Arguments: json.RawMessage(fmt.Sprintf(`{"id":"issue:%d"}`, q.Issue)), TaskAttributes: attrs})
	if err == nil || !strings.Contains(err.Error(), "excluded") {
		t.Fatalf("read_doc of the own issue: %v", err)
	}
	// Without the exclusion the same issue is readable, and a search with
	// its own text finds it: the exclusion is what keeps it out.
	if _, err := readDoc.Run(ctx, runtime.ToolInput{Arguments: json.RawMessage(fmt.Sprintf(`{"id":"issue:%d"}`, q.Issue))}); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"query": q.Text})
	leaky, err := search.Run(ctx, runtime.ToolInput{Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	own := fmt.Sprintf("issue:%d", q.Issue)
	if !slices.Contains(leaky.Documents, own) {
		t.Fatalf("without exclusion the own issue should be found (documents %v)", leaky.Documents)
	}
	honest, err := search.Run(ctx, runtime.ToolInput{Arguments: args, TaskAttributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(honest.Documents, own) || strings.Contains(honest.Content, `"`+own+`"`) {
		t.Fatalf("with exclusion the own issue was returned: %v", honest.Documents)
	}
	if _, err := readDoc.Run(ctx, runtime.ToolInput{Arguments: json.RawMessage(`{"id":"docs/nope.md#x"}`)}); err == nil {
		t.Fatal("read_doc of an unknown id must fail")
	}
}
