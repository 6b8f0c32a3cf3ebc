package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/loomwork/loomwork"

// ---------------------------------------------------------------------------
// The table. This is the source of truth for docs/architecture.md.
//
// A pattern names module packages by their path below the module root:
// "store/" is store and everything below it, "store" is the store package
// alone, "**" is every package of the module. Each package is governed by
// the row whose path is the longest pattern that matches it.
// ---------------------------------------------------------------------------

type room struct {
	path    string   // the packages this row governs
	rule    string   // the rule, as a violation names it
	imports []string // module packages its non-test code may import
	tests   []string // further module packages its _test.go files may import (testHelpers are allowed to every test)
}

var rooms = []room{
	// The span attribute keys and operation names: below everything.
	{path: "semconv/", rule: "semconv imports nothing in the module",
		imports: []string{"semconv/"}},
	// The span model, the store contract, the backends, the conformance
	// suite and store URLs. Storage knows no consumer; the embedded store
	// versions its schema with internal/sqlmigrate.
	{path: "store/", rule: "storage knows no consumer",
		imports: []string{"store/", "semconv/", "internal/sqlmigrate"},
		tests:   []string{"internal/chlocal/"}}, // a local ClickHouse for the backend tests
	// Case and trial formats and the shipped judged set: formats only (the
	// span type is inline in trials). A labels file is appended to under
	// internal/filelock's lock.
	{path: "datasets/", rule: "datasets are formats",
		imports: []string{"datasets/", "store", "semconv/", "internal/filelock"}},
	// Rollups, pricing, scoring, stats, gate, report: reads formats and the
	// store contract, never a backend.
	{path: "scorer/", rule: "the scorer reads formats, not backends",
		imports: []string{"scorer/", "datasets", "store", "semconv/", "internal/stepdiff"},
		tests:   []string{"store/sqlite"}}, // scorer/tracecases reads stored traces; there is no in-memory store
	// Search, the judged-set miner, ablation.
	{path: "retrieval/", rule: "retrieval knows no agent and no store",
		imports: []string{"retrieval/", "datasets", "semconv/"}},
	// Models, runtime, gateway, context layer, sandbox, the reference
	// agents and the journal. Agents reach the trace path only through OTLP.
	// scorer/stats is arithmetic without I/O: the evaluation harnesses
	// (the injection suite, the memory ablation) take their intervals from
	// it rather than keeping copies. The journal and the memory store
	// version their SQLite schemas with internal/sqlmigrate; the policy
	// audit log is appended to under internal/filelock's lock.
	{path: "agents/", rule: "agents reach the trace path only through OTLP",
		imports: []string{"agents/", "retrieval/", "datasets", "semconv/", "internal/stepdiff", "scorer/stats", "internal/sqlmigrate", "internal/filelock"}},
	// Grader backends: the sandbox and the gateway behind scorer/grade's
	// CodeRunner and Judge interfaces. The scorer stays free of I/O and of
	// agents; this row is the one place agents meet it.
	{path: "agents/graders/", rule: "grader backends implement the grade interfaces",
		imports: []string{"agents/", "datasets", "semconv/", "scorer/grade", "scorer/pricing"}},
	// The replay engine.
	{path: "replay/", rule: "replay drives agents, never the UI, the collector or a store",
		imports: []string{"replay/", "agents/", "datasets", "retrieval/", "semconv/"}},
	// OTLP in, spans to the store.
	{path: "collector/", rule: "the collector only writes the store",
		imports: []string{"collector/", "store/", "semconv/"}},
	// The UI reads formats; it never runs an agent, replays, ingests or
	// opens a backend itself.
	{path: "web/", rule: "the web UI reads formats and never runs an agent",
		imports: []string{"web/", "store", "scorer/", "datasets", "semconv/",
			"agents/journal",            // the journal format (not journaldb)
			"agents/llm",                // the message format journals carry
			"retrieval/ablation/result", // the ablation result format (result.Report), not the runner
			"internal/stepdiff",         // the step comparison scorer/tracediff and agents/journal produce
		},
		// Handler tests need a real store (there is no in-memory one); the
		// trace-page benchmarks open a 100k-span trace on both backends.
		tests: []string{"store/sqlite", "store/clickhouse"}},
	// Baseline generation, the baseline regression checks and the CI
	// recipe (baselines/ci: strict replay, a fresh scripted run, the gate).
	// Only cmd imports baselines, so it sits above replay and the scorer
	// and may use both: the recipe replays the committed journals and
	// gates a fresh run.
	{path: "baselines/", rule: "baselines run agents and score them",
		// suites and routines are tasks in the coordinator's queue
		// (baselines/suite, baselines/routines); the trace routine lists the
		// store contract's traces; the CI recipe (baselines/ci) sends the
		// fresh runs' traces through the real collector and its gen_ai
		// mapping to roll them up, so a collector regression fails it.
		imports: []string{"baselines/", "agents/", "datasets", "replay/", "retrieval/", "scorer/", "semconv/",
			"internal/coord", "store", "collector/"},
		// the trace routine's test lists traces from a real embedded store;
		// baselines/experiment's tests send a trial's spans through a real
		// collector into it (cmd wires both in the binary)
		tests: []string{"store/sqlite", "collector"}},
	// The coordinator (issue 22): tasks, leases, fences, receipts and
	// schedule occurrences in one SQLite file. A leaf on the standard
	// library, the SQLite driver and internal/sqlmigrate (its schema's
	// versions), so any room that runs long work can queue it without
	// pulling in agents.
	{path: "internal/coord/", rule: "coord is a leaf but for sqlmigrate",
		imports: []string{"internal/coord/", "internal/sqlmigrate"}},
	{path: "internal/chlocal/", rule: "chlocal is a leaf",
		imports: []string{"internal/chlocal/"}},
	// Projects and their API keys (issue 21): the keys file, hashed keys,
	// retention and content-capture settings. A leaf: the collector and
	// the UI take small interfaces that cmd fills with it.
	{path: "internal/projects/", rule: "projects is a leaf",
		imports: []string{"internal/projects/"}},
	// Step alignment and diff, shared by the two rooms that read steps and
	// may not import each other (scorer/tracediff from spans, agents/journal
	// from journals): a leaf on the standard library.
	{path: "internal/stepdiff/", rule: "stepdiff is a leaf",
		imports: []string{"internal/stepdiff/"}},
	{path: "internal/service/", rule: "service is a leaf",
		imports: []string{"internal/service/"}},
	// Schema versioning for every SQLite file Loomwork keeps (the trace
	// store, the journal, the memory store, the coordinator): numbered
	// migrations, PRAGMA user_version, the durable open. A leaf on the
	// standard library, below storage, agents and the coordinator.
	{path: "internal/sqlmigrate/", rule: "sqlmigrate is a leaf",
		imports: []string{"internal/sqlmigrate/"}},
	// A generated block of a doc (between two markers): the tests that
	// keep docs/ in step, and the commands that write a table into a doc.
	// A leaf on the standard library every test may use.
	{path: "internal/docblock/", rule: "docblock is a leaf",
		imports: []string{"internal/docblock/"}},
	// An exclusive advisory lock on an open file (flock(2)), for the files
	// several processes append to: the audit log (agents/policy), a labels
	// file (datasets). A leaf on the standard library.
	{path: "internal/filelock/", rule: "filelock is a leaf",
		imports: []string{"internal/filelock/"}},
	// Human tables fitted to a terminal's width (cut values, dropped
	// columns), for the commands' human output. A leaf on the standard
	// library.
	{path: "internal/texttable/", rule: "texttable is a leaf",
		imports: []string{"internal/texttable/"}},
	// Who listens on a TCP address (Linux /proc), so serve can name what
	// holds its port. A leaf on the standard library.
	{path: "internal/portowner/", rule: "portowner is a leaf",
		imports: []string{"internal/portowner/"}},
	{path: "internal/repotest/", rule: "repotest is tests only"},
	// The test suite's tiers (fast loop, suite, long): a leaf every test may use.
	{path: "internal/testtier/", rule: "testtier is a leaf",
		imports: []string{"internal/testtier/"}},
	{path: "internal/archtest/", rule: "archtest is tests only"},
	// Issue 17's reliability suite: it builds and runs loom-eval serve as a
	// subprocess and reads the stores back (the ClickHouse one through its
	// reader, to see what a user sees).
	{path: "internal/reliability/", rule: "reliability is tests only",
		tests: []string{"internal/chlocal", "store/clickhouse",
			"collector",    // the default memory limit, the bound row 1 checks
			"store",        // the cluster test reads through store.Store
			"store/sqlite", // counts what the embedded store holds (EachStoredSpan)
		}},
	{path: "scripts/", rule: "scripts are leaves",
		imports: []string{"scripts/"}},
	// The binary wires everything together.
	{path: "cmd/", rule: "cmd may import anything",
		imports: []string{"**"}, tests: []string{"**"}},
}

