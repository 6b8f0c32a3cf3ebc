package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The helper is recognised by both its argv[0] and an environment variable
// set only when the runner starts it; either alone could be an accident.
const (
	helperArg0     = "loomwork-sandbox-init"
	helperEnv      = "LOOMWORK_SANDBOX_INIT"
	helperEnvValue = "1"
	helperCfgFD    = 3 // parent → helper: helperConfig as JSON, then EOF
	helperStatusFD = 4 // helper → parent: helperStatus as JSON
)

// Inside the sandbox the command runs as this uid/gid; the uid map sends it to
// Config.HostUID/HostGID on the host. Inside uid 0 is only the helper.
const (
	sandboxUID = 1000
	sandboxGID = 1000
)

// sandboxPath is the command's PATH; the same directories are searched for a
// bare command name.
const sandboxPath = "/usr/local/bin:/usr/bin:/bin"

// helperConfig is what the parent tells the helper once the helper is inside
// every cgroup (the helper does nothing before it arrives).
type helperConfig struct {
	Command      []string `json:"command"`
	Env          []string `json:"env"`
	Workspace    string   `json:"workspace"`
	CPUSeconds   uint64   `json:"cpu_seconds"`
	FileSize     uint64   `json:"file_size"`
	OpenFiles    uint64   `json:"open_files"`
	AddressSpace uint64   `json:"address_space"`
	Tmp          int64    `json:"tmp"`
	Seccomp      bool     `json:"seccomp"`
	Stdin        bool     `json:"stdin"` // false: stdin is /dev/null
}

// helperStatus is what the helper reports before it exits.
type helperStatus struct {
	SetupError string `json:"setup_error,omitempty"`
	StartError string `json:"start_error,omitempty"`
	// BadCommand: StartError is the command's own fault (badCommand).
	BadCommand bool     `json:"bad_command,omitempty"`
	Started    bool     `json:"started"`
	Exited     bool     `json:"exited"`
	ExitCode   int      `json:"exit_code"`
	Signal     int      `json:"signal"`
	UserUsec   int64    `json:"user_usec"`
	SysUsec    int64    `json:"sys_usec"`
	MaxRSSKiB  int64    `json:"max_rss_kib"`
	BigFiles   []string `json:"big_files,omitempty"`
}

// Init must be the first statement of main (and of TestMain in any package
// whose tests run sandboxes). In an ordinary process it returns at once; in a
// process started by a Runner as the sandbox's init helper it runs the helper
// and exits, never returning.
func Init() {
	if len(os.Args) == 0 || os.Args[0] != helperArg0 || os.Getenv(helperEnv) != helperEnvValue {
		return
	}
	os.Exit(runHelper())
}

func runHelper() int {
	// Mounts, no-new-privs, seccomp and ptrace are per thread or need one
	// thread throughout; the command is forked from this locked thread so it
	// inherits exactly what was set here.
	runtime.LockOSThread()
	cfgFile := os.NewFile(helperCfgFD, "sandbox-config")
	statusFile := os.NewFile(helperStatusFD, "sandbox-status")
	if cfgFile == nil || statusFile == nil {
		fmt.Fprintln(os.Stderr, "sandbox helper: started without its pipes")
		return 125
	}
	// The command must not inherit the status pipe (it could forge a report).
	syscall.CloseOnExec(helperCfgFD)
	syscall.CloseOnExec(helperStatusFD)

	var st helperStatus
	enc := json.NewEncoder(statusFile)
	report := func() int {
		_ = enc.Encode(&st)
		_ = statusFile.Close()
		return 0
	}

	// Line 1 from the parent is the config. The helper is in the run's
	// cgroup2 directory since clone; the command's limits come with the
	// hand-off below.
	in := bufio.NewReader(io.LimitReader(cfgFile, 16<<20))
	var cfg helperConfig
	line, err := in.ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &cfg)
	}
	if err != nil || len(cfg.Command) == 0 {
		st.SetupError = fmt.Sprintf("read config: %v (%d bytes)", err, len(line))
		return report()
	}
	if err := buildRoot(&cfg); err != nil {
		st.SetupError = err.Error()
		return report()
	}
	// The command is stopped at its exec until the parent has moved it into
	// its own pids cgroup (exact limit, the helper's threads not counted)
	// and answered "go".
	handoff := func() error {
		if err := enc.Encode(helperStopped{Stopped: true}); err != nil {
			return fmt.Errorf("tell parent the command is ready: %w", err)
		}
		ans, err := in.ReadString('\n')
		if err != nil || ans != "go\n" {
			return fmt.Errorf("wait for parent: got %q: %v", ans, err)
		}
		return nil
	}
	started := time.Now()
	pid, err := startCommand(&cfg, handoff)
	_ = cfgFile.Close()
	if err != nil {
		st.StartError = err.Error()
		st.BadCommand = badCommand(err)
		return report()
	}
	st.Started = true
	reap(pid, &st)
	st.BigFiles = findBigFiles(cfg.FileSize, started, "/work", "/tmp")
	// Returning kills everything still running: the helper is pid 1 of the
	// run's pid namespace.
	return report()
}

