package storetest

import (
	"bytes"
	"embed"
	"encoding/json"
	"testing"

	"github.com/loomwork/loomwork/store"
)

//go:embed testdata/*.json
var fixtureFS embed.FS

// loadFixture decodes a JSON array of store.Span from testdata.
func loadFixture(t testing.TB, name string) []store.Span {
	t.Helper()
	b, err := fixtureFS.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatalf("read fixture %s: %v", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var spans []store.Span
	if err := dec.Decode(&spans); err != nil {
		t.Fatalf("decode fixture %s: %v", name, err)
	}
	return spans
}
