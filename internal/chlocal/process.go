package chlocal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// ProcessConfig configures a ClickHouse started as a child process.
type ProcessConfig struct {
	// Command is the launcher command line, e.g. {"/path/loom-eval",
	// "clickhouse-local"}; --lib, --path and --ports-file are appended.
	Command []string
	// LibPath is the path of libchdb.so.
	LibPath string
	// Dir is the server's working directory: data goes to Dir/data, the
	// ports file to Dir/clickhouse.ports, output to Dir/clickhouse.log.
	Dir string
	// StartTimeout bounds the wait for readiness (default 90 s).
	StartTimeout time.Duration
	// ExitWithParent makes the server stop when this process dies.
	ExitWithParent bool
	// ConfigFile, TCPPort and HTTPPort are passed to the launcher (see
	// Config); zero values keep its defaults.
	ConfigFile        string
	TCPPort, HTTPPort int
}

// Validate reports a missing setting.
func (c ProcessConfig) Validate() error {
	var errs []error
	if len(c.Command) == 0 || c.Command[0] == "" {
		errs = append(errs, errors.New("command: launcher command must be set"))
	}
	if c.LibPath == "" {
		errs = append(errs, errors.New("lib: path of libchdb.so must be set"))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("dir: working directory must be set"))
	}
	if c.StartTimeout < 0 {
		errs = append(errs, fmt.Errorf("start timeout must not be negative (got %s)", c.StartTimeout))
	}
	return errors.Join(errs...)
}

// Process is a running ClickHouse child process.
type Process struct {
	cmd      *exec.Cmd
	waitDone chan struct{}
	waitErr  error
	logPath  string
	// portsFile is the launcher's "ready" file; Stop removes it once the
	// process is gone, whatever the launcher managed to do.
	portsFile string
	// TCPPort and HTTPPort are the ports on 127.0.0.1.
	TCPPort, HTTPPort int
}

// StartProcess starts the launcher and waits until the server answers (the
// launcher writes the ports file only then). On failure the error carries
// the tail of the launcher's log.
func StartProcess(ctx context.Context, cfg ProcessConfig) (*Process, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("clickhouse process config: %w", err)
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 90 * time.Second
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create clickhouse dir: %w", err)
	}
	portsFile := filepath.Join(cfg.Dir, "clickhouse.ports")
	logPath := filepath.Join(cfg.Dir, "clickhouse.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create clickhouse log: %w", err)
	}
	defer logFile.Close()
	_ = os.Remove(portsFile)

	args := append(append([]string{}, cfg.Command[1:]...),
		"--lib", cfg.LibPath, "--path", filepath.Join(cfg.Dir, "data"), "--ports-file", portsFile)
	if cfg.ExitWithParent {
		args = append(args, "--parent-pid", strconv.Itoa(os.Getpid()))
	}
	if cfg.ConfigFile != "" {
		args = append(args, "--config", cfg.ConfigFile)
	}
	for _, p := range []struct {
		flag string
		port int
	}{{"--tcp-port", cfg.TCPPort}, {"--http-port", cfg.HTTPPort}} {
		if p.port != 0 {
			args = append(args, p.flag, strconv.Itoa(p.port))
		}
	}
	cmd := exec.Command(cfg.Command[0], args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Own process group, so a terminal's Ctrl-C reaches the parent only and
	// the parent decides when to stop the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cfg.Command[0], err)
	}
	p := &Process{cmd: cmd, waitDone: make(chan struct{}), logPath: logPath, portsFile: portsFile}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.waitDone)
	}()

	deadline := time.NewTimer(cfg.StartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(portsFile); err == nil {
			if tcp, http, ok := ParsePorts(string(b)); ok {
				p.TCPPort, p.HTTPPort = tcp, http
				return p, nil
			}
		}
		select {
		case <-p.waitDone:
			return nil, fmt.Errorf("clickhouse (pid %d) exited during start-up (%v); log %s ends with:\n%s",
				cmd.Process.Pid, p.waitErr, logPath, tail(logPath, 30))
		case <-ctx.Done():
			_ = p.Stop(context.Background())
			return nil, fmt.Errorf("wait for clickhouse: %w", ctx.Err())
		case <-deadline.C:
			_ = p.Stop(context.Background())
			return nil, fmt.Errorf("clickhouse (pid %d) did not become ready within %s; log %s ends with:\n%s",
				cmd.Process.Pid, cfg.StartTimeout, logPath, tail(logPath, 30))
		case <-tick.C:
		}
	}
}

// Pid is the launcher's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// DSN is the native-protocol address of database db.
func (p *Process) DSN(db string) string {
	return "clickhouse://" + ListenHost + ":" + strconv.Itoa(p.TCPPort) + "/" + db
}

// LogPath is the launcher's combined output.
func (p *Process) LogPath() string { return p.logPath }

// Stop sends SIGTERM to the launcher and waits for it to exit; it sends
// SIGKILL if ctx ends first. Calling it again is a no-op.
func (p *Process) Stop(ctx context.Context) error {
	select {
	case <-p.waitDone:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal clickhouse (pid %d): %w", p.Pid(), err)
	}
	select {
	case <-p.waitDone:
		p.removePortsFile()
		return nil
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-p.waitDone
		p.removePortsFile()
		return fmt.Errorf("clickhouse (pid %d) ignored SIGTERM, killed: %w", p.Pid(), ctx.Err())
	}
}

// removePortsFile removes the ready file of a stopped launcher. The
// launcher removes it itself on a clean stop, but the ClickHouse engine it
// hosts installs its own signal handlers, and when one of those ends the
// process first (seen under load) the file stays behind and would say
// "ready" for a server that is gone.
func (p *Process) removePortsFile() {
	if p.portsFile != "" {
		_ = os.Remove(p.portsFile)
	}
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	const max = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	lines := 0
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' && i != len(b)-1 {
			lines++
			if lines == n {
				return string(b[i+1:])
			}
		}
	}
	return string(b)
}

// Kill sends SIGKILL to the launcher and waits for it to exit: a crash,
// for tests of what a cluster does when a node dies mid-write. The data
// directory stays; StartProcess on it again restarts the node.
func (p *Process) Kill() error {
	select {
	case <-p.waitDone:
		return nil
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill clickhouse (pid %d): %w", p.Pid(), err)
	}
	<-p.waitDone
	p.removePortsFile()
	return nil
}

// Exited reports whether the launcher has exited (crashed, killed or
// stopped), and if so how (the exit status as an error, nil for 0).
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.waitDone:
		return true, p.waitErr
	default:
		return false, nil
	}
}
