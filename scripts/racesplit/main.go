// Command racesplit divides the module's packages for make test's two
// passes (docs/testing.md, "Race where there is concurrency"):
//
//   - under -race: every package whose own (non-test) code is concurrent —
//     it has a go statement, a channel, or uses sync/atomic or a sync
//     lock, wait group, condition, map or pool — less the tests in it
//     marked testtier.NoRace;
//   - without -race: every other package, and those marked tests.
//
// The race detector finds races in the code a test runs concurrently; a
// package with no concurrency of its own gains nothing from it and pays
// its five- to ten-fold slowdown. What packages import is race-checked
// in their own tests.
//
//	go run ./scripts/racesplit ./...
//
// prints shell assignments scripts/test.sh evaluates: RACE_PKGS,
// RACE_SKIP (a -skip pattern), MARKED_PKGS, MARKED_RUN (a -run pattern)
// and PLAIN_PKGS. With -table it prints the division for people instead.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// pkg is what `go list -json` says of a package.
type pkg struct {
	ImportPath   string
	Dir          string
	GoFiles      []string
	TestGoFiles  []string
	XTestGoFiles []string
}

// split is the division of the packages.
type split struct {
	race   []string            // packages run under -race
	plain  []string            // packages run without it
	why    map[string]string   // race package → the first concurrent construct found, "file:line what"
	marked map[string][]string // race package → its tests marked NoRace
}

func main() {
	table := flag.Bool("table", false, "print the division for people, not shell assignments")
	flag.Parse()
	pkgs, err := list(flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "racesplit:", err)
		os.Exit(2)
	}
	s, err := divide(pkgs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "racesplit:", err)
		os.Exit(2)
	}
	if *table {
		s.writeTable(os.Stdout)
		return
	}
	s.writeShell(os.Stdout)
}

func list(patterns []string) ([]pkg, error) {
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	cmd := exec.Command("go", append([]string{"list", "-json"}, patterns...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

func divide(pkgs []pkg) (*split, error) {
	s := &split{why: map[string]string{}, marked: map[string][]string{}}
	for _, p := range pkgs {
		if len(p.TestGoFiles)+len(p.XTestGoFiles) == 0 {
			continue // nothing to run
		}
		why, err := concurrency(p.Dir, p.GoFiles)
		if err != nil {
			return nil, err
		}
		if why == "" {
			s.plain = append(s.plain, p.ImportPath)
			continue
		}
		s.race = append(s.race, p.ImportPath)
		s.why[p.ImportPath] = why
		marked, err := markedTests(p.Dir, append(append([]string{}, p.TestGoFiles...), p.XTestGoFiles...))
		if err != nil {
			return nil, err
		}
		if len(marked) > 0 {
			s.marked[p.ImportPath] = marked
		}
	}
	return s, nil
}

// syncTypes are the sync package's names whose use means shared state
// (sync.Once and its kin alone do not: they make lazy set-up safe, and
// share nothing else).
var syncTypes = map[string]bool{"Mutex": true, "RWMutex": true, "WaitGroup": true, "Cond": true, "Map": true, "Pool": true}

// concurrency returns the first concurrent construct in the files, as
// "file:line what", or "" when there is none.
func concurrency(dir string, files []string) (string, error) {
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return "", err
		}
		if why := concurrentIn(fset, f); why != "" {
			return why, nil
		}
	}
	return "", nil
}

func concurrentIn(fset *token.FileSet, f *ast.File) string {
	syncName := ""
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		switch path {
		case "sync/atomic":
			return at(fset, imp.Pos(), "imports sync/atomic")
		case "sync":
			syncName = "sync"
			if imp.Name != nil {
				syncName = imp.Name.Name
			}
		}
	}
	var why string
	ast.Inspect(f, func(n ast.Node) bool {
		if why != "" {
			return false
		}
		switch n := n.(type) {
		case *ast.GoStmt:
			why = at(fset, n.Pos(), "go statement")
		case *ast.ChanType:
			why = at(fset, n.Pos(), "channel")
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && syncName != "" && x.Name == syncName && syncTypes[n.Sel.Name] {
				why = at(fset, n.Pos(), "sync."+n.Sel.Name)
			}
		}
		return true
	})
	return why
}

func at(fset *token.FileSet, pos token.Pos, what string) string {
	p := fset.Position(pos)
	return fmt.Sprintf("%s:%d %s", filepath.Base(p.Filename), p.Line, what)
}

