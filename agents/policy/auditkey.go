package policy

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// AuditKey signs audit entries. The hash chain alone shows an entry was
// edited, dropped or reordered, but whoever can write the log can also
// rewrite a decision and recompute every hash after it; an entry's MAC
// (HMAC-SHA-256 under a secret kept outside the log) is what such a writer
// cannot recompute without the key. The key lives in its own file, owner
// only, away from the log (LoadAuditKey): an agent whose tools or sandbox
// can reach the log's folder should not reach the user's config folder.
type AuditKey struct {
	id     string // a fingerprint: the first 12 hex digits of SHA-256 over the secret
	secret []byte
}

// auditKeyBytes is the size of a generated key.
const auditKeyBytes = 32

// NewAuditKey makes a key of secret (at least 32 bytes).
func NewAuditKey(secret []byte) (*AuditKey, error) {
	if len(secret) < auditKeyBytes {
		return nil, fmt.Errorf("audit key: %d bytes, want at least %d", len(secret), auditKeyBytes)
	}
	sum := sha256.Sum256(secret)
	return &AuditKey{id: hex.EncodeToString(sum[:6]), secret: append([]byte(nil), secret...)}, nil
}

// GenerateAuditKey makes a key with a random secret, for a log that lives
// only as long as the process that signs and checks it.
func GenerateAuditKey() (*AuditKey, error) {
	secret := make([]byte, auditKeyBytes)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("audit key: %w", err)
	}
	return NewAuditKey(secret)
}

// ID is the key's fingerprint, recorded in each entry it signs (not the
// secret: a fingerprint tells which key signed, nothing more).
func (k *AuditKey) ID() string { return k.id }

// mac signs an entry's hash (which covers its content and its link to
// the previous entry) under the key, with a domain tag of its own.
func (k *AuditKey) mac(hash string) string {
	m := hmac.New(sha256.New, k.secret)
	m.Write([]byte("audit-mac/1\x00")) // a domain tag of its own
	m.Write([]byte(hash))
	return hex.EncodeToString(m.Sum(nil))
}

// LoadAuditKey reads the key file at path — the secret as hex on one line
// — creating it (owner-only, its folder owner-only) with a random secret
// when it does not exist. A key file others can read is refused: it would
// sign forgeries for them.
func LoadAuditKey(path string) (*AuditKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createAuditKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("audit key %s: mode %v lets others read it; chmod 600 it", path, fi.Mode().Perm())
	}
	secret, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("audit key %s: not hex: %w", path, err)
	}
	k, err := NewAuditKey(secret)
	if err != nil {
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	}
	return k, nil
}

func createAuditKey(path string) (*AuditKey, error) {
	secret := make([]byte, auditKeyBytes)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	}
	// The key is written whole to a temporary file, then linked into place:
	// link(2) fails when the name exists, so two processes creating the key
	// at once end with one key (the loser reads the winner's), and the key
	// file is never seen empty or half-written — as it was when the winner
	// created it with O_EXCL and wrote it after, and the loser, or a crash
	// in between, read 0 bytes.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".audit.key-*")
	if err != nil {
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(hex.EncodeToString(secret) + "\n")
	if err := errors.Join(werr, tmp.Chmod(0o600), tmp.Sync(), tmp.Close()); err != nil {
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return LoadAuditKey(path)
	} else if err != nil {
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	}
	if dir, err := os.Open(filepath.Dir(path)); err == nil {
		_ = dir.Sync() // the new name survives a crash; best effort
		dir.Close()
	}
	return NewAuditKey(secret)
}

// DefaultAuditKeyPath is where the commands keep the audit key:
// $LOOMWORK_AUDIT_KEY when set, else loomwork/audit.key in the user's
// config folder ($XDG_CONFIG_HOME, else ~/.config).
func DefaultAuditKeyPath(getenv func(string) string) (string, error) {
	if p := strings.TrimSpace(getenv(EnvAuditKey)); p != "" {
		return p, nil
	}
	dir := strings.TrimSpace(getenv("XDG_CONFIG_HOME"))
	if dir == "" {
		home := strings.TrimSpace(getenv("HOME"))
		if home == "" {
			return "", fmt.Errorf("audit key: neither $%s, $XDG_CONFIG_HOME nor $HOME is set", EnvAuditKey)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "loomwork", "audit.key"), nil
}

// EnvAuditKey names the variable that points the commands at an audit key
// file.
const EnvAuditKey = "LOOMWORK_AUDIT_KEY"
