package reliability

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// loomEvalBuild is the one build of cmd/loom-eval the package's tests
// share (built as make install and the other tests build it, so Go's
// cache serves it: a link, not a compile of the whole CLI); TestMain removes its directory.
var loomEvalBuild struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// buildLoomEval builds cmd/loom-eval once for the package and returns the
// binary.
func buildLoomEval(t *testing.T) string {
	t.Helper()
	b := &loomEvalBuild
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "loomwork-reliability-")
		if b.err != nil {
			return
		}
		bin := filepath.Join(b.dir, "loom-eval")
		cmd := exec.Command("go", "build", "-o", bin, "github.com/loomwork/loomwork/cmd/loom-eval")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build cmd/loom-eval: %v\n%s", err, out)
			return
		}
		b.bin = bin
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// serveFeatures is what the built serve offers, read from its usage text:
// the suite runs the rows either way and records which features a run had.
type serveFeatures struct {
	Spool bool // --spool-dir and --spool-max-mib
}

func probeFeatures(t *testing.T, bin string) serveFeatures {
	t.Helper()
	out, _ := exec.Command(bin, "serve", "-h").CombinedOutput() // usage exits non-zero
	return serveFeatures{Spool: bytes.Contains(out, []byte("spool-dir")) && bytes.Contains(out, []byte("spool-max-mib"))}
}

// freeAddr returns a loopback address with a port free right now, so a
// restarted serve listens where the senders already point.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serveReady mirrors cmd/loom-eval's ServeReady (the --ready-file JSON).
type serveReady struct {
	PID      int    `json:"pid"`
	Store    string `json:"store"`
	GRPCAddr string `json:"grpc_addr"`
	HTTPAddr string `json:"http_addr"`
	UIAddr   string `json:"ui_addr"`
}

// serveProc is `loom-eval serve` as a child process. Its gRPC and UI
// addresses are fixed at creation so restarts keep them. Memory is sampled
// over every incarnation.
type serveProc struct {
	t        *testing.T
	bin      string
	dir      string
	args     []string // flags after the addresses and the ready file
	GRPCAddr string
	UIAddr   string

	cmd     *exec.Cmd
	done    chan struct{}
	exitErr error
	ready   serveReady
	sampler *rssSampler
	mem     memStats // over all incarnations so far
	starts  int
}

// startServe starts serve with args (e.g. --store …) and waits for its
// ready file. The process is killed when the test ends if still running.
func startServe(t *testing.T, bin string, args ...string) *serveProc {
	t.Helper()
	s := &serveProc{t: t, bin: bin, dir: t.TempDir(), args: args, GRPCAddr: freeAddr(t), UIAddr: freeAddr(t)}
	s.start()
	t.Cleanup(func() {
		if s.running() {
			s.signal(syscall.SIGKILL)
			<-s.done
		}
	})
	return s
}

func (s *serveProc) logPath() string {
	return filepath.Join(s.dir, fmt.Sprintf("serve.%d.log", s.starts))
}

func (s *serveProc) start() {
	t := s.t
	t.Helper()
	s.starts++
	readyFile := filepath.Join(s.dir, "ready.json")
	args := append([]string{"serve", "--grpc-addr", s.GRPCAddr, "--http-addr", "off", "--ui-addr", s.UIAddr,
		"--ready-file", readyFile, "--log-level", "warn"}, s.args...)
	logf, err := os.Create(s.logPath())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The kernel kills serve if the test binary dies (a test timeout must
	// not leave it running).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start serve: %v", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() {
		s.exitErr = cmd.Wait()
		logf.Close()
		close(s.done)
	}()
	s.sampler = sampleRSS(cmd.Process.Pid)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, err := os.ReadFile(readyFile); err == nil && json.Unmarshal(b, &s.ready) == nil && s.ready.PID == cmd.Process.Pid {
			s.sampler.resetIdle(cmd.Process.Pid) // idle: ready, before any load
			return
		}
		select {
		case <-s.done:
			t.Fatalf("serve %v exited before it was ready (%v); log:\n%s", args, s.exitErr, tailFile(s.logPath(), 40))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve %v not ready within 60 s; log:\n%s", args, tailFile(s.logPath(), 40))
		}
	}
}

func (s *serveProc) running() bool {
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

func (s *serveProc) signal(sig syscall.Signal) {
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		s.t.Errorf("signal serve (pid %d) %v: %v", s.cmd.Process.Pid, sig, err)
	}
}

// kill9 kills serve with SIGKILL and waits for it to be gone.
func (s *serveProc) kill9() {
	s.signal(syscall.SIGKILL)
	<-s.done
	s.mem = s.mem.max(s.sampler.stop())
}