// markedTests returns the top-level tests whose own statements call
// testtier.NoRace, and refuses a mark whose coveredBy is not an unmarked
// top-level test of the package.
func markedTests(dir string, files []string) ([]string, error) {
	fset := token.NewFileSet()
	tests := map[string]bool{}
	covered := map[string]string{} // marked test → its coveredBy
	where := map[string]string{}
	for _, name := range files {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			tests[fn.Name.Name] = true
			for _, st := range fn.Body.List {
				if by, ok, err := noRaceCall(st); ok || err != nil {
					if err != nil {
						return nil, fmt.Errorf("%s: %s: %w", fset.Position(st.Pos()), fn.Name.Name, err)
					}
					covered[fn.Name.Name] = by
					where[fn.Name.Name] = fset.Position(st.Pos()).String()
					break
				}
			}
		}
	}
	var out []string
	for t, by := range covered {
		if _, marked := covered[by]; by != "" && (marked || !tests[by]) {
			return nil, fmt.Errorf("%s: %s is marked NoRace, covered by %s, which is not an unmarked test of the package", where[t], t, by)
		}
		out = append(out, t)
	}
	sort.Strings(out)
	return out, nil
}

// noRaceCall reports whether st is a call testtier.NoRace(t, "coveredBy")
// and returns coveredBy; a call whose coveredBy is not a string literal
// is an error.
func noRaceCall(st ast.Stmt) (coveredBy string, ok bool, err error) {
	es, isExpr := st.(*ast.ExprStmt)
	if !isExpr {
		return "", false, nil
	}
	call, isCall := es.X.(*ast.CallExpr)
	if !isCall {
		return "", false, nil
	}
	sel, isSel := call.Fun.(*ast.SelectorExpr)
	if !isSel || sel.Sel.Name != "NoRace" {
		return "", false, nil
	}
	if x, isIdent := sel.X.(*ast.Ident); !isIdent || x.Name != "testtier" {
		return "", false, nil
	}
	if len(call.Args) != 2 {
		return "", true, errors.New("testtier.NoRace takes the test and the covering test's name")
	}
	lit, isLit := call.Args[1].(*ast.BasicLit)
	if !isLit || lit.Kind != token.STRING {
		return "", true, errors.New("testtier.NoRace's coveredBy must be a string literal")
	}
	by, err := strconv.Unquote(lit.Value)
	return by, true, err
}

// anchored is a -run/-skip pattern matching exactly these top-level
// tests ("^$" when there are none).
func anchored(tests []string) string {
	if len(tests) == 0 {
		return "^$"
	}
	q := make([]string, len(tests))
	for i, t := range tests {
		q[i] = regexp.QuoteMeta(t)
	}
	return "^(" + strings.Join(q, "|") + ")$"
}

func (s *split) markedAll() (pkgs, tests []string) {
	seen := map[string]bool{}
	for _, p := range s.race {
		if m := s.marked[p]; len(m) > 0 {
			pkgs = append(pkgs, p)
			for _, t := range m {
				if !seen[t] {
					seen[t] = true
					tests = append(tests, t)
				}
			}
		}
	}
	sort.Strings(tests)
	return pkgs, tests
}

func (s *split) writeShell(w io.Writer) {
	mp, mt := s.markedAll()
	q := func(xs []string) string { return "'" + strings.Join(xs, " ") + "'" }
	fmt.Fprintf(w, "RACE_PKGS=%s\n", q(s.race))
	fmt.Fprintf(w, "RACE_SKIP='%s'\n", anchored(mt))
	fmt.Fprintf(w, "MARKED_PKGS=%s\n", q(mp))
	fmt.Fprintf(w, "MARKED_RUN='%s'\n", anchored(mt))
	fmt.Fprintf(w, "PLAIN_PKGS=%s\n", q(s.plain))
}

func (s *split) writeTable(w io.Writer) {
	fmt.Fprintf(w, "under -race (%d packages: their own code is concurrent):\n", len(s.race))
	for _, p := range s.race {
		fmt.Fprintf(w, "  %-60s %s\n", p, s.why[p])
		if m := s.marked[p]; len(m) > 0 {
			fmt.Fprintf(w, "  %-60s   without -race: %s\n", "", strings.Join(m, ", "))
		}
	}
	fmt.Fprintf(w, "without -race (%d packages: no concurrency of their own):\n", len(s.plain))
	for _, p := range s.plain {
		fmt.Fprintf(w, "  %s\n", p)
	}
}
