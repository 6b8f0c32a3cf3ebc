package baselines_test

import (
	"testing"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/datasets"
)

// TestCommittedTrialsMatchTheirJournals checks the committed baseline
// trials the way loom-eval score and gate load them: from the repository
// root, every trial names a journal run, its label and model agree with
// that run, and every run is scripted.
func TestCommittedTrialsMatchTheirJournals(t *testing.T) {
	t.Chdir("..") // the trials name their journals from the repository root, as scripts/baselines.sh runs
	const path = "baselines/baseline.trials.jsonl"
	trials, err := datasets.LoadTrials(path)
	if err != nil {
		t.Fatal(err)
	}
	provs, err := journal.CheckProvenance(path, trials, journal.SearchDirs(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(trials) == 0 {
		t.Fatal("no baseline trials")
	}
	for i, p := range provs {
		if p.RunID == "" || p.Label != "scripted" || trials[i].ModelLabel != datasets.LabelScripted {
			t.Errorf("line %d: journal %s run %q says %s, trial says %q", trials[i].Line, p.File, p.RunID, p, trials[i].ModelLabel)
		}
	}
}