// helperStopped is the helper's first message once the command is stopped
// at its exec with its rlimits set.
type helperStopped struct {
	Stopped bool `json:"stopped"`
}

// buildRoot makes the filesystem the command sees and pivots into it.
func buildRoot(cfg *helperConfig) error {
	// Nothing done here may propagate back to the host's mount table.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// Hold the workspace by fd before anything is mounted over its path.
	ws, err := unix.Open(cfg.Workspace, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open workspace %s: %w", cfg.Workspace, err)
	}
	defer unix.Close(ws)

	const root = "/tmp" // any existing directory works; it is covered, not used
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1m,mode=0755"); err != nil {
		return fmt.Errorf("mount root tmpfs: %w", err)
	}
	if err := bindReadOnly("/usr", root+"/usr"); err != nil {
		return err
	}
	for _, name := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		host := "/" + name
		fi, err := os.Lstat(host)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return fmt.Errorf("stat %s: %w", host, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(host)
			if err != nil {
				return fmt.Errorf("read link %s: %w", host, err)
			}
			// Only links into /usr make sense: nothing else is mounted.
			if err := os.Symlink(target, root+host); err != nil {
				return fmt.Errorf("link %s: %w", host, err)
			}
		case fi.IsDir():
			if err := bindReadOnly(host, root+host); err != nil {
				return err
			}
		}
	}
	if err := os.Mkdir(root+"/proc", 0o555); err != nil {
		return fmt.Errorf("make /proc: %w", err)
	}
	if err := unix.Mount("proc", root+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if err := os.Mkdir(root+"/tmp", 0o755); err != nil {
		return fmt.Errorf("make /tmp: %w", err)
	}
	if err := unix.Mount("tmpfs", root+"/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("size=%d,mode=1777", cfg.Tmp)); err != nil {
		return fmt.Errorf("mount /tmp: %w", err)
	}
	if err := os.Mkdir(root+"/dev", 0o755); err != nil {
		return fmt.Errorf("make /dev: %w", err)
	}
	for _, dev := range []string{"null", "zero", "urandom"} {
		target := root + "/dev/" + dev
		f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o666)
		if err != nil {
			return fmt.Errorf("make /dev/%s: %w", dev, err)
		}
		_ = f.Close()
		if err := unix.Mount("/dev/"+dev, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", dev, err)
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, root+"/dev/"+name); err != nil {
			return fmt.Errorf("link /dev/%s: %w", name, err)
		}
	}
	if err := os.Mkdir(root+"/work", 0o755); err != nil {
		return fmt.Errorf("make /work: %w", err)
	}
	if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", ws), root+"/work", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind workspace %s: %w", cfg.Workspace, err)
	}
	if err := remountBind(root+"/work", unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return err
	}

	if err := os.Mkdir(root+"/.old", 0o700); err != nil {
		return fmt.Errorf("make pivot dir: %w", err)
	}
	if err := unix.PivotRoot(root, root+"/.old"); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("chdir /: %w", err)
	}
	// Detach the host's tree; after this nothing of it is reachable.
	if err := unix.Unmount("/.old", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := os.Remove("/.old"); err != nil {
		return fmt.Errorf("remove pivot dir: %w", err)
	}
	if err := remountBind("/", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte("sandbox")); err != nil {
		return fmt.Errorf("set hostname: %w", err)
	}
	return nil
}

