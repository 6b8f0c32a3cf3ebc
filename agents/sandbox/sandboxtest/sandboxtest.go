// Package sandboxtest is for the TestMain of packages whose tests run
// sandboxes: Init is sandbox.Init with the race detector's exit sleep
// turned off in the helper.
package sandboxtest

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/loomwork/loomwork/agents/sandbox"
)

// How the runner marks the helper process (agents/sandbox/helper.go; the
// sandbox package's tests check these are its values).
const (
	HelperArg0     = "loomwork-sandbox-init"
	HelperEnv      = "LOOMWORK_SANDBOX_INIT"
	HelperEnvValue = "1"
)

// quiet is the race detector option that drops its exit sleep.
const quiet = "atexit_sleep_ms=0"

// Init must be the first statement of TestMain, in place of sandbox.Init.
//
// A -race binary sleeps atexit_sleep_ms (1 s by default) before a
// successful exit, waiting for late race reports. The sandbox helper is the
// test binary itself and exits 0 after every run, so each sandbox run took
// a second longer than the run. The runner starts the helper with a fixed
// environment (the test's GORACE does not reach it), so in the helper Init
// adds the option and execs the binary again: same pid, namespaces, cgroup
// and pipes, race detection as before. In any other process it is
// sandbox.Init.
func Init() {
	if IsHelper() && !strings.Contains(os.Getenv("GORACE"), quiet) {
		env := append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" "+quiet))
		err := syscall.Exec("/proc/self/exe", os.Args, env)
		// Exec returned: carry on as the helper, with the sleep.
		fmt.Fprintln(os.Stderr, "sandbox helper: re-exec without the race detector's exit sleep:", err)
	}
	sandbox.Init()
}

// IsHelper reports whether this process is a sandbox's init helper.
func IsHelper() bool {
	return len(os.Args) > 0 && os.Args[0] == HelperArg0 && os.Getenv(HelperEnv) == HelperEnvValue
}
