package providertest

import (
	"fmt"
	"strings"
	"testing"
)

// CheckPrintsNoKey fails t when formatting client — a pointer, and the
// value it points to — with any of the usual verbs shows key.
func CheckPrintsNoKey[T any](t testing.TB, client *T, key string) {
	t.Helper()
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		if out := fmt.Sprintf(verb, client); strings.Contains(out, key) {
			t.Errorf("%s of the client printed the key: %q", verb, out)
		}
		if out := fmt.Sprintf(verb, *client); strings.Contains(out, key) {
			t.Errorf("%s of the client's value printed the key: %q", verb, out)
		}
	}
}