// testHelpers may be imported by any package's tests.
var testHelpers = []string{"store/storetest", "internal/chlocal/chtest", "datasets/datasettest", "internal/testtier", "internal/docblock"}

// helperLeaf may be imported by the test helpers' own code, whatever their
// rows say: it is a leaf on the standard library, and what it owns (the
// tiers, the repository's root) is what helpers need to know.
const helperLeaf = "internal/testtier/"

// neverImported: no package imports these, whatever its row says (a
// package's own external test aside).
var neverImported = []struct{ path, rule string }{
	{"cmd/", "nothing imports cmd"},
	{"internal/repotest/", "nothing imports a test-only room"},
	{"internal/archtest/", "nothing imports a test-only room"},
	{"internal/reliability/", "nothing imports a test-only room"},
}

// The scorer does no I/O: its non-test packages import none of these.
var (
	noIORoom = "scorer/"
	noIOStd  = []string{"os", "os/exec", "net", "net/http"}
	noIORule = "the scorer does no I/O"
)

// Link rules: the packages a row names must not link these, directly or
// transitively. Module paths are relative; a first element with a dot is
// another module, and a standard-library path is written whole.
var linkRules = []struct {
	rooms []string // the packages the rule governs (patterns as in the table)
	never []string // what their go list -deps may not contain
	rule  string
}{
	// The web UI linked the runtime, tiktoken, bleve and the journal's
	// SQLite through replay.Report.
	{rooms: []string{"web/"},
		never: []string{
			"github.com/blevesearch/",
			"github.com/pkoukk/tiktoken-go/",
			"agents/runtime",
			"agents/journal/journaldb",
		},
		rule: "the web UI links no runtime, tokenizer, search index or journal database"},
	// The journal port (journal.Journal) is any store's, not SQLite's
	// (issue 37): the runtime and the workflow, which consume it, link
	// neither database/sql nor the SQLite journal, so nothing they export
	// can name a *sql.Tx or a journaldb type. A tool that keeps tables in
	// the journal's database reaches them through the optional
	// journal.SQLTx capability, which names no database/sql type either.
	// (database/sql/driver, which uuid links for its Value method, is no
	// store and stays allowed.)
	{rooms: []string{"agents/runtime", "agents/workflow"},
		never: []string{"database/sql", "agents/journal/journaldb"},
		rule:  "the runtime and the workflow take a journal port that is not SQLite"},
	// The runner (loom-eval run's runs, moved out of cmd by issue 37) takes
	// the same port: cmd opens the SQLite journal and the approval queue
	// beside it and hands them over, so the runner can run on any store
	// (memjournal in its tests). Only the journal database is ruled out:
	// the memory store it recalls from keeps a SQLite file of its own.
	{rooms: []string{"agents/runner"},
		never: []string{"agents/journal/journaldb"},
		rule:  "the runner takes the journal port, not the journal database"},
}