// term sends SIGTERM and waits for the clean exit (serve drains for up to
// 30 s); a serve that has not exited after within is killed and the test
// fails.
func (s *serveProc) term(within time.Duration) {
	s.t.Helper()
	s.signal(syscall.SIGTERM)
	select {
	case <-s.done:
		if s.exitErr != nil {
			s.t.Errorf("serve exited with %v after SIGTERM; log:\n%s", s.exitErr, tailFile(s.logPath(), 20))
		}
	case <-time.After(within):
		s.signal(syscall.SIGKILL)
		<-s.done
		s.t.Errorf("serve did not exit within %s of SIGTERM (killed); log:\n%s", within, tailFile(s.logPath(), 20))
	}
	s.mem = s.mem.max(s.sampler.stop())
}

// restart starts serve again with the same flags and addresses.
func (s *serveProc) restart() {
	s.t.Helper()
	if s.running() {
		s.t.Fatal("restart of a running serve")
	}
	s.start()
}

// memory is the peak over every incarnation, the running one included.
func (s *serveProc) memory() memStats {
	m := s.mem
	if s.running() {
		m = m.max(s.sampler.now())
	}
	return m
}

// health is /healthz as issue 17 specifies it (store reachability and the
// spool's fill); OK is false while it answers something else (today: "ok").
type health struct {
	OK     bool   `json:"-"` // the answer was JSON
	Status int    `json:"-"` // HTTP status
	Raw    string `json:"-"`
	Store  struct {
		Reachable *bool `json:"reachable"`
	} `json:"store"`
	Spool *struct {
		Bytes    int64 `json:"bytes"`
		MaxBytes int64 `json:"max_bytes"`
	} `json:"spool"`
}

// readyz answers GET /readyz: its status and body.
func (s *serveProc) readyz() (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + s.UIAddr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b)
}

func (s *serveProc) health() health {
	var h health
	// serve pings the store for up to 2 s inside /healthz.
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + s.UIAddr + "/healthz")
	if err != nil {
		h.Raw = err.Error()
		return h
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return parseHealth(resp.StatusCode, b)
}

func parseHealth(code int, body []byte) health {
	var h health
	h.OK = json.Unmarshal(body, &h) == nil
	h.Status, h.Raw = code, strings.TrimSpace(string(body))
	return h
}

// memStats is serve's memory: VmHWM (the kernel's high-water mark) and
// the largest VmRSS sampled, plus VmRSS right after start (idle).
type memStats struct {
	HWM, MaxRSS, IdleRSS int64 // bytes
}

func (a memStats) max(b memStats) memStats {
	a.HWM = max(a.HWM, b.HWM)
	a.MaxRSS = max(a.MaxRSS, b.MaxRSS)
	if a.IdleRSS == 0 {
		a.IdleRSS = b.IdleRSS
	}
	return a
}

// rssSampler reads /proc/PID/status every 50 ms until stopped (or the
// process is gone); VmHWM read last before the process dies is its peak.
type rssSampler struct {
	mu   sync.Mutex
	m    memStats
	quit chan struct{}
	done chan struct{}
}

func sampleRSS(pid int) *rssSampler {
	r := &rssSampler{quit: make(chan struct{}), done: make(chan struct{})}
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	go func() {
		defer close(r.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			hwm, rss, ok := readStatus(path)
			if ok {
				r.mu.Lock()
				r.m.HWM = max(r.m.HWM, hwm)
				r.m.MaxRSS = max(r.m.MaxRSS, rss)
				if r.m.IdleRSS == 0 {
					r.m.IdleRSS = rss
				}
				r.mu.Unlock()
			}
			select {
			case <-r.quit:
				return
			case <-tick.C:
			}
		}
	}()
	return r
}

func (r *rssSampler) now() memStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m
}

func (r *rssSampler) stop() memStats {
	select {
	case <-r.quit:
	default:
		close(r.quit)
	}
	<-r.done
	return r.now()
}

// resetIdle takes the current VmRSS as the idle figure (after start-up
// and before load).
func (r *rssSampler) resetIdle(pid int) {
	_, rss, ok := readStatus("/proc/" + strconv.Itoa(pid) + "/status")
	if ok {
		r.mu.Lock()
		r.m.IdleRSS = rss
		r.mu.Unlock()
	}
}

func readStatus(path string) (hwm, rss int64, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, found := strings.Cut(sc.Text(), ":")
		if !found || (k != "VmHWM" && k != "VmRSS") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		if k == "VmHWM" {
			hwm = n << 10
		} else {
			rss = n << 10
		}
	}
	return hwm, rss, hwm > 0
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitFor polls cond every 200 ms until it holds or within passes.
func waitFor(ctx context.Context, within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}
