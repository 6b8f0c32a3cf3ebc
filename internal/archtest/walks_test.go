package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docs/architecture.md walks a span and a journal event through the code,
// naming files and the functions, types and methods in them. A rename that
// forgets the doc leaves a newcomer reading about code that is gone (the
// walk once named mapSpan for months after it was deleted), so every name a
// step gives must still be there.

// walkExternal are names a walk gives that the module does not declare:
// they belong to a dependency.
var walkExternal = map[string]string{
	"TracerProvider": "the OpenTelemetry SDK's",
}

var (
	walkStep = regexp.MustCompile(`(?m)^\d+\. `)
	backtick = regexp.MustCompile("`([^`]+)`")
	goIdent  = regexp.MustCompile(`^[A-Za-z_]\w*(\.[A-Za-z_]\w*)?$`)
)

// TestArchitectureWalksNameCodeThatExists reads the walks of
// docs/architecture.md step by step: every file a step names must exist,
// and every Go name it gives — Name, Type.Method, pkg.Name, value.method —
// must be declared in the packages of the files the step names (pkg.Name:
// in a package of that name anywhere in the module).
func TestArchitectureWalksNameCodeThatExists(t *testing.T) {
	root := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	idx := indexDeclarations(t, root)
	steps := 0
	for _, walk := range walkSections(string(doc)) {
		for i, step := range walkStep.Split(walk.body, -1)[1:] {
			steps++
			checkWalkStep(t, root, idx, walk.title, i+1, step)
		}
	}
	if steps < 10 {
		t.Fatalf("found %d walk steps in docs/architecture.md: were the \"## Walk\" sections renamed?", steps)
	}
}

type walkSection struct{ title, body string }

// walkSections returns the "## Walk …" sections of the doc.
func walkSections(doc string) []walkSection {
	var out []walkSection
	for _, sec := range strings.Split(doc, "\n## ")[1:] {
		title, body, _ := strings.Cut(sec, "\n")
		if strings.HasPrefix(title, "Walk ") {
			out = append(out, walkSection{title, body})
		}
	}
	return out
}

func checkWalkStep(t *testing.T, root string, idx *declIndex, walk string, n int, step string) {
	t.Helper()
	text := strings.Join(strings.Fields(step), " ")
	var dirs []string
	var names []string
	lastDir := ""
	for _, m := range backtick.FindAllStringSubmatch(text, -1) {
		tok := m[1]
		switch {
		case strings.HasSuffix(tok, ".go") || strings.HasSuffix(tok, ".templ"):
			if strings.Contains(tok, "*") {
				continue // a pattern (*_templ.go)
			}
			if !strings.Contains(tok, "/") && lastDir != "" {
				tok = lastDir + "/" + tok // "cmd/loom-eval/run.go (and `replay.go`)"
			}
			lastDir = filepath.ToSlash(filepath.Dir(tok))
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(tok))); err != nil {
				t.Errorf("%s, step %d: names %s, which does not exist", walk, n, tok)
				continue
			}
			dirs = append(dirs, filepath.Dir(filepath.FromSlash(tok)))
		case goIdent.MatchString(tok):
			names = append(names, tok)
		}
	}
	for _, name := range names {
		if !idx.declares(dirs, name) {
			t.Errorf("%s, step %d: names `%s`, declared in none of the step's packages %v (nor, for pkg.Name, in a package of that name)", walk, n, name, dirs)
		}
	}
}

// declIndex holds, per package directory, the names declared there: each
// top-level func, type, var and const; each method and struct field as
// Type.Name and as Name; and per package name, the directories that use it.
type declIndex struct {
	byDir   map[string]map[string]bool
	pkgDirs map[string][]string
}

func (x *declIndex) declares(dirs []string, name string) bool {
	if _, ok := walkExternal[name]; ok {
		return true
	}
	first, rest, dotted := strings.Cut(name, ".")
	if !dotted {
		// A lower-case word alone is prose (a span name, a command), not a
		// Go name the walk asks the reader to find; camelCase is a name.
		if !token.IsExported(name) && strings.ToLower(name) == name {
			return true
		}
		return x.inAny(dirs, name)
	}
	for _, d := range x.pkgDirs[first] {
		if x.byDir[d][rest] {
			return true // pkg.Name
		}
	}
	// Type.Member, or a value's method (run.record): the member must be
	// declared in the step's packages, and an exported first part too.
	if token.IsExported(first) {
		return x.inAny(dirs, name)
	}
	return x.inAny(dirs, rest)
}

func (x *declIndex) inAny(dirs []string, name string) bool {
	for _, d := range dirs {
		if x.byDir[d][name] {
			return true
		}
	}
	return false
}

// indexDeclarations parses every non-test Go file of the module.
func indexDeclarations(t *testing.T, root string) *declIndex {
	t.Helper()
	x := &declIndex{byDir: map[string]map[string]bool{}, pkgDirs: map[string][]string{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		decl := x.byDir[rel]
		if decl == nil {
			decl = map[string]bool{}
			x.byDir[rel] = decl
			x.pkgDirs[f.Name.Name] = append(x.pkgDirs[f.Name.Name], rel)
		}
		addDecls(f, decl)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func addDecls(f *ast.File, decl map[string]bool) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			decl[d.Name.Name] = true
			if d.Recv != nil && len(d.Recv.List) == 1 {
				decl[recvType(d.Recv.List[0].Type)+"."+d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					decl[s.Name.Name] = true
					addMembers(s, decl)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						decl[n.Name] = true
					}
				}
			}
		}
	}
}

// addMembers records a struct's fields and an interface's methods.
func addMembers(s *ast.TypeSpec, decl map[string]bool) {
	var fields *ast.FieldList
	switch tt := s.Type.(type) {
	case *ast.StructType:
		fields = tt.Fields
	case *ast.InterfaceType:
		fields = tt.Methods
	default:
		return
	}
	for _, fl := range fields.List {
		for _, n := range fl.Names {
			decl[n.Name] = true
			decl[s.Name.Name+"."+n.Name] = true
		}
	}
}

// recvType is the name of a receiver's type: T, *T, T[P] and *T[P] give T.
func recvType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvType(e.X)
	case *ast.IndexExpr:
		return recvType(e.X)
	case *ast.IndexListExpr:
		return recvType(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}
