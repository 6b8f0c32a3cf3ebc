package memory

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var epoch = time.Unix(1_700_000_000, 0).UTC()

// at is the reference design's abstract time t, in seconds.
func at(t float64) time.Time { return epoch.Add(time.Duration(t * float64(time.Second))) }

var scope = Scope{Tenant: "acme", Agent: "incident", Namespace: "checkout"}

func open(t *testing.T, path string) *Store {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "memory.db")
	}
	s, err := Open(context.Background(), Config{Path: path, MinSalience: 0.6, HalfLife: 100 * time.Second, MergeThreshold: 0.8, Clock: func() time.Time { return epoch }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

// referenceStore writes the reference design's four records.
func referenceStore(t *testing.T, s *Store) []Outcome {
	t.Helper()
	ctx := context.Background()
	var got []Outcome
	for _, r := range []Record{
		{Key: "proc-checkout", Kind: Procedural, Text: "When checkout times out, check the AuthService deploy first.", Salience: 0.82, SourceRuns: []string{"run-41"}, Written: at(0)},
		{Key: "ep-noise", Kind: Episodic, Text: "The user said hello twice.", Salience: 0.25, SourceRuns: []string{"run-41"}, Written: at(0)},
		{Key: "proc-checkout-again", Kind: Procedural, Text: "When checkout times out, check the AuthService deploy first!", Salience: 0.90, SourceRuns: []string{"run-42"}, Written: at(10)},
		{Key: "sem-deploy-812", Kind: Semantic, Text: "Deploy 812 changed AuthService connection pooling.", Salience: 0.68, SourceRuns: []string{"run-40"}, Written: at(0)},
	} {
		o, _, err := s.Write(ctx, scope, r)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, o)
	}
	return got
}

func TestReferenceWritesRetrievalAndForgetting(t *testing.T) {
	ctx := context.Background()
	s := open(t, "")
	if got := fmt.Sprint(referenceStore(t, s)); got != "[written rejected_low_salience merged written]" {
		t.Fatalf("write outcomes %s", got)
	}
	recs, err := s.Records(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, r := range recs {
		rows = append(rows, fmt.Sprintf("(%s %s %.2f %d)", r.Key, r.Kind, r.Salience, r.Hits))
	}
	if got := strings.Join(rows, " "); got != "(proc-checkout procedural 0.90 1) (sem-deploy-812 semantic 0.68 0)" {
		t.Fatalf("records %s", got)
	}
	hits, err := s.Retrieve(ctx, scope, "checkout times out after a deploy", 3, at(5))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, h := range hits {
		lines = append(lines, fmt.Sprintf("%.3f  %-20s %-10s %s", h.Score, h.Record.Key, h.Record.Kind, h.Record.Text[:46]))
	}
	want := "2.050  proc-checkout        procedural When checkout times out, check the AuthService\n" +
		"0.109  sem-deploy-812       semantic   Deploy 812 changed AuthService connection pool"
	if got := strings.Join(lines, "\n"); got != want {
		t.Fatalf("retrieval:\n%s\nwant:\n%s", got, want)
	}
	gone, err := s.Forget(ctx, scope, at(1000))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(gone) != "[proc-checkout sem-deploy-812]" {
		t.Fatalf("forgotten %v", gone)
	}
	if recs, _ := s.Records(ctx, scope); len(recs) != 0 {
		t.Fatalf("remaining %v", recs)
	}
}

func TestRetrievalNeverMutatesAndZeroOverlapIsNeverReturned(t *testing.T) {
	ctx := context.Background()
	s := open(t, "")
	referenceStore(t, s)
	before, _ := s.Records(ctx, scope)
	for range 3 {
		if _, err := s.Retrieve(ctx, scope, "checkout deploy", 5, at(5)); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := s.Records(ctx, scope)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("retrieval changed the store:\n%v\n%v", before, after)
	}
	if hits, _ := s.Retrieve(ctx, scope, "kubernetes", 5, at(5)); len(hits) != 0 {
		t.Fatalf("zero-overlap query returned %v", hits)
	}
	// Touch is the explicit use count: it changes rank, not salience.
	if err := s.Touch(ctx, scope, "sem-deploy-812"); err != nil {
		t.Fatal(err)
	}
	r, _ := s.Get(ctx, scope, "sem-deploy-812")
	if r.Hits != 1 || r.Salience != 0.68 || !r.Written.Equal(at(0)) {
		t.Fatalf("touch: %+v", r)
	}
}

func TestDecayLetsAFreshRecordBeatAStaleOne(t *testing.T) {
	ctx := context.Background()
	s := open(t, "")
	mustWrite(t, s, Record{Key: "old", Kind: Semantic, Text: "checkout service owner is team blue", Salience: 1.0, Written: at(0)})
	mustWrite(t, s, Record{Key: "new", Kind: Semantic, Text: "checkout owner team red since reorg", Salience: 0.7, Written: at(95)})
	hits, err := s.Retrieve(ctx, scope, "checkout service owner team", 2, at(100))
	if err != nil {
		t.Fatal(err)
	}
	if hits[0].Record.Key != "new" {
		t.Fatalf("stale record ranks first: %+v", hits)
	}
}

func mustWrite(t *testing.T, s *Store, r Record) Outcome {
	t.Helper()
	o, _, err := s.Write(context.Background(), scope, r)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestScopesDoNotMix(t *testing.T) {
	ctx := context.Background()
	s := open(t, "")
	mustWrite(t, s, Record{Key: "a", Kind: Semantic, Text: "deploy 812 changed pooling", Salience: 0.9, Written: at(0)})
	other := Scope{Tenant: "globex", Agent: "incident", Namespace: "checkout"}
	// The same text in another tenant is written, not merged.
	if o, _, err := s.Write(ctx, other, Record{Key: "b", Kind: Semantic, Text: "deploy 812 changed pooling", Salience: 0.9, Written: at(0)}); err != nil || o != Written {
		t.Fatalf("other tenant: %v %v", o, err)
	}
	if hits, _ := s.Retrieve(ctx, other, "deploy pooling", 5, at(0)); len(hits) != 1 || hits[0].Record.Key != "b" {
		t.Fatalf("other tenant sees %v", hits)
	}
	if _, err := s.Get(ctx, other, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cross-scope get: %v", err)
	}
	if _, err := s.Records(ctx, Scope{Tenant: "x"}); err == nil || !strings.Contains(err.Error(), "agent") {
		t.Fatalf("partial scope accepted: %v", err)
	}
}

func TestStoreIsDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s := open(t, path)
	referenceStore(t, s)
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, path)
	recs, err := s2.Records(context.Background(), scope)
	if err != nil || len(recs) != 2 || recs[0].Hits != 1 || fmt.Sprint(recs[0].SourceRuns) != "[run-41 run-42]" {
		t.Fatalf("reopened: %+v %v", recs, err)
	}
}

func TestWriteRejectsBadInput(t *testing.T) {
	s := open(t, "")
	for name, r := range map[string]Record{
		"no key":   {Kind: Semantic, Text: "x", Salience: 0.9},
		"kind":     {Key: "k", Kind: "working", Text: "x", Salience: 0.9},
		"salience": {Key: "k", Kind: Semantic, Text: "x", Salience: 1.5},
		"text":     {Key: "k", Kind: Semantic, Text: " ", Salience: 0.9},
	} {
		if _, _, err := s.Write(context.Background(), scope, r); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(Config{Path: ":memory:"}); err == nil {
		t.Error(":memory: accepted")
	}
}

func TestSameKeyMergesOrReplaces(t *testing.T) {
	ctx := context.Background()
	s := open(t, "")
	r := Record{Key: "k", Kind: Semantic, Text: "deploy 812 changed pooling", Salience: 0.7, Written: at(0)}
	mustWrite(t, s, r)
	if o := mustWrite(t, s, r); o != Merged {
		t.Fatalf("same record again: %s", o)
	}
	r.Text = "deploy 813 reverted the pooling change entirely"
	if o := mustWrite(t, s, r); o != Replaced {
		t.Fatalf("same key, new text: %s", o)
	}
	got, _ := s.Get(ctx, scope, "k")
	if got.Text != r.Text || got.Hits != 0 {
		t.Fatalf("after replace: %+v", got)
	}
}