// The folders whose import graph must have no cycle (any other top-level
// folder found is an error).
var folders = []string{"agents", "baselines", "cmd", "collector", "datasets", "internal",
	"replay", "retrieval", "scorer", "scripts", "semconv", "store", "web"}

// The attribute vocabulary has one room: no non-test .go file outside
// vocabularyRoom holds a string literal starting with one of these.
var (
	vocabularyRoom     = "semconv"
	vocabularyPrefixes = []string{"gen_ai.", "loomwork."}
	vocabularyRule     = "the attribute vocabulary lives in semconv"
)

// vocabularyExceptions are literals that share a prefix but are no span
// vocabulary. The literal rule skips exactly these strings in exactly these
// files; an exception that no longer occurs fails the test (delete it).
// Keep the list short: a span key belongs in semconv, not here.
var vocabularyExceptions = []struct{ file, literal, why string }{
	// JUnit names, not span attributes: CI consumers group test results by
	// them and the golden files pin them, so they keep the prefix.
	{"scorer/report/report.go", "loomwork.", "the JUnit suite name is \"loomwork.\" + the trials' source"},
	{"scorer/report/report.go", "loomwork.case", "the JUnit classname of a case's test case"},
	{"scorer/report/report.go", "loomwork.gate", "the JUnit classname of the gate's test case"},
	// The toy agent stands for an agent outside Loomwork: it imports no
	// Loomwork package (scripts are leaves) and spells the documented keys
	// as a user's agent does. Its GenAI keys come from OTel's semconv.
	{"scripts/toyagent/keys.go", "loomwork.case.id", "an outside agent marks its root span with semconv.AttrCaseID by name"},
	{"scripts/toyagent/keys.go", "loomwork.trial", "an outside agent's semconv.AttrTrial, by name"},
	{"scripts/toyagent/keys.go", "loomwork.citations", "an outside agent's semconv.AttrCitations, by name"},
	{"scripts/toyagent/keys.go", "loomwork.model.label", "the toy's model is scripted, and says so by semconv.AttrModelLabel's name"},
}

