package sandbox

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"
)

// Limits bound one run. A zero field means "use the default", so a caller who
// sets nothing still gets the conservative limits of DefaultLimits; a caller
// loosens a limit by setting it explicitly.
type Limits struct {
	// WallTime is the wall-clock budget of the whole run.
	WallTime time.Duration `json:"wall_time"`
	// CPUTime is the CPU budget, enforced per process with RLIMIT_CPU and for
	// the whole tree by watching the run's cgroup CPU counter.
	CPUTime time.Duration `json:"cpu_time"`
	// Memory caps the memory charged to the whole tree (memory cgroup), bytes.
	Memory int64 `json:"memory_bytes"`
	// Tasks caps the processes and threads of the command's tree (pids cgroup).
	// The helper's own few threads get a separate allowance on top.
	Tasks int `json:"tasks"`
	// Output caps what is kept of stdout and of stderr, bytes each. A run
	// that writes more is killed and reported with ReasonOutput.
	Output int64 `json:"output_bytes"`
	// FileSize is RLIMIT_FSIZE: the largest file the command may write, bytes.
	FileSize int64 `json:"file_size_bytes"`
	// OpenFiles is RLIMIT_NOFILE for the command.
	OpenFiles int `json:"open_files"`
	// AddressSpace is RLIMIT_AS for the command (never for the Go helper,
	// which reserves far more address space than it uses), bytes.
	AddressSpace int64 `json:"address_space_bytes"`
	// Tmp is the size of the private /tmp tmpfs, bytes (also charged to Memory).
	Tmp int64 `json:"tmp_bytes"`
}

// DefaultLimits are what a run gets when nothing is said: enough for a small
// Python script, small enough that a runaway one is stopped quickly.
func DefaultLimits() Limits {
	return Limits{
		WallTime:     10 * time.Second,
		CPUTime:      5 * time.Second,
		Memory:       256 << 20,
		Tasks:        64,
		Output:       1 << 20,
		FileSize:     16 << 20,
		OpenFiles:    256,
		AddressSpace: 1 << 30,
		Tmp:          64 << 20,
	}
}

// Or returns l with every zero field taken from base.
func (l Limits) Or(base Limits) Limits {
	if l.WallTime == 0 {
		l.WallTime = base.WallTime
	}
	if l.CPUTime == 0 {
		l.CPUTime = base.CPUTime
	}
	if l.Memory == 0 {
		l.Memory = base.Memory
	}
	if l.Tasks == 0 {
		l.Tasks = base.Tasks
	}
	if l.Output == 0 {
		l.Output = base.Output
	}
	if l.FileSize == 0 {
		l.FileSize = base.FileSize
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = base.OpenFiles
	}
	if l.AddressSpace == 0 {
		l.AddressSpace = base.AddressSpace
	}
	if l.Tmp == 0 {
		l.Tmp = base.Tmp
	}
	return l
}

// Validate reports every negative or unusable limit, naming its field.
// Zero fields are valid (they mean "default").
func (l Limits) Validate() error {
	var errs []error
	neg := func(name string, v int64) {
		if v < 0 {
			errs = append(errs, fmt.Errorf("limits.%s: must not be negative (got %d)", name, v))
		}
	}
	neg("wall_time", int64(l.WallTime))
	neg("cpu_time", int64(l.CPUTime))
	neg("memory_bytes", l.Memory)
	neg("tasks", int64(l.Tasks))
	neg("output_bytes", l.Output)
	neg("file_size_bytes", l.FileSize)
	neg("open_files", int64(l.OpenFiles))
	neg("address_space_bytes", l.AddressSpace)
	neg("tmp_bytes", l.Tmp)
	if l.CPUTime > 0 && l.CPUTime < time.Second {
		// RLIMIT_CPU counts whole seconds; a smaller value cannot be enforced
		// per process and would silently become 0 (no time at all).
		errs = append(errs, fmt.Errorf("limits.cpu_time: must be at least 1s (got %s)", l.CPUTime))
	}
	if l.Memory > 0 && l.Memory < 4<<20 {
		errs = append(errs, fmt.Errorf("limits.memory_bytes: must be at least 4 MiB (got %d)", l.Memory))
	}
	if l.OpenFiles > 0 && l.OpenFiles < 4 {
		errs = append(errs, fmt.Errorf("limits.open_files: must be at least 4 (got %d)", l.OpenFiles))
	}
	return errors.Join(errs...)
}

// Default ids the command runs as on the host (inside the sandbox it is uid
// and gid 1000). They own nothing on the host; the workspace directory is
// handed to them for the run.
const (
	DefaultHostUID = 1_990_000
	DefaultHostGID = 1_990_000
)

