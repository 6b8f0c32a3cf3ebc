package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cmd parses flags and wires; logic lives in packages. A function of cmd
// that outgrows this is doing a package's work (or several steps that want
// names of their own): split it, as runAblate and runRun were (flags in a
// struct of their own, their checks in a validate-style function, the
// configuration, the environment and the output in functions of their
// own), or move the logic into the package that owns its vocabulary.
var (
	shortFuncRoom     = "cmd"
	shortFuncMaxLines = 80 // from `func` to the closing brace, both included
	shortFuncRule     = fmt.Sprintf("cmd parses flags and wires: no function over %d lines", shortFuncMaxLines)
)

// TestCmdFunctionsAreShort parses every non-test .go file under cmd/ and
// fails naming each function (or method) longer than shortFuncMaxLines.
func TestCmdFunctionsAreShort(t *testing.T) {
	root := moduleRoot(t)
	long, files := longFunctions(t, filepath.Join(root, shortFuncRoom), root)
	if files < 10 {
		t.Fatalf("found only %d non-test .go files under %s/: is this the module root?", files, shortFuncRoom)
	}
	for _, f := range long {
		t.Errorf("%s: %s %d lines (%s)", f.where, f.name, f.lines, shortFuncRule)
	}
	if len(long) > 0 {
		t.Logf("split each function above into steps with names of their own, or move its logic into the package that owns it (see git show 02d8996)")
	}
}

type longFunc struct {
	where string // file:line of its func keyword, module-relative
	name  string // Name, or Recv.Name for a method
	lines int
}

// longFunctions walks dir (reading every .go file, so that go test's
// cache sees edits) and returns the functions of its non-test files over
// shortFuncMaxLines, in file and line order, and how many files it parsed.
func longFunctions(t *testing.T, dir, root string) ([]longFunc, int) {
	t.Helper()
	fset := token.NewFileSet()
	var long []longFunc
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != dir && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", rel, err)
		}
		files++
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			if n := end.Line - start.Line + 1; n > shortFuncMaxLines {
				long = append(long, longFunc{where: fmt.Sprintf("%s:%d", rel, start.Line), name: funcName(fd), lines: n})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	return long, files
}

// funcName is fd's name, with its receiver's type for a method
// ("Main.runRun").
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch x := typ.(type) {
	case *ast.Ident:
		return x.Name + "." + fd.Name.Name
	case *ast.IndexExpr: // a generic receiver, T[P]
		if id, ok := x.X.(*ast.Ident); ok {
			return id.Name + "." + fd.Name.Name
		}
	case *ast.IndexListExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return id.Name + "." + fd.Name.Name
		}
	}
	return fd.Name.Name
}