// ---------------------------------------------------------------------------
// The ratchet: violations that existed when this test was written. The test
// fails on a violation missing here and on an entry that no longer occurs:
// delete entries as the restructuring removes them, never add one for a new
// import (fix the import, or change the table above and the doc with it).
// An entry whose violation only moved (a package or file renamed) is
// renamed with it.
//
// Import entries read "from -> to (rule)"; "(test)" after the importer
// marks an import made only by its _test.go files. Literal entries count a
// file's distinct gen_ai./loomwork. literals (vocabularyExceptions aside).
// ---------------------------------------------------------------------------

type known struct{ edge, why string }

var knownViolations = []known{}

// ---------------------------------------------------------------------------
// The checks.
// ---------------------------------------------------------------------------

type violation struct {
	key    string // as in knownViolations
	detail string // what to look at
}

func TestImportArrowsPointDown(t *testing.T) {
	root := moduleRoot(t)
	g := loadGraph(t, root)
	lits := vocabularyLiterals(t, root)

	var vs []violation
	vs = append(vs, roomViolations(t, g)...)
	vs = append(vs, noIOViolations(g)...)
	vs = append(vs, linkViolations(g)...)
	vs = append(vs, folderCycles(t, g)...)
	vs = append(vs, subfolderCycles(g)...)
	vs = append(vs, lits...)

	current := map[string]violation{}
	for _, v := range vs {
		if _, dup := current[v.key]; !dup {
			current[v.key] = v
		}
	}
	listed := map[string]bool{}
	for _, k := range knownViolations {
		if listed[k.edge] {
			t.Errorf("knownViolations lists %q twice", k.edge)
		}
		listed[k.edge] = true
	}

	keys := make([]string, 0, len(current))
	for k := range current {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fresh := 0
	for _, k := range keys {
		if !listed[k] {
			fresh++
			t.Errorf("not allowed: %s\n\t%s", k, current[k].detail)
		}
	}
	var keep []known
	for _, k := range knownViolations {
		if _, ok := current[k.edge]; ok {
			keep = append(keep, k)
		} else {
			t.Errorf("knownViolations entry no longer occurs, delete it: %q", k.edge)
		}
	}
	if fresh > 0 {
		t.Logf("%d violation(s) above are new: fix the import (or the literal), or, if the table in this file is what is wrong, change it and docs/architecture.md together; if a known violation only moved, rename its entry", fresh)
	}
	if len(keep) != len(knownViolations) {
		var b strings.Builder
		b.WriteString("knownViolations without the entries that no longer occur:\n\nvar knownViolations = []known{\n")
		for _, k := range keep {
			fmt.Fprintf(&b, "\t{%q,\n\t\t%q},\n", k.edge, k.why)
		}
		b.WriteString("}\n")
		t.Log(b.String())
	}
}

// TestTheTableIsWellFormed keeps the table readable: one row per path, and
// every pattern it names is well-formed.
func TestTheTableIsWellFormed(t *testing.T) {
	seen := map[string]bool{}
	check := func(where, p string) {
		if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "//") || strings.Contains(p, "*") && p != "**" {
			t.Errorf("%s: bad pattern %q", where, p)
		}
	}
	for _, r := range rooms {
		if seen[r.path] {
			t.Errorf("two rows for %q", r.path)
		}
		seen[r.path] = true
		check("row path", r.path)
		if r.rule == "" {
			t.Errorf("row %q has no rule", r.path)
		}
		for _, p := range append(append([]string{}, r.imports...), r.tests...) {
			check("row "+r.path, p)
		}
	}
	for _, p := range testHelpers {
		check("testHelpers", p)
	}
	for _, n := range neverImported {
		check("neverImported", n.path)
	}
	for _, lr := range linkRules {
		if lr.rule == "" || len(lr.rooms) == 0 || len(lr.never) == 0 {
			t.Errorf("linkRules: %+v needs rooms, what they never link and a rule", lr)
		}
		for _, p := range append(append([]string{}, lr.rooms...), lr.never...) {
			check("linkRules "+lr.rule, p)
		}
	}
	for _, e := range vocabularyExceptions {
		if e.file == "" || e.why == "" || !strings.HasSuffix(e.file, ".go") || strings.HasSuffix(e.file, "_test.go") {
			t.Errorf("vocabularyExceptions: %+v needs a non-test .go file and a why", e)
		}
		if !slices.ContainsFunc(vocabularyPrefixes, func(p string) bool { return strings.HasPrefix(e.literal, p) }) {
			t.Errorf("vocabularyExceptions: %q has none of the prefixes %v: the rule would not see it anyway", e.literal, vocabularyPrefixes)
		}
	}
	for _, f := range folders {
		if strings.Contains(f, "/") {
			t.Errorf("folders: %q is not a top-level folder", f)
		}
	}
}

