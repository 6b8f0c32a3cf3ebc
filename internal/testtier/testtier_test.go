package testtier

import "testing"

func TestPickFollowsTheTier(t *testing.T) {
	t.Setenv(EnvLong, "")
	if got := Pick(3, 30); got != 3 {
		t.Fatalf("suite tier: Pick(3, 30) = %d, want 3", got)
	}
	t.Setenv(EnvLong, "1")
	if got := Pick(3, 30); got != 30 {
		t.Fatalf("long tier: Pick(3, 30) = %d, want 30", got)
	}
	if !Long() {
		t.Fatal("LOOMWORK_LONG=1 is not the long tier")
	}
}

func TestNoRaceFailsOnlyUnderRaceInTheSplit(t *testing.T) {
	t.Setenv(EnvRaceSplit, "1")
	ft := &fakeT{}
	NoRace(ft, "TestPickFollowsTheTier")
	if ft.failed != raceDetector {
		t.Fatalf("NoRace under the split with race %v: failed = %v", raceDetector, ft.failed)
	}
	t.Setenv(EnvRaceSplit, "")
	ft = &fakeT{}
	NoRace(ft, "TestPickFollowsTheTier")
	if ft.failed {
		t.Fatal("NoRace failed a test outside make test's split")
	}
}

// fakeT records a Fatal without stopping the test that owns it.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper()           {}
func (f *fakeT) Fatal(args ...any) { f.failed = true }
