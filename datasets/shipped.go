package datasets

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// The judged retrieval set Loomwork ships (documentation, closed issues and
// relevance judgements of mkdocs-material; MIT, see its LICENSE and
// SOURCE.md). It lives in this repository at datasets/mkdocs-material and is
// embedded in the binary, so `go install`ed copies of loom-eval have it too.
//
//go:embed all:mkdocs-material
var shipped embed.FS

// ShippedName is the shipped judged set's folder name.
const ShippedName = "mkdocs-material"

// DatasetEnv names the environment variable that points every command that
// reads a judged set (run, replay, ablate, datasets check) at another
// folder; a --dataset flag wins over it.
const DatasetEnv = "LOOMWORK_DATASET"

// ShippedFS returns the shipped judged set as a read-only file system rooted
// at its folder (LICENSE, SOURCE.md, issues.jsonl, qrels.jsonl, docs/...).
func ShippedFS() fs.FS {
	sub, err := fs.Sub(shipped, ShippedName)
	if err != nil { // the embed pattern above guarantees the folder
		panic(err)
	}
	return sub
}

// ShippedDigest is a content digest of the shipped set (file names and
// bytes), so a materialised copy is reused only while it is the same data.
func ShippedDigest() string { return shippedDigest() }

var shippedDigest = sync.OnceValue(func() string {
	h := sha256.New()
	var names []string
	_ = fs.WalkDir(ShippedFS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	sort.Strings(names)
	for _, n := range names {
		b, _ := fs.ReadFile(ShippedFS(), n)
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
})

// completeMarker is written last into a materialised copy.
const completeMarker = ".loomwork-complete"

// MaterializeShipped writes the shipped set into a folder under cacheDir
// (cacheDir/datasets/mkdocs-material-DIGEST) unless an identical copy is
// already there, and returns that folder. The readers of a judged set
// (bleve's indexer, the miner) read folders, so the embedded set is written
// out once; a copy is complete only after its marker file, and a copy that
// another process finished first is used as it is.
func MaterializeShipped(cacheDir string) (string, error) {
	if cacheDir == "" {
		return "", errors.New("materialize shipped dataset: no cache folder")
	}
	dst := filepath.Join(cacheDir, "datasets", ShippedName+"-"+ShippedDigest())
	if _, err := os.Stat(filepath.Join(dst, completeMarker)); err == nil {
		return dst, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", fmt.Errorf("materialize shipped dataset: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), ShippedName+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("materialize shipped dataset: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	src := ShippedFS()
	err = fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out := filepath.Join(tmp, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := fs.ReadFile(src, p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err == nil {
		err = os.WriteFile(filepath.Join(tmp, completeMarker), []byte(ShippedDigest()+"\n"), 0o644)
	}
	if err != nil {
		return "", fmt.Errorf("materialize shipped dataset into %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		// Another process may have finished the same copy first.
		if _, serr := os.Stat(filepath.Join(dst, completeMarker)); serr == nil {
			return dst, nil
		}
		return "", fmt.Errorf("materialize shipped dataset: %w", err)
	}
	return dst, nil
}

// CacheDir is where Loomwork keeps caches: $LOOMWORK_CACHE, else the user's
// cache folder + "/loomwork", else the system temporary folder +
// "/loomwork-cache" (a user with no home still gets a working default).
func CacheDir(getenv func(string) string) string {
	if d := getenv("LOOMWORK_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil && d != "" {
		return filepath.Join(d, "loomwork")
	}
	return filepath.Join(os.TempDir(), "loomwork-cache")
}

// ResolveJudged returns the judged-set folder a command reads: flagValue
// when set, else $LOOMWORK_DATASET, else the shipped set materialised in
// the cache (see MaterializeShipped). getenv is injected so commands and
// tests see the same environment.
func ResolveJudged(flagValue string, getenv func(string) string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if d := getenv(DatasetEnv); d != "" {
		return d, nil
	}
	return MaterializeShipped(CacheDir(getenv))
}

// DescribeDefault is how help texts name the default judged set.
func DescribeDefault() string {
	return "$" + DatasetEnv + ", else the shipped " + path.Join("datasets", ShippedName)
}

// JudgedName is the name a report gives a judged set read from dir: the
// folder's base name, with the digest of a materialised shipped copy
// dropped (so reports say "mkdocs-material" wherever the copy lives).
func JudgedName(dir string) string {
	base := filepath.Base(filepath.Clean(dir))
	// The prefix test first: only a name that could be a copy pays for
	// hashing the embedded set.
	if strings.HasPrefix(base, ShippedName+"-") && base == ShippedName+"-"+ShippedDigest() {
		return ShippedName
	}
	return base
}
