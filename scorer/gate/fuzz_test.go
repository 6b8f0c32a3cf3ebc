package gate

import "testing"

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(`{"min_delta_lower":-0.02,"max_new_failures":0,"mcnemar_alpha":0.05,"must_pass":["a"],"min_pass_rate":0.8,"max_mean_cost_usd":0.05,"max_cost_increase_pct":20,"max_duration_increase_pct":50,"fail_on_missing":true,"confidence":0.9,"resamples":1000}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"max_new_failures":-1}`))
	f.Add([]byte(`{"min_delta_lower":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Parse accepted a policy Validate rejects: %v", err)
		}
	})
}
