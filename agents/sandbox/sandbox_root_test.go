package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/testtier"
)

// decode parses the last stdout line of a run as JSON into v.
func decode(t *testing.T, res *Result, v any) {
	t.Helper()
	out := strings.TrimSpace(res.Stdout)
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		out = out[i+1:]
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("decode sandbox output: %v\nresult: %s\nstdout: %s\nstderr: %s", err, res.Summary(), res.Stdout, res.Stderr)
	}
}

// probe is Python that tries each path and reports the errno (0 = success).
const probeRead = `
import json, os, sys
out = {}
for p in sys.argv[1:]:
    try:
        if os.path.isdir(p):
            os.listdir(p)
        else:
            open(p, 'rb').read()
        out[p] = 0
    except OSError as e:
        out[p] = e.errno
print(json.dumps(out))
`

func TestRootHostSecretsAreAbsentNotJustUnreadable(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Dir(filepath.Dir(wd)) // agents/sandbox -> repository root
	outside := t.TempDir()
	dotenv := filepath.Join(outside, ".env")
	if err := os.WriteFile(dotenv, []byte("API_KEY=sk-live-should-never-be-seen\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	paths := []string{"/etc/shadow", "/etc/passwd", "/etc", "/root", "/root/.ssh", "/home",
		repo, wd, filepath.Join(repo, "go.mod"), dotenv, outside, "/var", "/run", "/sys", "/boot"}
	res := py(t, r, probeRead, Request{Command: paths})
	var got map[string]int
	decode(t, res, &got)
	for _, p := range paths {
		if got[p] != int(syscall.ENOENT) {
			t.Errorf("%s: want ENOENT (absent), got errno %d", p, got[p])
		}
	}
}

func TestRootHostEnvironmentIsAbsent(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	secret := token(t)
	t.Setenv("LOOMWORK_TEST_SECRET", secret)
	hostInit, _ := os.ReadFile("/proc/1/cmdline")
	res := py(t, r, `
import json, os
env = dict(os.environ)
procs = {}
for pid in os.listdir('/proc'):
    if pid.isdigit():
        for f in ('environ', 'cmdline'):
            try:
                procs[pid + '/' + f] = open('/proc/%s/%s' % (pid, f), 'rb').read().decode('latin1')
            except OSError as e:
                procs[pid + '/' + f] = 'errno %d' % e.errno
print(json.dumps({'env': env, 'procs': procs}))
`, Request{Env: []string{"EXTRA=explicit"}})
	var got struct {
		Env   map[string]string
		Procs map[string]string
	}
	decode(t, res, &got)
	want := map[string]string{"PATH": sandboxPath, "HOME": "/work", "LANG": "C.UTF-8", "TMPDIR": "/tmp", "EXTRA": "explicit"}
	if len(got.Env) != len(want) {
		t.Errorf("environment: want exactly %v, got %v", want, got.Env)
	}
	for k, v := range want {
		if got.Env[k] != v {
			t.Errorf("env %s: want %q, got %q", k, v, got.Env[k])
		}
	}
	for k, v := range got.Procs {
		if strings.Contains(v, secret) {
			t.Errorf("%s leaks the host's environment: %q", k, v)
		}
		if len(hostInit) > 0 && strings.HasSuffix(k, "/cmdline") && v == string(hostInit) {
			t.Errorf("%s shows the host's pid 1 (%q)", k, v)
		}
	}
	if v, ok := got.Procs["1/environ"]; !ok || !strings.HasPrefix(v, "errno ") {
		t.Errorf("/proc/1/environ (the helper's) should be unreadable to the command, got %q", v)
	}
}

func TestRootWritesOutsideWorkspaceFailWithEROFS(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	res := py(t, r, `
import json, os, sys
out = {}
for p in sys.argv[1:]:
    try:
        open(p, 'w').write('x')
        out[p] = 0
    except OSError as e:
        out[p] = e.errno
try:
    os.mkdir('/newdir'); out['mkdir /newdir'] = 0
except OSError as e:
    out['mkdir /newdir'] = e.errno
try:
    os.chmod('/usr/bin/python3', 0o777); out['chmod python3'] = 0
except OSError as e:
    out['chmod python3'] = e.errno
print(json.dumps(out))
`, Request{Command: []string{"/usr/evil", "/usr/bin/evil", "/evil", "/dev/evil", "/work/ok", "/tmp/ok"}})
	var got map[string]int
	decode(t, res, &got)
	for _, p := range []string{"/usr/evil", "/usr/bin/evil", "/evil", "/dev/evil", "mkdir /newdir"} {
		if got[p] != int(syscall.EROFS) {
			t.Errorf("%s: want EROFS, got errno %d", p, got[p])
		}
	}
	if got["chmod python3"] == 0 {
		t.Errorf("chmod of /usr/bin/python3 succeeded")
	}
	for _, p := range []string{"/work/ok", "/tmp/ok"} {
		if got[p] != 0 {
			t.Errorf("%s: the workspace and /tmp must stay writable, got errno %d", p, got[p])
		}
	}
}

func TestRootNetworkIsUnreachableIncludingHostLoopback(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted int
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted++
			mu.Unlock()
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	// Prove the server answers from the host, so "unreachable" below means
	// the sandbox and not a dead server.
	if c, err := net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatalf("host cannot reach its own test server: %v", err)
	} else {
		c.Close()
	}
	res := py(t, r, `
import json, socket, sys, fcntl, struct
port = int(sys.argv[1])
out = {}
out['interfaces'] = [n for _, n in socket.if_nameindex()]
probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack('16sH', fcntl.ioctl(probe.fileno(), 0x8913, struct.pack('16sH', b'lo', 0)))[1]
probe.close()
out['lo_up'] = bool(flags & 1)
# Addresses off this machine are tried only when the namespace has no way
# out (no interface but a down lo), so a broken sandbox fails the checks
# below without sending anything anywhere. 192.0.2.1 and 198.51.100.1 are
# documentation addresses; 169.254.169.254 is the cloud metadata service.
isolated = out['interfaces'] in ([], ['lo']) and not out['lo_up']
hosts = ['127.0.0.1', '::1'] + (['192.0.2.1', '198.51.100.1', '169.254.169.254'] if isolated else [])
for host in hosts:
    fam = socket.AF_INET6 if ':' in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect((host, port if host in ('127.0.0.1', '::1') else 80))
        out['tcp ' + host] = 'connected'
    except OSError as e:
        out['tcp ' + host] = e.errno
    s.close()
if isolated:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.sendto(b'x', ('192.0.2.1', 53)); out['udp 192.0.2.1'] = 'sent'
    except OSError as e:
        out['udp 192.0.2.1'] = e.errno
    u.close()
print(json.dumps(out))
`, Request{Command: []string{strconv.Itoa(port)}})
	ln.Close()
	wg.Wait()
	var got map[string]any
	decode(t, res, &got)
	for k, v := range got {
		if strings.HasPrefix(k, "tcp ") || strings.HasPrefix(k, "udp ") {
			if _, isErrno := v.(float64); !isErrno {
				t.Errorf("%s: want an error, got %v", k, v)
			}
		}
	}
	if ifs, _ := got["interfaces"].([]any); len(ifs) > 1 || (len(ifs) == 1 && ifs[0] != "lo") {
		t.Errorf("interfaces: want at most a down lo, got %v", ifs)
	}
	if got["lo_up"] != false {
		t.Errorf("lo must be down, got up=%v", got["lo_up"])
	}
	for _, k := range []string{"tcp 127.0.0.1", "tcp ::1", "tcp 192.0.2.1", "tcp 169.254.169.254", "udp 192.0.2.1"} {
		if _, ok := got[k]; !ok {
			t.Errorf("%s was not probed (the namespace was not isolated, so off-machine probes were skipped): %v", k, got)
		}
	}
	if accepted != 1 {
		t.Errorf("test server accepted %d connections; want only the host's own probe", accepted)
	}
}

