package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/collector/redact"
	"github.com/loomwork/loomwork/internal/projects"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
)

// Environment variables of the projects feature.
const (
	envKeysFile = "LOOMWORK_KEYS" // the keys file serve and the CLI read
	envKey      = "LOOMWORK_KEY"  // the CLI's key: scopes traces/sessions/cases reads to its project
)

// defaultKeysFile is where `keys` keeps the keys file unless told.
const defaultKeysFile = ".loomwork/keys.json"

func (m *Main) keysFileFlag(fs *flag.FlagSet) *string {
	return fs.String("keys", "", "keys file (default $"+envKeysFile+", else "+defaultKeysFile+")")
}

func (m *Main) keysPath(flagVal string) string {
	if flagVal != "" {
		return flagVal
	}
	if m.Getenv != nil {
		if v := m.Getenv(envKeysFile); v != "" {
			return v
		}
	}
	return defaultKeysFile
}

// runKeys is `loom-eval keys create|list|revoke|project`.
func (m *Main) runKeys(ctx context.Context, args []string) error {
	const usage = "keys create --project NAME [--kind read-write|read] | keys list | keys revoke KEY_ID | keys project NAME [--retention 30d] [--capture-content=true|false]"
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(m.Stderr, "Usage: loom-eval "+usage)
		fmt.Fprintln(m.Stderr, "Projects and their API keys (docs/projects.md). Keys are stored as SHA-256 hashes; a new key's secret is printed once.")
		if len(args) == 0 {
			return usageError("keys: want a subcommand: %s", usage)
		}
		return nil
	}
	switch args[0] {
	case "create":
		return m.runKeysCreate(args[1:])
	case "list":
		return m.runKeysList(args[1:])
	case "revoke":
		return m.runKeysRevoke(args[1:])
	case "project":
		return m.runKeysProject(args[1:])
	}
	return usageError("keys: unknown subcommand %q (want create, list, revoke or project)", args[0])
}

func (m *Main) openKeys(flagVal string) (*projects.Registry, error) {
	reg, err := projects.Open(m.keysPath(flagVal), nil)
	if err != nil {
		return nil, &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	return reg, nil
}

func (m *Main) runKeysCreate(args []string) error {
	fs := m.newFlagSet("keys create", "keys create --project NAME [--kind read-write|read] [--keys FILE] [--json]")
	file := m.keysFileFlag(fs)
	project := fs.String("project", "", "the project the key belongs to (created if new; "+projects.Default+" is the project of everything sent without a key)")
	kind := fs.String("kind", string(projects.KindReadWrite), "read-write (send spans and read) or read (dashboards and CI: read only)")
	asJSON := fs.Bool("json", false, "print the key (with its secret) as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("keys create: unexpected arguments %q", fs.Args())
	}
	if err := projects.ValidName(*project); err != nil {
		return usageError("keys create: --project: %v", err)
	}
	reg, err := m.openKeys(*file)
	if err != nil {
		return err
	}
	secret, k, err := reg.Create(*project, projects.Kind(*kind), rand.Reader)
	if err != nil {
		if strings.Contains(err.Error(), "key kind") {
			return usageError("keys create: --kind: %v", err)
		}
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("keys create: %w", err)}
	}
	if *asJSON {
		return json.NewEncoder(m.Stdout).Encode(struct {
			ID      string        `json:"id"`
			Project string        `json:"project"`
			Kind    projects.Kind `json:"kind"`
			Secret  string        `json:"secret"`
		}{k.ID, k.Project, k.Kind, secret})
	}
	fmt.Fprintf(m.Stdout, "created %s key %s for project %s\n", k.Kind, k.ID, k.Project)
	fmt.Fprintf(m.Stdout, "secret: %s\n", secret)
	fmt.Fprintf(m.Stdout, "This is the only time the secret is shown (%s keeps its SHA-256). Send it as Authorization: Bearer SECRET.\n", reg.Path())
	return nil
}

