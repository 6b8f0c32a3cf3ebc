package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, src string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrencyIsFoundInEachFormAndNotInOnceAlone(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"package p\nfunc f() { go f() }\n", "p.go:2 go statement"},
		{"package p\nvar c chan int\n", "p.go:2 channel"},
		{"package p\nimport \"sync\"\ntype s struct{ mu sync.Mutex }\n", "p.go:3 sync.Mutex"},
		{"package p\nimport s \"sync\"\nvar wg s.WaitGroup\n", "p.go:3 sync.WaitGroup"},
		{"package p\nimport \"sync/atomic\"\nvar n atomic.Int64\n", "p.go:2 imports sync/atomic"},
		{"package p\nimport \"sync\"\nvar once = sync.OnceValue(func() int { return 1 })\n", ""},
		{"package p\nfunc f() int { return 1 }\n", ""},
	} {
		dir := t.TempDir()
		write(t, dir, "p.go", tc.src)
		got, err := concurrency(dir, []string{"p.go"})
		if err != nil || got != tc.want {
			t.Errorf("%q: got %q (%v), want %q", tc.src, got, err, tc.want)
		}
	}
}

const testHeader = "package p\nimport (\n\t\"testing\"\n\t\"github.com/loomwork/loomwork/internal/testtier\"\n)\n"

func TestMarkedTestsNeedAnUnmarkedCoveringTestOfThePackage(t *testing.T) {
	for _, tc := range []struct{ src, want, err string }{
		{src: "func TestBig(t *testing.T) { testtier.NoRace(t, \"TestSmall\") }\nfunc TestSmall(t *testing.T) {}\n", want: "TestBig"},
		{src: "func TestBig(t *testing.T) { testtier.NoRace(t, \"\") }\n", want: "TestBig"},
		{src: "func TestBig(t *testing.T) { if true { testtier.NoRace(t, \"\") } }\n", want: ""}, // not the test's own statement
		{src: "func TestBig(t *testing.T) { testtier.NoRace(t, \"TestGone\") }\n", err: "covered by TestGone, which is not an unmarked test"},
		{src: "func TestA(t *testing.T) { testtier.NoRace(t, \"TestB\") }\nfunc TestB(t *testing.T) { testtier.NoRace(t, \"\") }\n", err: "covered by TestB, which is not an unmarked test"},
		{src: "func TestA(t *testing.T) { testtier.NoRace(t, \"TestA\") }\n", err: "covered by TestA"},
		{src: "var name = \"TestB\"\nfunc TestA(t *testing.T) { testtier.NoRace(t, name) }\nfunc TestB(t *testing.T) {}\n", err: "must be a string literal"},
	} {
		dir := t.TempDir()
		write(t, dir, "p_test.go", testHeader+tc.src)
		got, err := markedTests(dir, []string{"p_test.go"})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want it to say %q", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("%q: got %v (%v), want %q", tc.src, got, err, tc.want)
		}
	}
}

func TestShellAssignmentsSkipAndRunExactlyTheMarkedTests(t *testing.T) {
	s := &split{race: []string{"m/a", "m/b"}, plain: []string{"m/c"},
		marked: map[string][]string{"m/a": {"TestX", "TestY.Z"}}}
	var b strings.Builder
	s.writeShell(&b)
	want := "RACE_PKGS='m/a m/b'\nRACE_SKIP='^(TestX|TestY\\.Z)$'\nMARKED_PKGS='m/a'\nMARKED_RUN='^(TestX|TestY\\.Z)$'\nPLAIN_PKGS='m/c'\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// The module's own division holds: every mark names a covering test
// (divide refuses otherwise), and the packages under -race include the
// ones whose concurrency the suite exists to check.
func TestTheModuleDividesAndChecksItsConcurrentPackages(t *testing.T) {
	pkgs, err := list([]string{"github.com/loomwork/loomwork/..."})
	if err != nil {
		t.Fatal(err)
	}
	s, err := divide(pkgs)
	if err != nil {
		t.Fatal(err)
	}
	race := strings.Join(s.race, " ")
	for _, p := range []string{"collector", "collector/spool", "store/sqlite", "internal/coord", "internal/service", "baselines/suite", "agents/sandbox", "web"} {
		if !strings.Contains(race+" ", "github.com/loomwork/loomwork/"+p+" ") {
			t.Errorf("%s is not under -race", p)
		}
	}
}