// matches reports whether pattern names pkg (both module-relative, or both
// full paths of another module).
func matches(pattern, pkg string) bool {
	if pattern == "**" {
		return true
	}
	if dir, ok := strings.CutSuffix(pattern, "/"); ok {
		return pkg == dir || strings.HasPrefix(pkg, pattern)
	}
	return pkg == pattern
}

func matchesAny(patterns []string, pkg string) bool {
	for _, p := range patterns {
		if matches(p, pkg) {
			return true
		}
	}
	return false
}

// roomOf is the row governing pkg (module-relative), or nil.
func roomOf(pkg string) *room {
	var best *room
	for i := range rooms {
		r := &rooms[i]
		if matches(r.path, pkg) && (best == nil || len(r.path) > len(best.path)) {
			best = r
		}
	}
	return best
}

func roomViolations(t *testing.T, g *graph) []violation {
	t.Helper()
	var vs []violation
	for _, p := range g.modulePkgs() {
		from := g.rel(p.ImportPath)
		r := roomOf(from)
		if r == nil {
			t.Errorf("%s belongs to no row of the table: add a row for its room (and a paragraph to docs/architecture.md)", from)
			continue
		}
		nonTest := map[string]bool{}
		for _, imp := range p.Imports {
			if !g.isModule(imp) {
				continue
			}
			to := g.rel(imp)
			nonTest[to] = true
			if v, bad := edgeViolation(r, from, to, false); bad {
				vs = append(vs, v)
			}
		}
		for _, imp := range append(append([]string{}, p.TestImports...), p.XTestImports...) {
			if !g.isModule(imp) {
				continue
			}
			to := g.rel(imp)
			if nonTest[to] {
				continue // judged as a non-test import
			}
			if v, bad := edgeViolation(r, from, to, true); bad {
				vs = append(vs, v)
			}
		}
	}
	return vs
}