func (m *Main) runKeysList(args []string) error {
	fs := m.newFlagSet("keys list", "keys list [--keys FILE] [--json]")
	file := m.keysFileFlag(fs)
	asJSON := fs.Bool("json", false, "print projects and keys (hashes, never secrets) as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	reg, err := m.openKeys(*file)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(m.Stdout).Encode(struct {
			Projects []projects.Project `json:"projects"`
			Keys     []projects.Key     `json:"keys"`
		}{reg.Projects(), reg.Keys()})
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT\tRETENTION\tCAPTURE CONTENT")
	for _, p := range reg.Projects() {
		ret := "forever"
		if p.Retention > 0 {
			ret = time.Duration(p.Retention).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\n", p.Name, ret, p.CaptureContent)
	}
	fmt.Fprintln(tw, "\nKEY\tPROJECT\tKIND\tCREATED\tREVOKED")
	for _, k := range reg.Keys() {
		rev := "-"
		if k.Revoked != nil {
			rev = k.Revoked.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Project, k.Kind, k.Created.Format(time.RFC3339), rev)
	}
	return tw.Flush()
}

func (m *Main) runKeysRevoke(args []string) error {
	fs := m.newFlagSet("keys revoke", "keys revoke KEY_ID [--keys FILE]")
	file := m.keysFileFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("keys revoke: want exactly one key id (see keys list), got %d arguments", fs.NArg())
	}
	reg, err := m.openKeys(*file)
	if err != nil {
		return err
	}
	k, err := reg.Revoke(fs.Arg(0))
	if errors.Is(err, projects.ErrUnknownKey) {
		return usageError("keys revoke: %v (see keys list)", err)
	}
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("keys revoke: %w", err)}
	}
	fmt.Fprintf(m.Stdout, "revoked %s (project %s) at %s; a running serve refuses it within %s\n", k.ID, k.Project, k.Revoked.Format(time.RFC3339), projects.ReloadEvery)
	return nil
}

func (m *Main) runKeysProject(args []string) error {
	fs := m.newFlagSet("keys project", "keys project NAME [--retention 30d|720h|0] [--capture-content=true|false] [--keys FILE]")
	file := m.keysFileFlag(fs)
	retention := fs.String("retention", "", "keep the project's traces this long from their start (30d, 720h); 0: forever; empty: unchanged")
	capture := fs.String("capture-content", "", "true: store message and tool contents; false: drop them at ingest; empty: unchanged")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("keys project: want exactly one project name, got %d arguments", fs.NArg())
	}
	reg, err := m.openKeys(*file)
	if err != nil {
		return err
	}
	p, _ := reg.Project(fs.Arg(0))
	p.Name = fs.Arg(0)
	if *retention != "" {
		d, err := projects.ParseRetention(*retention)
		if err != nil {
			return usageError("keys project: --retention: %v", err)
		}
		p.Retention = projects.Duration(d)
	}
	switch *capture {
	case "":
	case "true", "false":
		p.CaptureContent = *capture == "true"
	default:
		return usageError("keys project: --capture-content: want true or false (got %q)", *capture)
	}
	if err := reg.SetProject(p); err != nil {
		return usageError("keys project: %v", err)
	}
	ret := "forever"
	if p.Retention > 0 {
		ret = time.Duration(p.Retention).String()
	}
	fmt.Fprintf(m.Stdout, "project %s: retention %s, capture content %v\n", p.Name, ret, p.CaptureContent)
	return nil
}

// --- wiring for serve and the CLI readers ---

// keyAuth adapts a registry to the collector's and the UI's key check.
func keyAuth(reg *projects.Registry) func(secret string) (string, bool, bool) {
	return func(secret string) (string, bool, bool) {
		p, ok := reg.Authenticate(secret)
		if !ok {
			return "", false, false
		}
		return p.StoreProject(), p.CanWrite(), true
	}
}

