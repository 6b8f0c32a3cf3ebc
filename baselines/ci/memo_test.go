package ci_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/sandbox"
)

// memoSandbox is the real sandbox, run once per distinct program. The
// tests' recipes replay, run afresh and grade the same few committed cases
// again and again (coding-roman in five recipes), and each time the same
// programs start on the same files. The first request of a kind runs in
// the real sandbox; a later request with the same command, stdin,
// environment, limits and workspace content gets that run's result, and
// its workspace gets the files that run wrote (a solution's __pycache__).
// Only a run that exited on its own is kept — one a limit stopped, that
// failed, or that left anything but directories and regular files is run
// again every time — so a repeat sees exactly what running a
// deterministic program again would give. Every recipe still runs every
// step on every case; what a test perturbs (the index, a sandbox wrapped
// around this one, a grader, a committed file) still reaches the program
// or what the recipe compares. A code grader's own run is never a repeat:
// its stdin carries a fresh nonce.
type memoSandbox struct {
	coding.Sandbox

	mu   sync.Mutex
	runs map[string]*memoRun
}

type memoRun struct {
	done chan struct{}
	res  *sandbox.Result // nil: not kept
	// What the run did to its workspace: files written (path → content)
	// and paths it removed.
	wrote   map[string][]byte
	removed []string
}

func (m *memoSandbox) Run(ctx context.Context, req sandbox.Request) (*sandbox.Result, error) {
	before, ok := snapshot(req)
	if !ok {
		return m.Sandbox.Run(ctx, req)
	}
	key := before.key(req)
	m.mu.Lock()
	if m.runs == nil {
		m.runs = map[string]*memoRun{}
	}
	r, seen := m.runs[key]
	if !seen {
		r = &memoRun{done: make(chan struct{})}
		m.runs[key] = r
	}
	m.mu.Unlock()
	if seen {
		select {
		case <-r.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if r.res == nil {
			return m.Sandbox.Run(ctx, req)
		}
		if err := r.apply(req.Workspace); err != nil {
			return nil, err
		}
		c := *r.res
		return &c, nil
	}
	defer close(r.done)
	res, err := m.Sandbox.Run(ctx, req)
	if err != nil || res == nil || res.Reason != sandbox.ReasonExit {
		return res, err
	}
	after, ok := snapshot(req)
	if !ok {
		return res, nil
	}
	wrote := map[string][]byte{}
	for p, sum := range after.files {
		if was, ok := before.files[p]; ok && was == sum {
			continue
		}
		if sum == "" {
			wrote[p] = nil // a directory
			continue
		}
		b, err := os.ReadFile(filepath.Join(req.Workspace, filepath.FromSlash(p)))
		if err != nil {
			return res, nil
		}
		wrote[p] = b
	}
	var removed []string
	for p := range before.files {
		if _, ok := after.files[p]; !ok {
			removed = append(removed, p)
		}
	}
	c := *res
	r.res, r.wrote, r.removed = &c, wrote, removed
	return res, nil
}

// apply does to ws what the kept run did to its workspace.
func (r *memoRun) apply(ws string) error {
	for _, p := range slices.Sorted(maps.Keys(r.wrote)) { // a directory before its files
		full := filepath.Join(ws, filepath.FromSlash(p))
		if b := r.wrote[p]; b == nil {
			if err := os.MkdirAll(full, 0o755); err != nil {
				return err
			}
		} else if err := os.WriteFile(full, b, 0o644); err != nil {
			return err
		}
	}
	for _, p := range slices.Backward(slices.Sorted(slices.Values(r.removed))) { // files before their directory
		if err := os.Remove(filepath.Join(ws, filepath.FromSlash(p))); err != nil {
			return err
		}
	}
	return nil
}

// workspaceState is a workspace's content: every path under it, a regular
// file's with the SHA-256 of its content, a directory's with "".
type workspaceState struct{ files map[string]string }

// snapshot reads the request's workspace. A request it cannot key (no
// workspace, a network policy, anything in the workspace but directories
// and regular files) is never kept.
func snapshot(req sandbox.Request) (workspaceState, bool) {
	st := workspaceState{files: map[string]string{}}
	if req.Workspace == "" || req.Egress != nil {
		return st, false
	}
	err := filepath.WalkDir(req.Workspace, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(req.Workspace, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			st.files[rel] = ""
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			st.files[rel] = hex.EncodeToString(sum[:])
		default:
			return fs.ErrInvalid
		}
		return nil
	})
	return st, err == nil
}

// key digests what a run depends on: the request but its workspace's
// path, and the workspace's content.
func (st workspaceState) key(req sandbox.Request) string {
	b, err := json.Marshal(struct {
		Command []string          `json:"command"`
		Stdin   []byte            `json:"stdin"`
		Env     []string          `json:"env"`
		Limits  sandbox.Limits    `json:"limits"`
		Files   map[string]string `json:"files"`
	}{req.Command, req.Stdin, req.Env, req.Limits, st.files})
	if err != nil {
		panic(err) // plain strings, bytes and numbers
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