func edgeViolation(r *room, from, to string, test bool) (violation, bool) {
	if from == to {
		return violation{}, false // an external test of its own package
	}
	name := from
	where := "its non-test code"
	if test {
		name = from + " (test)"
		where = "its _test.go files"
	}
	for _, n := range neverImported {
		if matches(n.path, to) && !matches(n.path, from) {
			return violation{
				key:    fmt.Sprintf("%s -> %s (%s)", name, to, n.rule),
				detail: fmt.Sprintf("%s imports %s in %s; no package imports %s", from, to, where, n.path),
			}, true
		}
	}
	if matchesAny(r.imports, to) {
		return violation{}, false
	}
	if matchesAny(testHelpers, from) && matches(helperLeaf, to) {
		return violation{}, false
	}
	allowed := strings.Join(r.imports, ", ")
	if allowed == "" {
		allowed = "nothing in the module"
	}
	if test {
		if matchesAny(testHelpers, to) || matchesAny(r.tests, to) {
			return violation{}, false
		}
		allowed += "; its tests also " + strings.Join(append(append([]string{}, r.tests...), testHelpers...), ", ")
	}
	return violation{
		key:    fmt.Sprintf("%s -> %s (%s)", name, to, r.rule),
		detail: fmt.Sprintf("%s imports %s in %s; row %q may import only %s", from, to, where, r.path, allowed),
	}, true
}

func noIOViolations(g *graph) []violation {
	var vs []violation
	for _, p := range g.modulePkgs() {
		from := g.rel(p.ImportPath)
		if !matches(noIORoom, from) {
			continue
		}
		for _, imp := range p.Imports {
			for _, std := range noIOStd {
				if imp == std {
					vs = append(vs, violation{
						key:    fmt.Sprintf("%s -> %s (%s)", from, imp, noIORule),
						detail: fmt.Sprintf("%s imports %s; reading files and the network belongs to cmd (pass bytes or an io.Reader in)", from, imp),
					})
				}
			}
		}
	}
	return vs
}

func linkViolations(g *graph) []violation {
	var vs []violation
	for _, lr := range linkRules {
		vs = append(vs, linkRuleViolations(g, lr.rooms, lr.never, lr.rule)...)
	}
	return vs
}

func linkRuleViolations(g *graph, rooms, never []string, rule string) []violation {
	var vs []violation
	for _, p := range g.modulePkgs() {
		from := g.rel(p.ImportPath)
		if !matchesAny(rooms, from) {
			continue
		}
		for _, pattern := range never {
			hit := func(path string) bool { return matches(pattern, g.rel(path)) }
			chain := g.shortestChain(p.ImportPath, hit)
			if chain == nil {
				continue
			}
			names := make([]string, len(chain))
			for i, c := range chain {
				names[i] = g.rel(c)
			}
			vs = append(vs, violation{
				key:    fmt.Sprintf("%s -> %s (%s)", from, pattern, rule),
				detail: fmt.Sprintf("go list -deps %s contains %s, through %s", from, names[len(names)-1], strings.Join(names, " -> ")),
			})
		}
	}
	return vs
}

func folderOf(rel string) string {
	f, _, _ := strings.Cut(rel, "/")
	return f
}

// subfolderOf is the folder two levels down ("agents/memory" for
// agents/memory/x), or the package itself when it is shallower.
func subfolderOf(rel string) string {
	first, rest, ok := strings.Cut(rel, "/")
	if !ok {
		return first
	}
	second, _, _ := strings.Cut(rest, "/")
	return first + "/" + second
}

func folderCycles(t *testing.T, g *graph) []violation {
	t.Helper()
	known := map[string]bool{}
	for _, f := range folders {
		known[f] = true
	}
	for _, p := range g.modulePkgs() {
		if from := g.rel(p.ImportPath); !known[folderOf(from)] {
			t.Errorf("%s is in top-level folder %q, which the folder list does not name", from, folderOf(from))
		}
	}
	return cyclesBetween(g, folderOf, "no folder imports a folder that imports it back")
}

