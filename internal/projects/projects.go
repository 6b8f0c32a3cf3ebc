// Package projects owns Loomwork's projects and their API keys: the keys
// file (projects with their retention and content-capture settings, keys
// stored as SHA-256 hashes), creating a key (its secret is returned once and
// never stored), revoking one, and authenticating a presented secret.
//
// A key is 32 random bytes from the injected source (crypto/rand in the
// binary), so a plain SHA-256 is the right hash: there is nothing for a
// slow password hash to protect against. Authentication hashes the
// presented secret and compares it with every stored hash in constant time.
//
// The package is a leaf: the collector and the UI take a Keys interface that
// *Registry satisfies, and cmd wires it.
package projects

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"
)

// Kind is what a key may do.
type Kind string

const (
	// KindReadWrite keys send spans (OTLP) and read their project.
	KindReadWrite Kind = "read-write"
	// KindRead keys only read (dashboards, CI): the OTLP endpoints refuse
	// them and the UI refuses every write.
	KindRead Kind = "read"
)

// Default is the name of the project that holds everything written without
// a key (no keys file, or the single shared token). The store records it as
// the empty project id, so traces stored before projects existed are in it.
const Default = "default"

// SecretPrefix starts every key secret, so a leaked one is recognisable
// (and the collector's redaction can find it).
const SecretPrefix = "lwk_"

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidName reports whether name is a valid project name: 1 to 63 of
// a-z 0-9 _ -, starting with a letter or digit.
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("project name %q: want 1 to 63 characters of a-z, 0-9, _ and -, starting with a letter or digit", clip(name))
	}
	return nil
}

// StoreID is the project id the store records for a project name: "" for
// Default, the name itself otherwise.
func StoreID(name string) string {
	if name == Default {
		return ""
	}
	return name
}

// Project is a project's settings.
type Project struct {
	Name string `json:"name"`
	// Retention is how long the project's traces are kept, counted from a
	// trace's start; 0 keeps them forever.
	Retention Duration `json:"retention,omitempty"`
	// CaptureContent keeps message and tool contents (gen_ai.input.messages,
	// gen_ai.output.messages, tool arguments and results, OpenInference
	// input.value/output.value). Off by default for a named project; the
	// collector drops those attributes before anything is written.
	CaptureContent bool      `json:"capture_content"`
	Created        time.Time `json:"created"`
}

// Key is a stored key: never its secret, only the secret's hash.
type Key struct {
	// ID names the key in listings and for revoking; it is not secret.
	ID      string     `json:"id"`
	Project string     `json:"project"`
	Kind    Kind       `json:"kind"`
	SHA256  string     `json:"sha256"` // hex of SHA-256(secret)
	Created time.Time  `json:"created"`
	Revoked *time.Time `json:"revoked,omitempty"`
}

// Principal is who an authenticated secret belongs to.
type Principal struct {
	KeyID   string
	Project string // the project name (Default for the default project)
	Kind    Kind
}

// StoreProject is the project id the store records for p (StoreID).
func (p Principal) StoreProject() string { return StoreID(p.Project) }

// CanWrite reports whether the key may send spans and change things.
func (p Principal) CanWrite() bool { return p.Kind == KindReadWrite }

type file struct {
	Projects []Project `json:"projects"`
	Keys     []Key     `json:"keys"`
}

// Registry is the keys file, loaded. Its methods are safe for concurrent
// use; Authenticate re-reads the file when it changed on disk (at most once
// per ReloadEvery), so a revoke by `loom-eval keys revoke` reaches a
// running server within that delay.
type Registry struct {
	path string
	now  func() time.Time
	fs   fileSystem

	mu      sync.Mutex
	f       file
	modTime time.Time
	size    int64
	checked time.Time
	loadErr error
}

// ReloadEvery bounds how often a Registry checks its file for changes.
const ReloadEvery = time.Second

