package journal

import (
	"encoding/json"
	"testing"
)

func TestIdempotencyKeyDependsOnDurableDataOnly(t *testing.T) {
	a, _ := IdempotencyKey("run", 3, "call_1", json.RawMessage(`{"b":1,"a":[1,2]}`))
	b, _ := IdempotencyKey("run", 3, "call_1", json.RawMessage(`{ "a" : [1, 2], "b": 1 }`))
	c, _ := IdempotencyKey("run", 4, "call_1", json.RawMessage(`{"b":1,"a":[1,2]}`))
	if a != b {
		t.Fatalf("key depends on argument formatting: %s vs %s", a, b)
	}
	if a == c {
		t.Fatal("key does not depend on the step")
	}
	if _, err := IdempotencyKey("run", 1, "c", json.RawMessage(`{"a":`)); err == nil {
		t.Fatal("malformed arguments accepted")
	}
}

func TestCanonicalSortsKeysAndRejectsDuplicates(t *testing.T) {
	got, err := Canonical([]byte(` {"b": [1, 2.50, "x<y"], "a": {"d": null, "c": true}} `))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":{"c":true,"d":null},"b":[1,2.50,"x<y"]}`; string(got) != want {
		t.Fatalf("canonical = %s, want %s", got, want)
	}
	if _, err := Canonical([]byte(`{"a":1,"a":2}`)); err == nil {
		t.Fatal("duplicate key accepted")
	}
}