// bindReadOnly bind-mounts src at dst read-only, nosuid, nodev.
func bindReadOnly(src, dst string) error {
	if err := os.Mkdir(dst, 0o755); err != nil {
		return fmt.Errorf("make %s: %w", dst, err)
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	return remountBind(dst, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV)
}

// remountBind applies flags to a bind mount. Inside a user namespace the
// kernel refuses a remount that would clear a flag the mount already has
// (noexec, atime flags, ...), so those are carried over.
func remountBind(dst string, flags uintptr) error {
	var sfs unix.Statfs_t
	if err := unix.Statfs(dst, &sfs); err != nil {
		return fmt.Errorf("statfs %s: %w", dst, err)
	}
	keep := map[int64]uintptr{
		unix.ST_RDONLY:      unix.MS_RDONLY,
		unix.ST_NOSUID:      unix.MS_NOSUID,
		unix.ST_NODEV:       unix.MS_NODEV,
		unix.ST_NOEXEC:      unix.MS_NOEXEC,
		unix.ST_NOATIME:     unix.MS_NOATIME,
		unix.ST_NODIRATIME:  unix.MS_NODIRATIME,
		unix.ST_RELATIME:    unix.MS_RELATIME,
		unix.ST_SYNCHRONOUS: unix.MS_SYNCHRONOUS,
	}
	for st, ms := range keep {
		if sfs.Flags&st != 0 {
			flags |= ms
		}
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|flags, ""); err != nil {
		return fmt.Errorf("remount %s: %w", dst, err)
	}
	return nil
}

// startCommand forks the command from the locked thread with no-new-privs
// and the seccomp filter in place, stopped at its exec (ptrace) so its
// rlimits — including RLIMIT_AS, which would break the Go helper — are set
// before it runs a single instruction.
func startCommand(cfg *helperConfig, handoff func() error) (int, error) {
	argv0, err := lookPath(cfg.Command[0])
	if err != nil {
		return 0, err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, fmt.Errorf("set no_new_privs: %w", err)
	}
	if cfg.Seccomp {
		if err := loadSeccomp(); err != nil {
			return 0, err
		}
	}
	env := append([]string{"PATH=" + sandboxPath, "HOME=/work", "LANG=C.UTF-8", "TMPDIR=/tmp"}, cfg.Env...)
	stdin := uintptr(0)
	if !cfg.Stdin {
		devnull, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return 0, fmt.Errorf("open /dev/null: %w", err)
		}
		defer syscall.Close(devnull)
		stdin = uintptr(devnull)
	}
	pid, err := syscall.ForkExec(argv0, cfg.Command, &syscall.ProcAttr{
		Dir:   "/work",
		Env:   env,
		Files: []uintptr{stdin, 1, 2},
		Sys: &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: sandboxUID, Gid: sandboxGID, Groups: []uint32{}},
			Setsid:     true,
			Ptrace:     true,
		},
	})
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", cfg.Command[0], err)
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
		return 0, fmt.Errorf("wait for exec stop: %w", err)
	}
	if !ws.Stopped() {
		return 0, fmt.Errorf("start %s: expected a stop at exec, got status %#x", cfg.Command[0], uint32(ws))
	}
	limits := []struct {
		res      int
		cur, max uint64
		name     string
	}{
		{unix.RLIMIT_CPU, cfg.CPUSeconds, cfg.CPUSeconds + 1, "cpu"},
		{unix.RLIMIT_FSIZE, cfg.FileSize, cfg.FileSize, "fsize"},
		{unix.RLIMIT_NOFILE, cfg.OpenFiles, cfg.OpenFiles, "nofile"},
		{unix.RLIMIT_AS, cfg.AddressSpace, cfg.AddressSpace, "as"},
		{unix.RLIMIT_CORE, 0, 0, "core"},
	}
	for _, l := range limits {
		if err := unix.Prlimit(pid, l.res, &unix.Rlimit{Cur: l.cur, Max: l.max}, nil); err != nil {
			_ = unix.Kill(pid, unix.SIGKILL)
			return 0, fmt.Errorf("set rlimit %s: %w", l.name, err)
		}
	}
	if err := handoff(); err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		return 0, err
	}
	if err := unix.PtraceDetach(pid); err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		return 0, fmt.Errorf("release command after exec: %w", err)
	}
	return pid, nil
}

func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(sandboxPath) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("start %s: %w %s", name, errNotOnPath, sandboxPath)
}

// errNotOnPath is a bare command name no folder of the sandbox's PATH has.
var errNotOnPath = errors.New("not found in the sandbox PATH")

// badCommand reports whether a start error is the command's fault rather
// than the sandbox's: a name not on the sandbox's PATH, or an exec that
// failed on the file itself (missing, not executable, not a program).
func badCommand(err error) bool {
	for _, e := range []error{errNotOnPath, syscall.ENOENT, syscall.EACCES, syscall.ENOEXEC, syscall.ENOTDIR,
		syscall.EISDIR, syscall.ELOOP, syscall.ENAMETOOLONG, syscall.E2BIG} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// reap waits for the command, reaping every orphan re-parented to the helper
// on the way (it is pid 1), and records the command's own status and usage.
func reap(pid int, st *helperStatus) {
	for {
		var ws unix.WaitStatus
		var ru unix.Rusage
		wpid, err := unix.Wait4(-1, &ws, 0, &ru)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		if wpid != pid {
			continue
		}
		if ws.Stopped() {
			continue
		}
		st.UserUsec = ru.Utime.Sec*1e6 + ru.Utime.Usec
		st.SysUsec = ru.Stime.Sec*1e6 + ru.Stime.Usec
		st.MaxRSSKiB = ru.Maxrss
		if ws.Exited() {
			st.Exited, st.ExitCode = true, ws.ExitStatus()
		} else if ws.Signaled() {
			st.Signal = int(ws.Signal())
		}
		return
	}
}

// findBigFiles lists files at or over the file-size limit: a write cut short
// by RLIMIT_FSIZE leaves the file exactly at the limit (programs such as
// Python ignore SIGXFSZ and see EFBIG instead, so the size is the evidence).
// Only files written during the run count (a large input is not evidence).
func findBigFiles(limit uint64, since time.Time, dirs ...string) []string {
	var out []string
	seen := 0
	for _, dir := range dirs {
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			seen++
			if err != nil || seen > 20000 || len(out) >= 10 {
				return filepath.SkipDir
			}
			if !d.Type().IsRegular() {
				return nil
			}
			if fi, err := d.Info(); err == nil && uint64(fi.Size()) >= limit && !fi.ModTime().Before(since.Add(-time.Second)) {
				out = append(out, fmt.Sprintf("%s (%d bytes)", path, fi.Size()))
			}
			return nil
		})
	}
	return out
}