// servePolicy is the collector's content policy from the registry: a
// project captures content when its settings say so; the default project
// captures content (as before projects) unless the keys file has a
// "default" project saying otherwise.
func servePolicy(reg *projects.Registry) collector.PolicyFunc {
	return func(project string) collector.ProjectPolicy {
		name := project
		if name == "" {
			name = projects.Default
		}
		p, ok := reg.Project(name)
		if !ok {
			return collector.ProjectPolicy{CaptureContent: project == ""}
		}
		return collector.ProjectPolicy{CaptureContent: p.CaptureContent, Retention: time.Duration(p.Retention)}
	}
}

// retentionPolicies lists the registry's retention periods.
func retentionPolicies(reg *projects.Registry) func() []sqlite.RetentionPolicy {
	return func() []sqlite.RetentionPolicy {
		var out []sqlite.RetentionPolicy
		for _, p := range reg.Projects() {
			if p.Retention > 0 {
				out = append(out, sqlite.RetentionPolicy{Project: projects.StoreID(p.Name), Retention: time.Duration(p.Retention)})
			}
		}
		return out
	}
}

// parseRedact reads serve's --redact (built-in names, comma-separated,
// or "all") and --redact-pattern NAME=REGEX values.
func parseRedact(builtins string, custom []string) (redact.Config, error) {
	var c redact.Config
	for _, b := range strings.Split(builtins, ",") {
		switch b = strings.TrimSpace(b); b {
		case "", "none":
		case "all":
			c.Builtins = append(c.Builtins, redact.Builtins...)
		default:
			c.Builtins = append(c.Builtins, b)
		}
	}
	for _, cu := range custom {
		name, re, ok := strings.Cut(cu, "=")
		if !ok {
			return c, fmt.Errorf("--redact-pattern %q: want NAME=REGEX", cu)
		}
		c.Custom = append(c.Custom, redact.Custom{Name: name, Pattern: re})
	}
	return c, c.Validate()
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// cliProject is the project the CLI's store reads are scoped to: the
// project of $LOOMWORK_KEY checked against the keys file, or the default
// project without a key. An unknown or revoked key is an error that does
// not quote the key.
func (m *Main) cliProject() (string, error) {
	if m.Getenv == nil || m.Getenv(envKey) == "" {
		return "", nil
	}
	reg, err := projects.Open(m.keysPath(""), nil)
	if err != nil {
		return "", err
	}
	p, ok := reg.Authenticate(m.Getenv(envKey))
	if !ok {
		return "", fmt.Errorf("$%s is not a live key of %s", envKey, reg.Path())
	}
	return p.StoreProject(), nil
}

// scopedStore scopes every read to one project (store.WithProject).
type scopedStore struct {
	store.Store
	project string
}

func (s scopedStore) GetTrace(ctx context.Context, id string) ([]store.Span, error) {
	return s.Store.GetTrace(store.WithProject(ctx, s.project), id)
}

func (s scopedStore) ListTraces(ctx context.Context, q store.TraceQuery) (store.TracePage, error) {
	return s.Store.ListTraces(store.WithProject(ctx, s.project), q)
}

func (s scopedStore) ResolveTraceID(ctx context.Context, id string) (string, error) {
	return s.Store.ResolveTraceID(store.WithProject(ctx, s.project), id)
}

func (s scopedStore) WriteSpans(context.Context, []store.Span) error {
	return errors.New("a key-scoped CLI store is read-only")
}

type scopedSessionStore struct {
	scopedStore
	sl store.SessionLister
}

func (s scopedSessionStore) ListSessions(ctx context.Context, q store.SessionQuery) (store.SessionPage, error) {
	return s.sl.ListSessions(store.WithProject(ctx, s.project), q)
}

// scopeStore wraps st for the CLI's key (cliProject); unchanged without one.
func (m *Main) scopeStore(st store.Store) (store.Store, error) {
	project, err := m.cliProject()
	if err != nil || m.Getenv == nil || m.Getenv(envKey) == "" {
		return st, err
	}
	sc := scopedStore{Store: st, project: project}
	if sl, ok := st.(store.SessionLister); ok {
		return scopedSessionStore{scopedStore: sc, sl: sl}, nil
	}
	return sc, nil
}