// Open reads the keys file at path; a missing file is an empty registry
// (the first Create writes it). now is the clock (time.Now when nil).
func Open(path string, now func() time.Time) (*Registry, error) {
	if now == nil {
		now = time.Now
	}
	r := &Registry{path: path, now: now, fs: osFS{}}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Registry) load() error {
	st, err := os.Stat(r.path)
	if errors.Is(err, os.ErrNotExist) {
		r.f, r.modTime, r.size = file{}, time.Time{}, 0
		return nil
	}
	if err != nil {
		return fmt.Errorf("read keys file %s: %w", r.path, err)
	}
	b, err := os.ReadFile(r.path)
	if err != nil {
		return fmt.Errorf("read keys file %s: %w", r.path, err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("read keys file %s: %w", r.path, err)
	}
	if err := f.validate(); err != nil {
		return fmt.Errorf("keys file %s: %w", r.path, err)
	}
	r.f, r.modTime, r.size = f, st.ModTime(), st.Size()
	return nil
}

func (f *file) validate() error {
	var errs []error
	names := map[string]bool{}
	for i, p := range f.Projects {
		if err := ValidName(p.Name); err != nil {
			errs = append(errs, fmt.Errorf("projects[%d]: %w", i, err))
		}
		if names[p.Name] {
			errs = append(errs, fmt.Errorf("projects[%d]: project %q appears twice", i, p.Name))
		}
		if p.Retention < 0 {
			errs = append(errs, fmt.Errorf("projects[%d].retention: must not be negative", i))
		}
		names[p.Name] = true
	}
	ids := map[string]bool{}
	for i, k := range f.Keys {
		if !names[k.Project] {
			errs = append(errs, fmt.Errorf("keys[%d] (%s): project %q is not in projects", i, k.ID, clip(k.Project)))
		}
		if k.Kind != KindRead && k.Kind != KindReadWrite {
			errs = append(errs, fmt.Errorf("keys[%d] (%s).kind: must be %q or %q (got %q)", i, k.ID, KindReadWrite, KindRead, clip(string(k.Kind))))
		}
		if b, err := hex.DecodeString(k.SHA256); err != nil || len(b) != sha256.Size {
			errs = append(errs, fmt.Errorf("keys[%d] (%s).sha256: want %d hex digits", i, k.ID, 2*sha256.Size))
		}
		if k.ID == "" || ids[k.ID] {
			errs = append(errs, fmt.Errorf("keys[%d].id: empty or repeated (%q)", i, k.ID))
		}
		ids[k.ID] = true
	}
	return errors.Join(errs...)
}

// fileSystem is what save needs of the file system; tests inject
// failures at each step (a key must never be reported created, or a
// revocation done, that did not reach the disk).
type fileSystem interface {
	CreateTemp(dir, pattern string) (tempFile, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	// SyncDir fsyncs a directory, so a rename in it survives a crash.
	SyncDir(dir string) error
}

type tempFile interface {
	Name() string
	Chmod(os.FileMode) error
	Write([]byte) (int, error)
	Sync() error
	Close() error
}

type osFS struct{}

func (osFS) CreateTemp(dir, pattern string) (tempFile, error) { return os.CreateTemp(dir, pattern) }
func (osFS) Rename(oldpath, newpath string) error             { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error                         { return os.Remove(name) }
func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// save writes the file atomically (temporary file of mode 0600, fsync,
// rename, fsync of the directory). Every step's failure is returned: the
// callers print a key or report a revocation only when save succeeded. On
// failure the in-memory state is reloaded from the disk, so a running
// server never trusts a change that was not saved.
func (r *Registry) save() (err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("write keys file %s: %w", r.path, err)
			if lerr := r.load(); lerr != nil {
				err = errors.Join(err, lerr)
			}
		}
	}()
	b, err := json.MarshalIndent(r.f, "", "  ")
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	dir := filepath.Dir(r.path)
	// Owner only: the directory of the first keys file (.loomwork/ by
	// default) is made here when missing.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := r.fs.CreateTemp(dir, ".keys-*.tmp")
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if !renamed {
			_ = r.fs.Remove(tmp.Name())
		}
	}()
	// CreateTemp already makes the file 0600; Chmod states it whatever
	// the umask or the platform.
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("chmod: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("fsync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if err := r.fs.Rename(tmp.Name(), r.path); err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	renamed = true
	if err := r.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	if st, err := os.Stat(r.path); err == nil {
		r.modTime, r.size = st.ModTime(), st.Size()
	}
	return nil
}

// Path is the keys file's path.
func (r *Registry) Path() string { return r.path }

// Projects returns the projects, sorted by name.
func (r *Registry) Projects() []Project {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maybeReload()
	out := slices.Clone(r.f.Projects)
	slices.SortFunc(out, func(a, b Project) int { return cmpString(a.Name, b.Name) })
	return out
}

// Project returns the settings of the project with that name.
func (r *Registry) Project(name string) (Project, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maybeReload()
	for _, p := range r.f.Projects {
		if p.Name == name {
			return p, true
		}
	}
	return Project{}, false
}

// Keys returns the stored keys (hashes, never secrets), in creation order.
func (r *Registry) Keys() []Key {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maybeReload()
	return slices.Clone(r.f.Keys)
}

// SetProject creates or updates a project's settings and saves the file.
func (r *Registry) SetProject(p Project) error {
	if err := ValidName(p.Name); err != nil {
		return err
	}
	if p.Retention < 0 {
		return fmt.Errorf("project %s: retention must not be negative", p.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.load(); err != nil {
		return err
	}
	for i := range r.f.Projects {
		if r.f.Projects[i].Name == p.Name {
			p.Created = r.f.Projects[i].Created
			r.f.Projects[i] = p
			return r.save()
		}
	}
	if p.Created.IsZero() {
		p.Created = r.now().UTC()
	}
	r.f.Projects = append(r.f.Projects, p)
	return r.save()
}

// Create makes a key of kind for project (creating the project with
// default settings if it does not exist), saves its hash, and returns the
// secret: the only time it exists outside the caller's hands. rnd supplies
// the randomness (crypto/rand.Reader in the binary).
func (r *Registry) Create(project string, kind Kind, rnd io.Reader) (secret string, k Key, err error) {
	if err := ValidName(project); err != nil {
		return "", Key{}, err
	}
	if kind != KindRead && kind != KindReadWrite {
		return "", Key{}, fmt.Errorf("key kind %q: must be %q or %q", clip(string(kind)), KindReadWrite, KindRead)
	}
	var raw [32 + 6]byte
	if _, err := io.ReadFull(rnd, raw[:]); err != nil {
		return "", Key{}, fmt.Errorf("create key: read randomness: %w", err)
	}
	secret = SecretPrefix + base64.RawURLEncoding.EncodeToString(raw[:32])
	sum := sha256.Sum256([]byte(secret))
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.load(); err != nil {
		return "", Key{}, err
	}
	now := r.now().UTC()
	if !slices.ContainsFunc(r.f.Projects, func(p Project) bool { return p.Name == project }) {
		r.f.Projects = append(r.f.Projects, Project{Name: project, Created: now})
	}
	k = Key{ID: "key_" + hex.EncodeToString(raw[32:]), Project: project, Kind: kind, SHA256: hex.EncodeToString(sum[:]), Created: now}
	r.f.Keys = append(r.f.Keys, k)
	if err := r.save(); err != nil {
		return "", Key{}, err
	}
	return secret, k, nil
}

// ErrUnknownKey is wrapped by Revoke's error for an id no key has.
var ErrUnknownKey = errors.New("no such key")

// Revoke marks the key with that id revoked (it then authenticates
// nothing) and saves the file. Revoking a revoked key is a no-op.
func (r *Registry) Revoke(id string) (Key, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.load(); err != nil {
		return Key{}, err
	}
	for i := range r.f.Keys {
		if r.f.Keys[i].ID == id {
			if r.f.Keys[i].Revoked == nil {
				t := r.now().UTC()
				r.f.Keys[i].Revoked = &t
				if err := r.save(); err != nil {
					return Key{}, err
				}
			}
			return r.f.Keys[i], nil
		}
	}
	return Key{}, fmt.Errorf("revoke %q: %w", clip(id), ErrUnknownKey)
}

// Authenticate returns the principal of a presented secret, or false. It
// compares the secret's hash with every live key's in constant time and
// never logs or returns the secret.
func (r *Registry) Authenticate(secret string) (Principal, bool) {
	sum := sha256.Sum256([]byte(secret))
	want := hex.EncodeToString(sum[:])
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maybeReload()
	var found Principal
	ok := false
	for _, k := range r.f.Keys {
		match := subtle.ConstantTimeCompare([]byte(k.SHA256), []byte(want)) == 1
		if match && k.Revoked == nil && !ok {
			found, ok = Principal{KeyID: k.ID, Project: k.Project, Kind: k.Kind}, true
		}
	}
	return found, ok
}

// maybeReload re-reads the file if it changed on disk, at most once per
// ReloadEvery. A file that no longer reads keeps the last good contents
// (and the error is kept for LoadError), so a half-edited file does not
// lock everyone out or let anyone in.
func (r *Registry) maybeReload() {
	now := r.now()
	if now.Sub(r.checked) < ReloadEvery && !r.checked.IsZero() {
		return
	}
	r.checked = now
	st, err := os.Stat(r.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && r.size != 0 {
			r.f, r.size, r.modTime = file{}, 0, time.Time{}
		}
		return
	}
	if st.ModTime().Equal(r.modTime) && st.Size() == r.size {
		return
	}
	old := r.f
	if err := r.load(); err != nil {
		r.f, r.loadErr = old, err
		return
	}
	r.loadErr = nil
}

// LoadError is the error of the last failed reload, nil after a good one.
func (r *Registry) LoadError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loadErr
}

// Duration is a time.Duration written in JSON as a Go duration string
// ("720h"); a number is nanoseconds.
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("duration: want a string like \"720h\" (got %s)", clip(string(b)))
		}
		*d = Duration(n)
		return nil
	}
	v, err := ParseRetention(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// ParseRetention reads a retention period: a Go duration ("720h") or a
// number of days ("30d"); "0" or "" keeps forever.
func ParseRetention(s string) (time.Duration, error) {
	if s == "" || s == "0" {
		return 0, nil
	}
	if n := len(s); n > 1 && s[n-1] == 'd' {
		var days int
		if _, err := fmt.Sscanf(s[:n-1], "%d", &days); err == nil && days >= 0 && fmt.Sprint(days) == s[:n-1] {
			return time.Duration(days) * 24 * time.Hour, nil
		}
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("retention %q: want a duration like 720h or a number of days like 30d", clip(s))
	}
	return v, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// clip shortens an input for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
