package projects

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCreateAuthenticateRevokeAndReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	reg, err := Open(path, clock)
	if err != nil {
		t.Fatal(err)
	}
	secret, k, err := reg.Create("alpha", KindReadWrite, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ro, kr, err := reg.Create("alpha", KindRead, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, SecretPrefix) || len(secret) != len(SecretPrefix)+43 {
		t.Fatalf("secret %q: want lwk_ + 43 base64url characters", secret)
	}
	b, _ := os.ReadFile(path)
	if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte(ro)) || bytes.Contains(b, []byte(secret[len(SecretPrefix):])) {
		t.Fatal("the keys file holds a secret")
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	if p, ok := reg.Authenticate(secret); !ok || p.Project != "alpha" || !p.CanWrite() || p.KeyID != k.ID {
		t.Errorf("Authenticate(rw) = %+v, %v", p, ok)
	}
	if p, ok := reg.Authenticate(ro); !ok || p.CanWrite() || p.KeyID != kr.ID {
		t.Errorf("Authenticate(read) = %+v, %v", p, ok)
	}
	for _, bad := range []string{"", secret + "x", secret[:len(secret)-1], strings.ToUpper(secret), k.SHA256} {
		if _, ok := reg.Authenticate(bad); ok {
			t.Errorf("Authenticate(%.10q…) succeeded", bad)
		}
	}
	// A second process (keys revoke) changes the file; the running
	// registry sees it after ReloadEvery.
	other, err := Open(path, clock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Revoke(k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Revoke("key_nope"); err == nil {
		t.Error("revoking an unknown key succeeded")
	}
	now = now.Add(ReloadEvery + time.Millisecond)
	if _, ok := reg.Authenticate(secret); ok {
		t.Error("a revoked key still authenticates after the reload interval")
	}
	if _, ok := reg.Authenticate(ro); !ok {
		t.Error("the other key stopped working")
	}
	// A broken file keeps the last good contents.
	os.WriteFile(path, []byte("{broken"), 0o600)
	now = now.Add(2 * ReloadEvery)
	if _, ok := reg.Authenticate(ro); !ok || reg.LoadError() == nil {
		t.Errorf("after a broken write: auth %v, load error %v", ok, reg.LoadError())
	}
}

func TestValidationNamesTheProblem(t *testing.T) {
	reg, _ := Open(filepath.Join(t.TempDir(), "k.json"), nil)
	if _, _, err := reg.Create("Bad Name", KindRead, rand.Reader); err == nil || !strings.Contains(err.Error(), `project name "Bad Name"`) {
		t.Errorf("bad name: %v", err)
	}
	if _, _, err := reg.Create("ok", "admin", rand.Reader); err == nil || !strings.Contains(err.Error(), `key kind "admin"`) {
		t.Errorf("bad kind: %v", err)
	}
	for in, want := range map[string]time.Duration{"30d": 720 * time.Hour, "12h": 12 * time.Hour, "0": 0, "": 0} {
		if got, err := ParseRetention(in); err != nil || got != want {
			t.Errorf("ParseRetention(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"-1d", "x", "1.5d", "-3h"} {
		if _, err := ParseRetention(in); err == nil {
			t.Errorf("ParseRetention(%q) succeeded", in)
		}
	}
	path := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(path, []byte(`{"projects":[{"name":"a"}],"keys":[{"id":"k1","project":"b","kind":"read","sha256":"00"}]}`), 0o600)
	_, err := Open(path, nil)
	for _, want := range []string{`keys[0] (k1): project "b" is not in projects`, "keys[0] (k1).sha256"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open: %v; want %q", err, want)
		}
	}
	if StoreID(Default) != "" || StoreID("x") != "x" {
		t.Error("StoreID")
	}
}