func TestRootForkBombRefusedAtFirstForkPastPidsLimit(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	const tasks = 16
	res := py(t, r, `
import json, os, time
t0 = time.monotonic()
n = 0
while True:
    try:
        pid = os.fork()
    except OSError as e:
        print(json.dumps({'forks': n, 'errno': e.errno, 'ms': (time.monotonic() - t0) * 1000}))
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    n += 1
`, Request{Limits: Limits{Tasks: tasks}})
	var got struct {
		Forks, Errno int
		MS           float64
	}
	decode(t, res, &got)
	// The command itself is one task; so tasks-1 forks fit and the next fails.
	if got.Forks != tasks-1 || got.Errno != int(syscall.EAGAIN) {
		t.Errorf("want fork %d refused with EAGAIN, got %d forks then errno %d", tasks, got.Forks, got.Errno)
	}
	if res.Reason != ReasonPids || res.Counters.PidsMax < 1 {
		t.Errorf("want reason pids with pids.events max >= 1, got %s, counters %+v", res.Reason, res.Counters)
	}
	if !slices.ContainsFunc(res.Evidence, func(s string) bool { return strings.Contains(s, "pids.events max=") }) {
		t.Errorf("evidence must quote pids.events, got %v", res.Evidence)
	}
	t.Logf("refused fork %d after %.1f ms (pids.events max=%d)", got.Forks+1, got.MS, res.Counters.PidsMax)
}

