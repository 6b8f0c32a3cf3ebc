package ablation

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/retrieval"
	"github.com/loomwork/loomwork/retrieval/ablation/result"
	"github.com/loomwork/loomwork/retrieval/judged"
)

// WriteFiles writes the report as JSON, Markdown and chart, and the gold
// reranker as a reranker.json that loads back as the model the run trained;
// a run that trained none (it scored a saved one) writes no reranker.json.
func TestWriteFilesWritesTheReportAndTheTrainedReranker(t *testing.T) {
	n := len(retrieval.FeatureNames)
	vec := func(x float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = x
		}
		return v
	}
	sha := strings.Repeat("ab", 32)
	gold := &retrieval.LogisticModel{Version: retrieval.ModelVersion, Features: append([]string(nil), retrieval.FeatureNames...),
		Mean: vec(0.5), Std: vec(1), Weights: vec(2), Bias: -1, TrainedOnQueries: []string{"q1"}, TrainedOnIssues: []int{3},
		Examples: 4, Positives: 1, Epochs: 5, L2: 0.1, LearningRate: 0.2, FinalLoss: 0.3,
		TrainedOn: retrieval.TrainingProvenance{Dataset: "d", CorpusSHA256: sha, QrelsSHA256: sha, Judgements: "silver", Fold: "gold", Seed: 7,
			Embedder: "lsa dims=8", Statistics: retrieval.StatisticsHeldOut, CandidateDepth: 100, RerankDepth: 50, RRFK: 60}}
	rep := &Report{Dataset: "tiny", Environment: map[string]string{"machine": "test"},
		Reranker: &result.RerankInfo{Statistics: "held-out", GoldModel: (*result.RerankerModel)(gold)}}
	dir := filepath.Join(t.TempDir(), "out")
	written, err := WriteFiles(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range written {
		names = append(names, strings.TrimPrefix(p, dir+string(filepath.Separator)))
	}
	if want := []string{"report.json", "report.md", "ndcg.svg", "reranker.json"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("written %v, want %v", names, want)
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil || back.Dataset != "tiny" || back.Environment["machine"] != "test" {
		t.Fatalf("report.json: %v\n%s", err, data)
	}
	loaded, err := retrieval.LoadLogisticModel(filepath.Join(dir, "reranker.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(loaded, gold) {
		t.Fatalf("reranker.json loads as %+v, want %+v", loaded, gold)
	}

	rep.Reranker.GoldModel = nil
	again := t.TempDir()
	written, err = WriteFiles(again, rep)
	if err != nil || len(written) != 3 {
		t.Fatalf("without a trained reranker: %v, %v", written, err)
	}
	if _, err := os.Stat(filepath.Join(again, "reranker.json")); !os.IsNotExist(err) {
		t.Fatalf("reranker.json without a trained reranker: %v", err)
	}
}

// The environment names the machine, the toolchain, the load given, the
// corpus the run searched and how its index and dense model were built.
func TestEnvironmentDescribesTheRun(t *testing.T) {
	ds, err := judged.Load("../testdata/tiny", "")
	if err != nil {
		t.Fatal(err)
	}
	corpus, err := ds.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	load := LoadAverage()
	if load != "unknown" && !strings.HasPrefix(load, "load average ") {
		t.Fatalf("LoadAverage() = %q", load)
	}
	env := Environment(load, "LSA (test)", ds, corpus, retrieval.BuildInfo{IndexRebuilt: true, IndexTime: 1500 * time.Microsecond})
	want := map[string]string{
		"load":     load,
		"embedder": "LSA (test)",
		"go":       runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		"corpus": fmt.Sprintf("%d documents (%d doc sections, %d issues), sha256 %s…",
			corpus.Len(), corpus.Len()-len(ds.Issues), len(ds.Issues), corpus.Hash()[:12]),
		"bm25": "bleve v2.6.3, scoring model bm25, index built in 2ms",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if !strings.Contains(env["machine"], " cores") || !strings.Contains(env["dense fit"], ", embed corpus ") || len(env) != 7 {
		t.Errorf("environment %v", env)
	}
}
