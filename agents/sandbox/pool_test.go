package sandbox

import "testing"

// The state after the command's last ')' decides; a command may itself
// contain ") Z".
func TestRunningStateReadsTheStateAfterTheCommand(t *testing.T) {
	for _, c := range []struct {
		stat string
		want bool
	}{
		{"4242 (helper) S 1 4242 0", true},
		{"4242 (helper) R 1 4242 0", true},
		{"4242 (helper) Z 1 4242 0", false},
		{"4242 (helper) X 1 4242 0", false},
		{"4242 (odd ) Z name) S 1", true},
		{"4242 (odd ) S name) Z 1", false},
		{"garbage", false},
		{"4242 (helper)", false},
	} {
		if got := runningState([]byte(c.stat)); got != c.want {
			t.Errorf("runningState(%q) = %v, want %v", c.stat, got, c.want)
		}
	}
}
