package retrieval

import (
	"context"
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

func TestLogisticModelLearnsAndRoundTripsThroughJSON(t *testing.T) {
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
	// A model saved with other features is refused.
	data, _ := os.ReadFile(path)
	os.WriteFile(path, []byte(strings.Replace(string(data), `"bm25_title"`, `"bm25_titel"`, 1)), 0o644)
	if _, err := LoadLogisticModel(path); err == nil || !strings.Contains(err.Error(), "do not match") {
		t.Errorf("mismatched features accepted: %v", err)
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
