package gate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzParsePolicy holds Parse to three properties on any input:
//   - what it accepts is valid, and re-encodes to JSON that parses back to
//     the same policy (and encodes to the same bytes again);
//   - what it refuses it refuses with an error that names the input (the
//     file, through ParseNamed) and then says what is wrong, starting with
//     the key when there is one, never with an empty one;
//   - the verdict and the error text are the same every time (Validate
//     walks maps; its report must not depend on their order).
func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(`{"min_delta_lower":-0.02,"max_new_failures":0,"mcnemar_alpha":0.05,"must_pass":["a"],"min_pass_rate":0.8,"max_mean_cost_usd":0.05,"max_cost_increase_pct":20,"max_duration_increase_pct":50,"fail_on_missing":true,"confidence":0.9,"resamples":1000}`))
	f.Add([]byte(`{"regression":{"metric":"pass_rate","margin":0.05},"non_inferiority":{"metric":"mean_score","margin":0.1},"case_regressions":{"alpha":0.05,"correction":"bh","max":0},"scripted_exact":false,"max_detectable_drop":0.2,"must_pass":[]}`))
	f.Add([]byte(`{"regression":{"margin":-1},"non_inferiority":{"margin":2},"max_cost_increase_pct":-0,"must_pass":[" "]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"max_new_failures":-1}`))
	f.Add([]byte(`{"min_delta_lower":"x"}`))
	f.Add([]byte(`{"confidence":0.5} {}`))
	const name = "fuzz.json"
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseNamed(b, name)
		_, again := ParseNamed(b, name)
		if (err == nil) != (again == nil) || (err != nil && err.Error() != again.Error()) {
			t.Fatalf("two parses of %q disagree: %v / %v", b, err, again)
		}
		if err != nil {
			rest, ok := strings.CutPrefix(err.Error(), "policy "+name+": ")
			if !ok || rest == "" || strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, " ") {
				t.Fatalf("error for %q does not name the input and say what is wrong: %q", b, err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Parse accepted a policy Validate rejects: %v", err)
		}
		enc, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("accepted policy does not encode: %v", err)
		}
		q, err := Parse(enc)
		if err != nil {
			t.Fatalf("re-encoded policy does not parse: %v\ninput:   %q\nencoded: %s", err, b, enc)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("re-encoded policy parses to other rules:\ninput: %q\n got %+v\nwant %+v", b, q, p)
		}
		if enc2, _ := json.Marshal(q); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable:\n%s\n%s", enc, enc2)
		}
	})
}
