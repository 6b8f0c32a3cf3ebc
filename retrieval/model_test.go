package retrieval

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLSAIsDeterministicUnderASeed(t *testing.T) {
	texts := []string{
		"navigation tabs render sections below the header",
		"the header color is the primary color of the palette",
		"search index stemmer language for german words",
		"code blocks with line numbers and annotations",
		"admonitions are call-out boxes that can collapse",
		"instant loading intercepts internal links",
		"the palette toggle switches dark and light color schemes",
	}
	fit := func(seed uint64) [][]float32 {
		l, err := FitLSA(context.Background(), texts, LSAConfig{Dims: 4, MinDF: 1, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		v, err := l.Embed(context.Background(), []string{"dark color palette", "german search"})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if a, b := fit(3), fit(3); !reflect.DeepEqual(a, b) {
		t.Errorf("same seed, different embeddings:\n%v\n%v", a, b)
	}
}

func TestLSAPlacesRelatedTextsCloser(t *testing.T) {
	texts := []string{
		"color palette primary color header", "palette scheme dark light color toggle",
		"primary color accent color palette", "search index language stemmer",
		"search separator tokens index", "search highlighting results index",
	}
	l, err := FitLSA(context.Background(), texts, LSAConfig{Dims: 2, MinDF: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := l.Embed(context.Background(), []string{"dark color", "color toggle", "search stemmer"})
	if dot(v[0], v[1]) <= dot(v[0], v[2]) {
		t.Errorf("cos(dark color, color toggle)=%.3f not above cos(dark color, search stemmer)=%.3f", dot(v[0], v[1]), dot(v[0], v[2]))
	}
}

func trainedModel(t *testing.T) *LogisticModel {
	t.Helper()
	var ex []Example
	for i := 0; i < 40; i++ {
		f := make([]float64, len(FeatureNames))
		f[0] = float64(i%10) / 10
		f[5] = 0.5
		ex = append(ex, Example{QueryID: "q", Issue: 10 + i%4, Features: f, Label: i%10 >= 6})
	}
	m, err := TrainLogistic(ex, TrainConfig{Epochs: 500})
	if err != nil {
		t.Fatal(err)
	}
	m.TrainedOn = TrainingProvenance{Dataset: "tiny", CorpusSHA256: strings.Repeat("ab", 32), QrelsSHA256: strings.Repeat("cd", 32),
		Judgements: "silver", Fold: "gold", Seed: 1, Embedder: "lsa dims=8", Statistics: StatisticsHeldOut,
		CandidateDepth: 100, RerankDepth: 50, RRFK: 60}
	return m
}

func TestLogisticModelLearnsAndRoundTripsThroughJSON(t *testing.T) {
	m := trainedModel(t)
	hi, lo := make([]float64, len(FeatureNames)), make([]float64, len(FeatureNames))
	hi[0], lo[0] = 0.9, 0.1
	if m.Score(hi) <= m.Score(lo) {
		t.Errorf("model did not learn the separating feature: %.3f <= %.3f", m.Score(hi), m.Score(lo))
	}
	if !m.HasSeenIssue(11) || m.HasSeenIssue(99) {
		t.Errorf("trained_on_issues = %v", m.TrainedOnIssues)
	}
	path := filepath.Join(t.TempDir(), "m.json")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadLogisticModel(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("round trip changed the model")
	}
	// Without its provenance a model is not saved: it would not load.
	bare := *m
	bare.TrainedOn = TrainingProvenance{}
	if err := bare.Save(filepath.Join(t.TempDir(), "bare.json")); err == nil || !strings.Contains(err.Error(), `"trained_on.dataset"`) {
		t.Errorf("saved a model without provenance: %v", err)
	}
}

// A saved model is read strictly: each malformed file is refused with an
// error naming the file and the field, never loaded with a default.
func TestLoadLogisticModelNamesTheFileAndTheField(t *testing.T) {
	m := trainedModel(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := m.Save(good); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	edit := func(f func(o map[string]any)) string {
		var o map[string]any
		json.Unmarshal(data, &o)
		f(o)
		b, _ := json.MarshalIndent(o, "", "  ")
		return string(b)
	}
	prov := func(o map[string]any) map[string]any { return o["trained_on"].(map[string]any) }
	for _, c := range []struct {
		name, text, want string
	}{
		{"unknown field", edit(func(o map[string]any) { o["weight"] = 1 }), `unknown field "weight"`},
		{"unknown provenance field", edit(func(o map[string]any) { prov(o)["dataset_name"] = "x" }), `unknown field "trained_on.dataset_name"`},
		{"missing field", edit(func(o map[string]any) { delete(o, "bias") }), `missing field "bias"`},
		{"missing provenance", edit(func(o map[string]any) { delete(o, "trained_on") }), `missing field "trained_on"`},
		{"missing provenance field", edit(func(o map[string]any) { delete(prov(o), "qrels_sha256") }), `missing field "trained_on.qrels_sha256"`},
		{"null field", edit(func(o map[string]any) { o["weights"] = nil }), `missing field "weights"`},
		{"wrong type", edit(func(o map[string]any) { o["bias"] = "high" }), `field "bias": a JSON string is not a float64`},
		{"wrong element type", edit(func(o map[string]any) { o["weights"].([]any)[2] = true }), `field "weights`},
		{"wrong provenance type", edit(func(o map[string]any) { prov(o)["seed"] = "one" }), `field "trained_on.seed": a JSON string`},
		{"provenance not an object", edit(func(o map[string]any) { o["trained_on"] = "mkdocs" }), `field "trained_on": not a JSON object`},
		{"too few weights", edit(func(o map[string]any) { o["weights"] = o["weights"].([]any)[1:] }), `field "weights": 14 entries, want 15`},
		{"too few features", edit(func(o map[string]any) { o["features"] = o["features"].([]any)[1:] }), `field "features": 14 features, this build computes 15`},
		{"renamed feature", strings.Replace(string(data), `"bm25_title"`, `"bm25_titel"`, 1), `field "features[1]": "bm25_titel"`},
		{"zero std", edit(func(o map[string]any) { o["std"].([]any)[3] = 0 }), `field "std[3]" (bm25_body)`},
		{"version 1", edit(func(o map[string]any) { o["version"] = 1 }), `field "version": 1 is the format before training provenance`},
		{"version 3", edit(func(o map[string]any) { o["version"] = 3 }), `field "version": 3 is not supported (want 2)`},
		{"bad corpus hash", edit(func(o map[string]any) { prov(o)["corpus_sha256"] = "216f895c670d" }), `field "trained_on.corpus_sha256"`},
		{"bad statistics", edit(func(o map[string]any) { prov(o)["statistics"] = "some" }), `field "trained_on.statistics": "some"`},
		{"unsorted issues", edit(func(o map[string]any) { o["trained_on_issues"] = []int{12, 10} }), `field "trained_on_issues": must be sorted`},
		{"no training queries", edit(func(o map[string]any) { o["trained_on_queries"] = []string{} }), `field "trained_on_queries": empty`},
		{"trailing data", string(data) + "{}", "trailing data"},
		{"truncated", string(data[:len(data)/2]), "line "},
		{"not an object", "[1, 2]", "not a JSON object"},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".json")
		if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadLogisticModel(p)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: err = %v; want it to name %s and %q", c.name, err, p, c.want)
		}
	}
}

func TestTrainLogisticNeedsBothLabels(t *testing.T) {
	f := make([]float64, len(FeatureNames))
	if _, err := TrainLogistic([]Example{{Features: f}, {Features: f}}, TrainConfig{}); err == nil {
		t.Error("trained with no positive example")
	}
}

func TestProximityCountsDistinctTermsInAWindow(t *testing.T) {
	doc := strings.Fields("a b x x x x x x x x x x x x x x x x x c d")
	q := map[string]bool{"a": true, "b": true, "c": true, "d": true}
	if got := proximity(doc, q); got != 0.5 {
		t.Errorf("proximity = %v, want 0.5 (two of four terms together)", got)
	}
}