func TestRootUnhandledForkBombIsContainedAndReported(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	tok := token(t)
	res := py(t, r, `
import os
while True:
    os.fork()
`, Request{Command: []string{tok}, Limits: Limits{Tasks: 32, WallTime: 5 * time.Second}})
	if res.Counters.PidsMax < 1 || !slices.ContainsFunc(res.Evidence, func(s string) bool { return strings.Contains(s, "pids.events") }) {
		t.Errorf("want pids.events evidence, got %s %v", res.Summary(), res.Evidence)
	}
	if left := hostProcsWith(t, tok); len(left) > 0 {
		t.Errorf("fork bomb left processes on the host: %v", left)
	}
}

func TestRootMemoryHogKilledAndReportedAsMemory(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	res := py(t, r, `
x = []
while True:
    x.append(bytearray(1 << 20))
`, Request{Limits: Limits{Memory: 64 << 20}})
	if res.Reason != ReasonMemory || res.Counters.OOMKills < 1 || res.Signal != "SIGKILL" {
		t.Errorf("want SIGKILL for memory with oom_kill >= 1, got %s counters %+v", res.Summary(), res.Counters)
	}
	if !slices.ContainsFunc(res.Evidence, func(s string) bool { return strings.Contains(s, "oom_kill=") }) {
		t.Errorf("evidence must quote the OOM counter, got %v", res.Evidence)
	}
}

func TestRootCPULimitKillsAndIsReported(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	t.Parallel()     // its own runner; waits on a limit or the network
	r := newRunner(t, Config{})
	// A generous wall clock: on a loaded machine one CPU-second can take many.
	res := py(t, r, "while True: pass", Request{Limits: Limits{CPUTime: time.Second, WallTime: 2 * time.Minute}})
	if res.Reason != ReasonCPU || res.Signal != "SIGXCPU" {
		t.Errorf("want SIGXCPU for cpu, got %s %v", res.Summary(), res.Evidence)
	}
}

func TestRootCPUBudgetCoversTheWholeTree(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	t.Parallel()     // its own runner; waits on a limit or the network
	r := newRunner(t, Config{})
	// Four processes each stay under RLIMIT_CPU's 2s, but together pass it.
	res := py(t, r, `
import os, time
for i in range(4):
    if os.fork() == 0:
        t0 = time.process_time()
        while time.process_time() - t0 < 1.8: pass
        os._exit(0)
for i in range(4): os.wait()
`, Request{Limits: Limits{CPUTime: 2 * time.Second, WallTime: 2 * time.Minute}})
	if res.Reason != ReasonCPU || !slices.ContainsFunc(res.Evidence, func(s string) bool { return strings.Contains(s, "cpu.stat usage_usec=") }) {
		t.Errorf("want cpu from the cgroup's cpu.stat, got %s %v", res.Summary(), res.Evidence)
	}
}

