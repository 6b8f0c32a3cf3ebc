// Package a2atest serves an A2A server on loopback for tests: the
// handler needs the URL it is reached at (its Agent Card names it), which
// exists only once the listener is up.
package a2atest

import (
	"net/http/httptest"
	"testing"

	"github.com/loomwork/loomwork/agents/a2a"
)

// Serve starts s on a loopback port, stopped when t ends, and returns the
// test server (its URL is the agent's base URL).
func Serve(t testing.TB, s *a2a.Server) *httptest.Server {
	t.Helper()
	hs := httptest.NewUnstartedServer(nil)
	hs.Start()
	hs.Config.Handler = s.Handler(hs.URL)
	t.Cleanup(hs.Close)
	return hs
}