// subfolderCycles finds ties one level further down, inside a top-level
// folder (agents/memory's ablation importing agents/research, which
// imports agents/memory, was one): the room table cannot see them, as one
// row governs both sides.
func subfolderCycles(g *graph) []violation {
	return cyclesBetween(g, subfolderOf, "no subfolder imports a subfolder that imports it back")
}

// cyclesBetween reports each cycle of the import graph between the folders
// that fold names, once, with one package edge for each hop.
func cyclesBetween(g *graph, fold func(string) string, rule string) []violation {
	// edges[a][b] is one package edge that makes folder a import folder b.
	edges := map[string]map[string]string{}
	for _, p := range g.modulePkgs() {
		from := g.rel(p.ImportPath)
		a := fold(from)
		for _, imp := range p.Imports {
			if !g.isModule(imp) {
				continue
			}
			to := g.rel(imp)
			b := fold(to)
			if a == b {
				continue
			}
			if edges[a] == nil {
				edges[a] = map[string]string{}
			}
			e := from + " -> " + to
			if old, ok := edges[a][b]; !ok || e < old {
				edges[a][b] = e
			}
		}
	}
	next := func(a string) []string {
		var out []string
		for b := range edges[a] {
			out = append(out, b)
		}
		sort.Strings(out)
		return out
	}
	// For each folder edge a -> b, the shortest way from b back to a.
	seen := map[string]bool{}
	var vs []violation
	for _, a := range sortedKeys(edges) {
		for _, b := range next(a) {
			back := bfs(b, a, next)
			if back == nil {
				continue
			}
			cycle := append([]string{a}, back...) // a, b, ..., a
			cycle = canonicalCycle(cycle)
			key := strings.Join(cycle, " -> ")
			if seen[key] {
				continue
			}
			seen[key] = true
			var hops []string
			for i := 0; i+1 < len(cycle); i++ {
				hops = append(hops, edges[cycle[i]][cycle[i+1]])
			}
			vs = append(vs, violation{
				key:    key + " (" + rule + ")",
				detail: "through " + strings.Join(hops, "; "),
			})
		}
	}
	return vs
}

// bfs is the shortest path from -> ... -> to (inclusive), or nil.
func bfs(from, to string, next func(string) []string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if n == to {
			var path []string
			for ; n != ""; n = prev[n] {
				path = append([]string{n}, path...)
			}
			return path
		}
		for _, m := range next(n) {
			if _, ok := prev[m]; !ok {
				prev[m] = n
				queue = append(queue, m)
			}
		}
	}
	return nil
}