func TestRootFileSizeLimitTriggersAndIsReported(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	ws := t.TempDir()
	const limit = 1 << 20
	// Python ignores SIGXFSZ and sees EFBIG; the file stops at the limit.
	res := py(t, r, `
import errno, sys
try:
    open('/work/big', 'wb').write(b'x' * (2 << 20))
except OSError as e:
    sys.exit(e.errno)
`, Request{Workspace: ws, Limits: Limits{FileSize: limit}})
	if res.Reason != ReasonFileSize || res.ExitCode != int(syscall.EFBIG) {
		t.Errorf("want file_size with exit EFBIG, got %s %v", res.Summary(), res.Evidence)
	}
	if fi, err := os.Stat(filepath.Join(ws, "big")); err != nil || fi.Size() != limit {
		t.Errorf("want /work/big cut at %d bytes, got %v %v", limit, fi, err)
	}
	// A program that keeps the default action is killed by SIGXFSZ.
	res = py(t, r, `
import signal
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
open('/tmp/big', 'wb').write(b'x' * (2 << 20))
`, Request{Limits: Limits{FileSize: limit}})
	if res.Reason != ReasonFileSize || res.Signal != "SIGXFSZ" {
		t.Errorf("want SIGXFSZ for file_size, got %s %v", res.Summary(), res.Evidence)
	}
}

func TestRootOpenFilesLimitTriggersAndIsReported(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	res := py(t, r, `
fs = []
while True:
    fs.append(open('/dev/null'))
`, Request{Limits: Limits{OpenFiles: 32}})
	if res.Reason != ReasonOpenFiles || res.ExitCode != 1 {
		t.Errorf("want open_files, got %s %v", res.Summary(), res.Evidence)
	}
}

func TestRootAddressSpaceLimitAppliesToTheCommandOnly(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	res := py(t, r, `
import json, resource
try:
    b = bytearray(512 << 20); got = 'allocated'
except MemoryError:
    got = 'MemoryError'
print(json.dumps({'as': resource.getrlimit(resource.RLIMIT_AS), 'alloc': got}))
`, Request{Limits: Limits{AddressSpace: 256 << 20, Memory: 1 << 30}})
	var got struct {
		AS    []int64
		Alloc string
	}
	decode(t, res, &got)
	if len(got.AS) != 2 || got.AS[0] != 256<<20 || got.Alloc != "MemoryError" {
		t.Errorf("want RLIMIT_AS 256 MiB refusing a 512 MiB allocation, got %+v (%s)", got, res.Summary())
	}
}

