package journal

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loomwork/loomwork/internal/stepdiff"
)

func goodRun(t *testing.T) *Run {
	t.Helper()
	runs, err := ReadJSONLFile(filepath.Join("..", "..", "replay", "testdata", "good.jsonl"))
	if err != nil || len(runs) != 1 {
		t.Fatalf("read good.jsonl: %v (%d runs)", err, len(runs))
	}
	return &runs[0]
}

// edited copies run with its events edited (the hash chain is not
// rebuilt: StepsOf reads content, not the chain).
func edited(run *Run, edit func(events []Event) []Event) *Run {
	cp := *run
	cp.Events = edit(slices.Clone(run.Events))
	return &cp
}

func TestStepsOfAJournaledRun(t *testing.T) {
	steps := StepsOf(goodRun(t))
	var got []string
	for _, s := range steps {
		got = append(got, s.Kind+" "+s.Name+" @"+s.Ref)
	}
	want := []string{
		"model scripted-bookkeeper @3", "tool search_policy @4",
		"model scripted-bookkeeper @7", "tool calculator @8",
		"model scripted-bookkeeper @11", "tool ledger_append @12", "tool ledger_append @15",
		"model scripted-bookkeeper @19",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("steps\n%q\nwant\n%q", got, want)
	}
	search := steps[1]
	if f, _ := search.Field(StepFieldArgsHash); f.Shown() != `{"query":"meals"}` || f.Value == f.Shown() {
		t.Fatalf("search arguments: compared %q, shown %q", f.Value, f.Shown())
	}
	if f, _ := search.Field(StepFieldDocuments); f.Value != "policy/meals" {
		t.Fatalf("search documents %q", f.Value)
	}
	if f, _ := steps[7].Field(StepFieldAnswer); f.Value == "" {
		t.Fatal("the last model call has no answer")
	}
	var effects string
	for _, f := range steps[5].Info {
		if f.Name == "effects" {
			effects = f.Value
		}
	}
	if effects != "1" {
		t.Fatalf("ledger_append effects %q, want 1", effects)
	}
}

func TestDiffRunsOfARunWithItselfIsIdentical(t *testing.T) {
	run := goodRun(t)
	d := DiffRuns(run, run)
	if !d.Identical() || d.Same != 8 {
		t.Fatalf("first divergence %d, %d same", d.First, d.Same)
	}
}

func TestDiffRunsSpeaksTheJournalsVocabulary(t *testing.T) {
	a := goodRun(t)
	// B asked the calculator something else: the call's arguments (and so
	// its hash), the model's request for it and the result differ.
	b := edited(a, func(ev []Event) []Event {
		for i := range ev {
			switch ev[i].Seq {
			case 8:
				ev[i].ArgsHash = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
				ev[i].Payload = json.RawMessage(`{"arguments":{"a":2,"b":1200,"op":"mul"},"id":"call_2","name":"calculator"}`)
			case 9:
				ev[i].Payload = json.RawMessage(`{"content":"2400"}`)
			}
		}
		return ev
	})
	d := DiffRuns(a, b)
	if d.First != 3 || d.Rows[3].Status != stepdiff.Changed {
		t.Fatalf("first divergence at row %d (%+v), want the calculator call (row 3)", d.First, d.Rows[d.First])
	}
	// The field is the one the replay's Compare names for these two events,
	// once the step number and call id (which differ between any two runs)
	// are set aside.
	ra, rb := RefOf(a.Events[7]), RefOf(b.Events[7])
	if field := Compare(ra, rb); field != StepFieldArgsHash {
		t.Fatalf("journal.Compare names %q", field)
	}
	var fields, codes []string
	for _, fd := range d.Rows[3].Diffs {
		fields, codes = append(fields, fd.Field), append(codes, fd.Code)
	}
	if !slices.Equal(fields, []string{StepFieldArgsHash, StepFieldResult}) || !slices.Equal(codes, []string{CodeMismatch, CodeResultDiffers}) {
		t.Fatalf("fields %v codes %v", fields, codes)
	}
	if fd := d.Rows[3].Diffs[0]; fd.A != `{"a":2,"b":1250,"op":"mul"}` || fd.B != `{"a":2,"b":1200,"op":"mul"}` {
		t.Fatalf("arguments shown %q / %q, want the arguments, not their hashes", fd.A, fd.B)
	}

	// A run that skipped the cash entry (seq 15-17) lacks one step, coded
	// as the replay codes a run that stops short.
	c := edited(a, func(ev []Event) []Event { return slices.Delete(ev, 14, 17) })
	d = DiffRuns(a, c)
	if d.OnlyA != 1 || d.OnlyB != 0 || d.Changed != 0 || d.Rows[d.First].Code != CodeMissing || d.Rows[d.First].A != 6 {
		t.Fatalf("skipped step: only-a %d, only-b %d, changed %d, first %+v", d.OnlyA, d.OnlyB, d.Changed, d.Rows[d.First])
	}
	d = DiffRuns(c, a)
	if d.OnlyB != 1 || d.Rows[d.First].Code != CodeExtra {
		t.Fatalf("extra step: %+v", d.Rows[d.First])
	}
}