// canonicalCycle rotates a closed cycle (first == last) to start at its
// smallest folder.
func canonicalCycle(c []string) []string {
	open := c[:len(c)-1]
	min := 0
	for i := range open {
		if open[i] < open[min] {
			min = i
		}
	}
	out := append(append([]string{}, open[min:]...), open[:min]...)
	return append(out, out[0])
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// vocabularyLiterals walks the module's source (reading every .go file, so
// that go test's cache sees edits) and reports the files outside
// vocabularyRoom whose non-test code spells an attribute name.
func vocabularyLiterals(t *testing.T, root string) []violation {
	t.Helper()
	fset := token.NewFileSet()
	type hit struct {
		line int
		lit  string
	}
	byFile := map[string][]hit{}
	excepted := func(rel, lit string) (int, bool) {
		for i, e := range vocabularyExceptions {
			if e.file == rel && e.literal == lit {
				return i, true
			}
		}
		return 0, false
	}
	exceptionUsed := make([]bool, len(vocabularyExceptions))
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		if strings.HasSuffix(rel, "_test.go") || matches(vocabularyRoom+"/", rel) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", rel, err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if i, ok := excepted(rel, s); ok {
				exceptionUsed[i] = true
				return true
			}
			for _, pre := range vocabularyPrefixes {
				if strings.HasPrefix(s, pre) {
					byFile[rel] = append(byFile[rel], hit{fset.Position(lit.Pos()).Line, s})
					break
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatalf("reading the module's source: %v", err)
	}
	if files < 100 {
		t.Fatalf("found only %d .go files under %s: is this the module root?", files, root)
	}
	for i, e := range vocabularyExceptions {
		if !exceptionUsed[i] {
			t.Errorf("vocabularyExceptions: %s no longer holds the literal %q: delete the exception", e.file, e.literal)
		}
	}
	var vs []violation
	for _, rel := range sortedKeys(byFile) {
		hits := byFile[rel]
		distinct := map[string]bool{}
		var where []string
		for _, h := range hits {
			distinct[h.lit] = true
			where = append(where, fmt.Sprintf("%s:%d %q", rel, h.line, h.lit))
		}
		vs = append(vs, violation{
			key:    fmt.Sprintf("%s -> %d %s literals (%s)", rel, len(distinct), strings.Join(vocabularyPrefixes, "/"), vocabularyRule),
			detail: strings.Join(where, "\n\t"),
		})
	}
	return vs
}

// ---------------------------------------------------------------------------
// The graph, from go list.
// ---------------------------------------------------------------------------

type listedPkg struct {
	ImportPath   string
	Standard     bool
	Module       *struct{ Path string }
	Imports      []string
	Deps         []string
	TestImports  []string
	XTestImports []string
	Error        *struct{ Err string }
	DepsErrors   []*struct{ Err string }
}

type graph struct {
	pkgs map[string]*listedPkg // every package go list -deps printed, by import path
}

func (g *graph) isModule(path string) bool {
	return path == module || strings.HasPrefix(path, module+"/")
}

// rel is a module package's path below the module root; other paths are
// returned whole.
func (g *graph) rel(path string) string {
	if path == module {
		return "(module root)"
	}
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r
	}
	return path
}

func (g *graph) modulePkgs() []*listedPkg {
	var out []*listedPkg
	for _, path := range sortedKeys(g.pkgs) {
		if g.isModule(path) {
			out = append(out, g.pkgs[path])
		}
	}
	return out
}

// shortestChain is the shortest non-test import chain from the package
// from to a package hit accepts, or nil.
func (g *graph) shortestChain(from string, hit func(string) bool) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if n != from && hit(n) {
			var chain []string
			for ; n != ""; n = prev[n] {
				chain = append([]string{n}, chain...)
			}
			return chain
		}
		p := g.pkgs[n]
		if p == nil {
			continue
		}
		for _, m := range p.Imports {
			if _, ok := prev[m]; !ok {
				prev[m] = n
				queue = append(queue, m)
			}
		}
	}
	return nil
}

// moduleRoot is the root of the module this test belongs to.
func moduleRoot(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to read the import graph: %v", err)
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatalf("go env GOMOD = %q: not inside the module", gomod)
	}
	f, err := os.Open(gomod)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			if m = strings.Trim(strings.TrimSpace(m), `"`); m != module {
				t.Fatalf("%s declares module %q, want %q", gomod, m, module)
			}
			return filepath.Dir(gomod)
		}
	}
	t.Fatalf("%s has no module line", gomod)
	return ""
}

func loadGraph(t *testing.T, root string) *graph {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-deps",
		"-json=ImportPath,Standard,Module,Imports,Deps,TestImports,XTestImports,Error,DepsErrors", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps -json ./... in %s: %v\n%s", root, err, stderr.String())
	}
	g := &graph{pkgs: map[string]*listedPkg{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		g.pkgs[p.ImportPath] = &p
	}
	n := 0
	for _, p := range g.modulePkgs() {
		n++
		if p.Error != nil {
			t.Errorf("go list: %s: %s (its imports cannot be checked)", g.rel(p.ImportPath), p.Error.Err)
		}
		for _, e := range p.DepsErrors {
			t.Errorf("go list: %s: dependency error: %s", g.rel(p.ImportPath), e.Err)
		}
	}
	if n < 20 {
		t.Fatalf("go list found only %d packages of %s in %s", n, module, root)
	}
	return g
}