func TestRootCommandRunsUnprivilegedWithSeccompAndNoNewPrivs(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	res := py(t, r, `
import json, os, socket, ctypes
st = dict(l.split(':\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\t' in l)
libc = ctypes.CDLL(None, use_errno=True)
def err(rc):
    return ctypes.get_errno() if rc != 0 else 0
out = {
  'uid': os.getuid(), 'euid': os.geteuid(), 'gid': os.getgid(), 'groups': os.getgroups(),
  'capeff': st['CapEff'].strip(), 'capprm': st['CapPrm'].strip(), 'nnp': st['NoNewPrivs'].strip(),
  'seccomp': st['Seccomp'].strip(), 'hostname': socket.gethostname(),
  'unshare_user': err(libc.unshare(0x10000000)),
  'mount': err(libc.mount(b'tmpfs', b'/tmp', b'tmpfs', 0, None)),
  'pid': os.getpid(),
  # Raw syscalls whose kernel answer differs from the filter's: a filtered
  # call gets EPERM/ENOSYS, an allowed one ESRCH/EINVAL from the kernel.
  'ptrace_peek': err(libc.syscall(101, 2, 99999, 0, 0)),
  'ptrace_detach': err(libc.syscall(101, 17, 99999, 0, 0)),
  'clone_newuser': err(libc.syscall(56, 0x10000000 | 0x10000, 0, 0, 0, 0)),
  'clone_plain': err(libc.syscall(56, 0x10000, 0, 0, 0, 0)),
  'clone3': err(libc.syscall(435, 0, 0)),
}
print(json.dumps(out))
`, Request{})
	var got struct {
		UID, EUID, GID      int
		Groups              []int
		CapEff, CapPrm, NNP string
		Seccomp, Hostname   string
		UnshareUser         int `json:"unshare_user"`
		Mount, PID          int
	}
	decode(t, res, &got)
	if got.UID != sandboxUID || got.EUID != sandboxUID || got.GID != sandboxGID || len(got.Groups) != 0 {
		t.Errorf("want uid/gid %d/%d and no groups, got %+v", sandboxUID, sandboxGID, got)
	}
	if got.CapEff != "0000000000000000" || got.CapPrm != "0000000000000000" {
		t.Errorf("want no capabilities, got eff %s prm %s", got.CapEff, got.CapPrm)
	}
	if got.NNP != "1" || got.Seccomp != "2" {
		t.Errorf("want no_new_privs 1 and seccomp mode 2, got %s / %s", got.NNP, got.Seccomp)
	}
	if got.UnshareUser != int(syscall.EPERM) || got.Mount != int(syscall.EPERM) {
		t.Errorf("want unshare(CLONE_NEWUSER) and mount refused with EPERM, got %d / %d\n%s", got.UnshareUser, got.Mount, res.Stdout)
	}
	var raw map[string]any
	decode(t, res, &raw)
	wantErrno := map[string]syscall.Errno{
		"ptrace_peek": syscall.EPERM, "ptrace_detach": syscall.ESRCH,
		"clone_newuser": syscall.EPERM, "clone_plain": syscall.EINVAL, "clone3": syscall.ENOSYS,
	}
	for k, want := range wantErrno {
		if got, _ := raw[k].(float64); syscall.Errno(got) != want {
			t.Errorf("%s: want %v, got errno %v", k, want, raw[k])
		}
	}
	// pid 1 is the helper; the helper's threads take a few tids, so the
	// command's pid is small but not necessarily 2.
	if got.Hostname != "sandbox" || got.PID <= 1 || got.PID > 32 {
		t.Errorf("want hostname sandbox and the command a low pid in its own namespace, got %q pid %d", got.Hostname, got.PID)
	}
}

func TestRootTimeoutKillsDaemonisedGrandchildAndRemovesCgroups(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	t.Parallel()     // its own runner; waits on a limit or the network
	r := newRunner(t, Config{})
	ws := t.TempDir()
	tok := token(t)
	res := py(t, r, `
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open('/work/daemon-started', 'w').write(str(os.getpid()))
        os.execv('/usr/bin/sleep', ['sleep-' + sys.argv[1], '300'])
    os._exit(0)
while not os.path.exists('/work/daemon-started'):
    time.sleep(0.01)
time.sleep(300)
`, Request{Command: []string{tok}, Workspace: ws, Limits: Limits{WallTime: 5 * time.Second}})
	if res.Reason != ReasonTimeout || res.Exited {
		t.Errorf("want a timeout kill, got %s", res.Summary())
	}
	if _, err := os.Stat(filepath.Join(ws, "daemon-started")); err != nil {
		t.Fatalf("the daemon never started, so the test proves nothing: %v", err)
	}
	if left := hostProcsWith(t, tok); len(left) > 0 {
		t.Errorf("processes of the timed-out run still running on the host: %v", left)
	}
	for _, d := range cgroupDirsOf(r, res.Cgroup) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s left behind (%v)", d, err)
		}
	}
}