// Config configures a Runner.
type Config struct {
	// Limits are the defaults for every run; zero fields take DefaultLimits.
	Limits Limits
	// DisableSeccomp turns the seccomp filter off. It is on by default, and a
	// machine without seccomp is refused unless this is set.
	DisableSeccomp bool
	// HostUID and HostGID are the host ids the command runs as (inside: 1000).
	// Zero means DefaultHostUID / DefaultHostGID.
	HostUID, HostGID int
	// CgroupParent is the cgroup, relative to each hierarchy's root, under
	// which per-run cgroups are made. Empty means "loomwork-sandbox".
	CgroupParent string
	// Executable is the binary re-executed as the init helper. Empty means
	// /proc/self/exe, the running binary, which must call Init in main.
	Executable string
	// HelperArgs follow argv[0] when the helper is started. Init ignores
	// them; they only matter to a binary that cannot call Init before its
	// own argument handling (loom-eval passes "sandbox" so its dispatcher
	// reaches the sandbox command, which calls Init).
	HelperArgs []string
	// Pool is how many sandboxes the runner keeps started ahead of time
	// (namespaces and cgroups made, the helper waiting; see pool.go). A run
	// claims one instead of starting its own; each serves one run and is
	// destroyed. 0 means none.
	Pool int
	// Logger receives operational messages (stale cgroups removed, ...).
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// EgressResolver resolves, on the host, the names a run's egress policy
	// lets the sandbox reach; nil means the host's resolver (IPv4).
	EgressResolver func(ctx context.Context, host string) ([]netip.Addr, error)
	// EgressDial dials upstreams for the egress proxy; nil means a plain
	// net.Dialer.
	EgressDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// EgressRootCAs verifies upstreams the proxy reaches over TLS as the
	// client (credentials with UpstreamTLS); nil means the host's roots.
	EgressRootCAs *x509.CertPool
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Pool < 0 {
		errs = append(errs, fmt.Errorf("%w (got %d)", errPoolSize, c.Pool))
	}
	if c.HostUID < 0 || c.HostGID < 0 {
		errs = append(errs, fmt.Errorf("host_uid/host_gid: must not be negative (got %d/%d)", c.HostUID, c.HostGID))
	}
	if c.HostUID == 0 && c.HostGID != 0 || c.HostUID != 0 && c.HostGID == 0 {
		errs = append(errs, errors.New("host_uid/host_gid: set both or neither"))
	}
	if p := c.CgroupParent; p != "" {
		if strings.HasPrefix(p, "/") || strings.Contains(p, "..") || strings.ContainsAny(p, "\n\x00") {
			errs = append(errs, fmt.Errorf("cgroup_parent: must be a relative path without '..' (got %q)", p))
		}
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	c.Limits = c.Limits.Or(DefaultLimits())
	if c.HostUID == 0 {
		c.HostUID, c.HostGID = DefaultHostUID, DefaultHostGID
	}
	if c.CgroupParent == "" {
		c.CgroupParent = "loomwork-sandbox"
	}
	if c.Executable == "" {
		c.Executable = "/proc/self/exe"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.EgressResolver == nil {
		c.EgressResolver = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
		}
	}
	if c.EgressDial == nil {
		c.EgressDial = (&net.Dialer{}).DialContext
	}
	return c
}

// Request is one command to run.
type Request struct {
	// Command is the program and its arguments, resolved inside the sandbox
	// (a bare name is looked up in the sandbox PATH, /usr/bin:/bin).
	Command []string
	// Workspace is a host directory mounted read-write at /work and used as
	// the working directory. Its owner is changed to the sandbox uid for the
	// run. Empty means a fresh temporary directory, removed afterwards.
	Workspace string
	// Stdin is fed to the command; nil means /dev/null.
	Stdin []byte
	// Env holds extra KEY=VALUE pairs for the command. The host's environment
	// never passes; the command sees PATH, HOME, LANG and these only.
	Env []string
	// Limits override the runner's limits field by field (zero = runner's).
	Limits Limits
	// Egress is the run's network policy; nil (the default) means no
	// network at all. See Egress.
	Egress *Egress
}

// Validate reports problems with the request.
func (r Request) Validate() error {
	var errs []error
	if len(r.Command) == 0 || r.Command[0] == "" {
		errs = append(errs, errors.New("command: must name a program"))
	}
	for i, a := range r.Command {
		if strings.ContainsRune(a, 0) {
			errs = append(errs, fmt.Errorf("command[%d]: contains a NUL byte", i))
		}
	}
	for i, kv := range r.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			errs = append(errs, fmt.Errorf("env[%d]: want KEY=VALUE without NUL bytes (got %q)", i, kv))
		}
	}
	if err := r.Limits.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := r.Egress.prepared(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
