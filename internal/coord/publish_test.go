package coord

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gitRemote is a Remote over a real Git repository's branch.
type gitRemote struct{ dir, branch string }

func (g gitRemote) Head(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "-C", g.dir, "rev-parse", "refs/heads/"+g.branch).Output()
	return strings.TrimSpace(string(out)), err
}

func (g gitRemote) IsAncestor(ctx context.Context, a, b string) (bool, error) {
	err := exec.CommandContext(ctx, "git", "-C", g.dir, "merge-base", "--is-ancestor", a, b).Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return false, nil
	}
	return err == nil, err
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(cmd.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@example.invalid", "GIT_AUTHOR_DATE=2026-09-30T02:17:00Z", "GIT_COMMITTER_DATE=2026-09-30T02:17:00Z")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit makes a commit with message msg on top of parent (no branch moves).
func commit(t *testing.T, dir, parent, msg string) string {
	t.Helper()
	empty := git(t, dir, "mktree")
	args := []string{"commit-tree", empty, "-m", msg}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	return git(t, dir, args...)
}

// TestCrashAfterPublication is practice exercise 5: a publication intent
// is recorded, the remote accepts the candidate, and the coordinator
// "crashes" before updating the task. After a restart, reconciliation
// decides from the remote — here a real Git repository — by the table in
// publish.go, and releases dependents only when the remote proves the
// candidate landed.
func TestCrashAfterPublication(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed for the publication test: %v", err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name         string
		remote       func(t *testing.T, dir, base, cand string) // moves main after the intent is recorded
		want         Decision
		wantTask     string
		wantDepReady bool
	}{
		{"candidate is current", func(t *testing.T, dir, base, cand string) { git(t, dir, "update-ref", "refs/heads/main", cand) },
			CandidateCurrent, Accepted, true},
		{"candidate is an ancestor", func(t *testing.T, dir, base, cand string) {
			git(t, dir, "update-ref", "refs/heads/main", commit(t, dir, cand, "later work"))
		}, CandidateAncestor, Accepted, true},
		{"not published", func(t *testing.T, dir, base, cand string) {}, NotPublished, Proposed, false},
		{"remote diverged", func(t *testing.T, dir, base, cand string) {
			git(t, dir, "update-ref", "refs/heads/main", commit(t, dir, base, "someone else's change"))
		}, Diverged, Proposed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			git(t, dir, "init", "-q", "-b", "main")
			base := commit(t, dir, "", "base")
			git(t, dir, "update-ref", "refs/heads/main", base)
			cand := commit(t, dir, base, "the candidate")

			path := filepath.Join(t.TempDir(), "c.db")
			clk := &manualClock{}
			c := open(t, path, clk)
			_, _ = c.Enqueue(ctx, TaskSpec{Key: "engine", Kind: "change"})
			_, _ = c.Enqueue(ctx, TaskSpec{Key: "lesson", Kind: "change", Dependencies: []string{"engine"}})
			g, _ := c.Claim(ctx, "engine", "w", time.Minute)
			if err := c.Submit(ctx, *g, cand, nil); err != nil {
				t.Fatal(err)
			}
			if err := c.RecordPublication(ctx, "engine", cand, base); err != nil {
				t.Fatal(err)
			}
			tc.remote(t, dir, base, cand)
			_ = c.Shutdown(ctx) // the crash: the task was never updated

			c2 := open(t, path, clk)
			pubs, err := c2.Reconcile(ctx, gitRemote{dir, "main"})
			if err != nil || len(pubs) != 1 {
				t.Fatalf("reconcile: %+v %v", pubs, err)
			}
			t.Logf("%-26s remote %s -> %s, publication %s", tc.name, pubs[0].RemoteHead[:8], pubs[0].Decision, pubs[0].State)
			if pubs[0].Decision != tc.want {
				t.Fatalf("decision %s, want %s", pubs[0].Decision, tc.want)
			}
			task, _ := c2.Get(ctx, "engine")
			if task.State != tc.wantTask {
				t.Fatalf("task %s, want %s", task.State, tc.wantTask)
			}
			dep, err := c2.Claim(ctx, "lesson", "w2", time.Minute)
			if err != nil || (dep != nil) != tc.wantDepReady {
				t.Fatalf("dependent ready = %v (%v), want %v", dep != nil, err, tc.wantDepReady)
			}
			// Reconciling again changes nothing: a settled publication is
			// not re-decided, an unpublished one is decided the same way.
			again, err := c2.Reconcile(ctx, gitRemote{dir, "main"})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == NotPublished {
				if len(again) != 1 || again[0].Decision != NotPublished {
					t.Fatalf("second reconcile: %+v", again)
				}
			} else if len(again) != 0 {
				t.Fatalf("a settled publication was reconciled again: %+v", again)
			}
		})
	}
}
