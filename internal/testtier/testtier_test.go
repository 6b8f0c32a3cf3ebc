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
