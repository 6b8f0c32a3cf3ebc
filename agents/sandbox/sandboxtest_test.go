package sandbox_test

import (
	"testing"

	"github.com/loomwork/loomwork/agents/sandbox"
	"github.com/loomwork/loomwork/agents/sandbox/sandboxtest"
)

// sandboxtest recognises the helper by the markers the runner sets; if they
// drift, its Init would silently stop finding the helper.
func TestSandboxtestKnowsTheHelperMarkers(t *testing.T) {
	if sandboxtest.HelperArg0 != sandbox.HelperArg0ForTest || sandboxtest.HelperEnv != sandbox.HelperEnvForTest ||
		sandboxtest.HelperEnvValue != sandbox.HelperEnvValueForTest {
		t.Fatalf("sandboxtest has %q %s=%s, the runner sets %q %s=%s",
			sandboxtest.HelperArg0, sandboxtest.HelperEnv, sandboxtest.HelperEnvValue,
			sandbox.HelperArg0ForTest, sandbox.HelperEnvForTest, sandbox.HelperEnvValueForTest)
	}
}