func TestRootCancelKillsTheRun(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	ws := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			if _, err := os.Stat(filepath.Join(ws, "ready")); err == nil {
				cancel()
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	res, err := r.Run(ctx, Request{Workspace: ws, Command: []string{"/usr/bin/python3", "-I", "-c",
		"import time; open('/work/ready','w').close(); time.sleep(300)"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != ReasonCancelled {
		t.Errorf("want cancelled, got %s", res.Summary())
	}
}

func TestRootSIGKILLOfParentLeavesNothingRunning(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	needRoot(t)
	ws := t.TempDir()
	if err := os.Chmod(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	tok := token(t)
	code := fmt.Sprintf(`
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open('/work/ready', 'w').close()
        os.execv('/usr/bin/sleep', ['sleep-%s', '300'])
    os._exit(0)
os.execv('/usr/bin/sleep', ['sleep-%s', '300'])
`, tok, tok)
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), testParentEnv+"="+ws, testParentEnv+"_CODE="+code)
	parent.Stderr = os.Stderr
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the sandboxed daemon to start", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(ws, "ready"))
		return err == nil
	})
	waitFor(t, "both sandboxed sleeps to run", 10*time.Second, func() bool { return len(hostProcsWith(t, tok)) == 2 })
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	waitFor(t, "the sandboxed processes to die with their parent", 10*time.Second, func() bool {
		return len(hostProcsWith(t, tok)) == 0
	})
	// The dead parent's cgroups are stale; the next runner's Start removes them.
	r := newRunner(t, Config{})
	for _, base := range r.layout.bases() {
		entries, _ := os.ReadDir(base)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), fmt.Sprintf("run-%d-", parent.Process.Pid)) {
				t.Errorf("stale cgroup %s of the killed parent survived Start", filepath.Join(base, e.Name()))
			}
		}
	}
}

func TestRootWorkspaceSymlinkAndDotDotTricksCannotWriteOutside(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{ws, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	target := filepath.Join(outside, "target")
	if err := os.WriteFile(target, []byte("original"), 0o666); err != nil {
		t.Fatal(err)
	}
	// Links planted before the run, pointing at host paths outside.
	if err := os.Symlink(target, filepath.Join(ws, "to-target")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "to-outside")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(ws, "up")); err != nil {
		t.Fatal(err)
	}
	res := py(t, r, `
import json, os, sys
out = {}
def tryw(name, path):
    try:
        open(path, 'w').write('pwned')
        out[name] = 0
    except OSError as e:
        out[name] = e.errno
tryw('via symlink to file', '/work/to-target')
tryw('via symlink to dir', '/work/to-outside/new')
tryw('via .. link', '/work/up/escaped')
tryw('via ..', '/work/../escaped')
tryw('via ../..', '/work/../../escaped')
tryw('abs host path', sys.argv[1])
try:
    os.link('/usr/bin/python3', '/work/hardlink'); out['hardlink'] = 0
except OSError as e:
    out['hardlink'] = e.errno
os.symlink('/etc/shadow', '/work/result.txt')
os.symlink(sys.argv[1], '/work/result2.txt')
print(json.dumps(out))
`, Request{Workspace: ws, Command: []string{target}})
	var got map[string]int
	decode(t, res, &got)
	for k, v := range got {
		if v == 0 {
			t.Errorf("%s: write succeeded", k)
		}
	}
	if data, _ := os.ReadFile(target); string(data) != "original" {
		t.Errorf("host file outside the workspace changed: %q", data)
	}
	for _, p := range []string{filepath.Join(outside, "new"), filepath.Join(base, "escaped"), "/escaped", filepath.Join(filepath.Dir(base), "escaped")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created outside the workspace", p)
		}
	}
	// The other direction: host code collecting results must not follow the
	// links the command planted.
	for _, name := range []string{"result.txt", "result2.txt", "to-target", "up/ws/result.txt"} {
		if data, err := ReadWorkspaceFile(ws, name, 1<<20); err == nil {
			t.Errorf("ReadWorkspaceFile(%s) followed a planted symlink: %q", name, data)
		}
	}
}

