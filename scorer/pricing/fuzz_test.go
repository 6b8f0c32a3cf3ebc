package pricing

import (
	"bytes"
	"math"
	"testing"
)

func FuzzParsePriceTable(f *testing.F) {
	f.Add(embedded)
	f.Add([]byte(`{"models":[{"model":"x","input":1,"output":2,"long_context":{"threshold_input_tokens":10,"input":2,"output":4}}]}`))
	f.Add([]byte(`{"models":[{"model":"x","input":-1,"output":2}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tab, err := Parse(bytes.NewReader(b), "fuzz")
		if err != nil {
			return
		}
		for _, name := range tab.Models() {
			m, _, ok := tab.Lookup(name)
			if !ok {
				t.Fatalf("model %q listed but not found", name)
			}
			c := m.Cost(Usage{Input: 1000, CacheRead: 10, CacheCreation: 10, Output: 100})
			if c < 0 || math.IsNaN(c) {
				t.Fatalf("model %q priced a call at %v", name, c)
			}
		}
	})
}
