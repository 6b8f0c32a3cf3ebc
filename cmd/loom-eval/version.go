package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// versionInfo is what `loom-eval version` prints: where the binary came
// from, as the Go toolchain recorded it in the binary.
type versionInfo struct {
	Module  string `json:"module"`
	Version string `json:"version"` // "(devel)" for a build from a checkout
	Go      string `json:"go"`
	OSArch  string `json:"os_arch"`
	// Commit, CommitTime and Modified come from version control when the
	// build had it (go build in a git checkout, without -buildvcs=false).
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commit_time,omitempty"`
	Modified   *bool  `json:"modified,omitempty"`
}

// readVersion reads bi (debug.ReadBuildInfo's answer; ok false when the
// binary carries none).
func readVersion(bi *debug.BuildInfo, ok bool) versionInfo {
	v := versionInfo{Module: "github.com/loomwork/loomwork", Version: "unknown", Go: runtime.Version(), OSArch: runtime.GOOS + "/" + runtime.GOARCH}
	if !ok || bi == nil {
		return v
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			mod := s.Value == "true"
			v.Modified = &mod
		}
	}
	return v
}

// commitLine says which commit the binary was built from, or why it
// cannot say.
func (v versionInfo) commitLine() string {
	if v.Commit == "" {
		return "unknown (built without version control information: -buildvcs=false, or outside a git checkout)"
	}
	s := v.Commit
	if v.CommitTime != "" {
		s += " (" + v.CommitTime + ")"
	}
	if v.Modified != nil && *v.Modified {
		s += ", with uncommitted changes"
	}
	return s
}

// runVersion prints the module version and the build's version-control
// information (also `loom-eval --version`).
func (m *Main) runVersion(_ context.Context, args []string) error {
	fs := m.newFlagSet("version", "version [--json]")
	asJSON := fs.Bool("json", false, "print the build information as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("version: unexpected argument %q", fs.Arg(0))
	}
	v := readVersion(debug.ReadBuildInfo())
	if *asJSON {
		return writeJSON(m.Stdout, v)
	}
	fmt.Fprintf(m.Stdout, "loom-eval %s\n  module  %s\n  commit  %s\n  go      %s %s\n", v.Version, v.Module, v.commitLine(), v.Go, v.OSArch)
	return nil
}