func TestRootOutputFloodIsCappedAndMarked(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	const limit = 64 << 10
	res := py(t, r, `
import sys
while True:
    sys.stdout.write('y' * 4096)
    sys.stderr.write('z' * 4096)
`, Request{Limits: Limits{Output: limit}})
	if len(res.Stdout) != limit || !res.StdoutTruncated {
		t.Errorf("stdout: want %d bytes marked truncated, got %d (truncated=%v)", limit, len(res.Stdout), res.StdoutTruncated)
	}
	if len(res.Stderr) > limit {
		t.Errorf("stderr: %d bytes kept, over the %d cap", len(res.Stderr), limit)
	}
	if res.Reason != ReasonOutput {
		t.Errorf("want reason output, got %s", res.Summary())
	}
}

func TestRootConcurrentRunsCannotSeeOrSignalEachOther(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	wsA := t.TempDir()
	tok := token(t)
	type outcome struct {
		res *Result
		err error
	}
	doneA := make(chan outcome, 1)
	go func() {
		res, err := r.Run(context.Background(), Request{Workspace: wsA, Command: []string{"/usr/bin/python3", "-I", "-c", `
import os, sys, time
open('/work/ready', 'w').close()
while not os.path.exists('/work/stop'):
    time.sleep(0.01)
`, tok}})
		doneA <- outcome{res, err}
	}()
	waitFor(t, "run A to start", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(wsA, "ready"))
		return err == nil
	})
	hostPids := hostProcsWith(t, tok)
	if len(hostPids) == 0 {
		t.Fatal("cannot find run A on the host")
	}
	args := []string{}
	for _, p := range hostPids {
		args = append(args, strconv.Itoa(p))
	}
	resB := py(t, r, `
import json, os, signal, sys
me = os.getpid()
visible = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
killed = []
for pid in list(range(1, 4096)) + [int(a) for a in sys.argv[1:]]:
    if pid == me:
        continue
    try:
        os.kill(pid, signal.SIGKILL); killed.append(pid)
    except OSError:
        pass
print(json.dumps({'visible': visible, 'killed': killed, 'me': me}))
`, Request{Command: args})
	var got struct {
		Visible, Killed []int
		Me              int
	}
	decode(t, resB, &got)
	if err := os.WriteFile(filepath.Join(wsA, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a := <-doneA
	if a.err != nil {
		t.Fatal(a.err)
	}
	if !a.res.Exited || a.res.ExitCode != 0 {
		t.Errorf("run A was disturbed by run B: %s", a.res.Summary())
	}
	// B sees only its helper (pid 1) and itself.
	if !slices.Equal(got.Visible, []int{1, got.Me}) {
		t.Errorf("run B sees processes %v; want only [1 %d]", got.Visible, got.Me)
	}
	if len(got.Killed) != 0 {
		t.Errorf("run B could signal pids %v", got.Killed)
	}
}

func TestRootStdinIsFedAndDefaultsApplied(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	res := py(t, r, "import sys; print(sys.stdin.read().upper())", Request{Stdin: []byte("hello sandbox")})
	if res.Stdout != "HELLO SANDBOX\n" || res.Reason != ReasonExit || !res.Exited || res.ExitCode != 0 {
		t.Errorf("got %q, %s", res.Stdout, res.Summary())
	}
	if res.Limits != DefaultLimits() {
		t.Errorf("a run without limits must get DefaultLimits, got %+v", res.Limits)
	}
	if res.Cgroups != r.Layout() || res.Cgroups == "" {
		t.Errorf("result cgroups %q, runner %q", res.Cgroups, r.Layout())
	}
}

func TestRootBadRequestsAreErrorsNotResults(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		req  Request
		want string
	}{
		{"missing program", Request{Command: []string{"/usr/bin/definitely-not-here"}}, "definitely-not-here"},
		{"bare name not on PATH", Request{Command: []string{"no-such-tool"}}, "not found in the sandbox PATH"},
		{"host-only program", Request{Command: []string{"/root/.pyenv/shims/python3"}}, "/root/.pyenv/shims/python3"},
		{"workspace is a file", Request{Command: []string{"true"}, Workspace: file}, "not a directory"},
		{"empty command", Request{}, "command: must name a program"},
		{"bad env", Request{Command: []string{"true"}, Env: []string{"NOEQUALS"}}, "env[0]"},
	}
	for _, c := range cases {
		_, err := r.Run(context.Background(), c.req)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error containing %q, got %v", c.name, c.want, err)
		}
		// The caller's fault, and said so: loom-eval sandbox exec exits 2
		// on it, not 3 (issue 40).
		if !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v is not an ErrBadRequest", c.name, err)
		}
	}
}

