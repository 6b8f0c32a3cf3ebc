package testtier

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// modulePath is the module whose root ModuleRoot finds.
const modulePath = "github.com/loomwork/loomwork"

// ModuleRoot returns the repository's root: the nearest folder above the
// working directory the test binary started in (its package's folder)
// whose go.mod declares this module. It fails the test when there is none.
//
// It reads the working directory, never the source file's path from
// runtime.Caller: the suite builds with -trimpath (scripts/test.sh), so
// that a copy of the tree in another folder — the README tour's — reuses
// Go's build cache, and under -trimpath a source path names the module,
// not a folder.
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	root, err := FindModuleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	return root
}

// startRoot and startErr are FindModuleRoot's answer, from the working
// directory the test binary started in (its package's folder): found at
// package initialisation, before any test changes directory.
var startRoot, startErr = moduleRootAbove(os.Getwd())

// FindModuleRoot is ModuleRoot for code that has no testing.TB.
func FindModuleRoot() (string, error) { return startRoot, startErr }

func moduleRootAbove(dir string, err error) (string, error) {
	if err != nil {
		return "", fmt.Errorf("testtier: working directory: %w", err)
	}
	for {
		if declaresModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testtier: no go.mod of %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// declaresModule reports whether the go.mod at path is this module's.
func declaresModule(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == modulePath
		}
	}
	return false
}