func TestRootShutdownKillsInflightRunsAndRefusesNewOnes(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	needRoot(t)
	r, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	done := make(chan *Result, 1)
	go func() {
		res, _ := r.Run(context.Background(), Request{Workspace: ws, Command: []string{"/usr/bin/python3", "-I", "-c",
			"import time; open('/work/ready','w').close(); time.sleep(300)"}})
		done <- res
	}()
	waitFor(t, "the run to start", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(ws, "ready"))
		return err == nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res == nil || res.Reason != ReasonCancelled {
		t.Errorf("in-flight run: want cancelled, got %+v", res)
	}
	if _, err := r.Run(context.Background(), Request{Command: []string{"true"}}); !errors.Is(err, ErrShutdown) {
		t.Errorf("Run after Shutdown: want ErrShutdown, got %v", err)
	}
	if err := r.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

func TestRootStaleCgroupsOfDeadOwnersAreRemovedAtStart(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	// A dead owner: a process that has exited (its pid+start no longer match).
	c := exec.Command("/usr/bin/true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	stale := runCgroupName(c.Process.Pid, 1, 1)
	live := runCgroupName(r.ownerPid, r.ownerStart, 1_000_000)
	for _, base := range r.layout.bases() {
		for _, name := range []string{stale, live} {
			if err := os.MkdirAll(filepath.Join(base, name, "cmd"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		for _, base := range r.layout.bases() {
			_ = removeTree(context.Background(), filepath.Join(base, live))
			_ = removeTree(context.Background(), filepath.Join(base, stale))
		}
	})
	r2 := newRunner(t, Config{})
	_ = r2
	for _, base := range r.layout.bases() {
		if _, err := os.Stat(filepath.Join(base, stale)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale cgroup %s survived Start (%v)", filepath.Join(base, stale), err)
		}
		if _, err := os.Stat(filepath.Join(base, live)); err != nil {
			t.Errorf("Start removed the live runner's cgroup %s: %v", filepath.Join(base, live), err)
		}
	}
}

func TestRootDisablingSeccompKeepsNoNewPrivs(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{DisableSeccomp: true})
	res := py(t, r, `
import json
st = dict(l.split(':\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\t' in l)
print(json.dumps({'nnp': st['NoNewPrivs'].strip(), 'seccomp': st['Seccomp'].strip()}))
`, Request{})
	var got struct{ NNP, Seccomp string }
	decode(t, res, &got)
	if got.NNP != "1" || got.Seccomp != "0" {
		t.Errorf("want no_new_privs 1 and no filter, got %+v", got)
	}
}

// A relative workspace names a directory under the caller's working
// directory, as it would for any other program: the sandbox's helper starts
// in "/", and once read a relative path there and failed every run
// ("open workspace ws: no such file or directory").
func TestRootRelativeWorkspaceIsTheCallersDirectory(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	r := newRunner(t, Config{})
	parent := t.TempDir()
	if err := os.Mkdir(filepath.Join(parent, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(parent)
	res := py(t, r, `open('/work/out.txt', 'w').write('written in the sandbox')`, Request{Workspace: "ws"})
	if res.ExitCode != 0 {
		t.Fatalf("run with relative workspace exited %d: %s", res.ExitCode, res.Stderr)
	}
	got, err := os.ReadFile(filepath.Join(parent, "ws", "out.txt"))
	if err != nil || string(got) != "written in the sandbox" {
		t.Fatalf("file written to /work is not in ./ws: %q, %v", got, err)
	}
}
