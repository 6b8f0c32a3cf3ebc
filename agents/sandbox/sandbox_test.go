package sandbox

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLimitsZeroFieldsTakeDefaultsAndExplicitOnesLoosen(t *testing.T) {
	got := Limits{Memory: 1 << 30}.Or(DefaultLimits())
	want := DefaultLimits()
	want.Memory = 1 << 30
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if (Limits{}).Or(DefaultLimits()) != DefaultLimits() {
		t.Errorf("an empty Limits must become DefaultLimits")
	}
	d := DefaultLimits()
	if d.WallTime <= 0 || d.CPUTime <= 0 || d.Memory <= 0 || d.Tasks <= 0 || d.Output <= 0 || d.FileSize <= 0 || d.OpenFiles <= 0 || d.AddressSpace <= 0 {
		t.Errorf("every default limit must be set: %+v", d)
	}
}

func TestLimitsValidateNamesEveryBadField(t *testing.T) {
	err := Limits{WallTime: -1, Memory: -5, Tasks: -1, CPUTime: 500 * time.Millisecond, OpenFiles: 2}.Validate()
	if err == nil {
		t.Fatal("want an error")
	}
	for _, field := range []string{"limits.wall_time", "limits.memory_bytes", "limits.tasks", "limits.cpu_time", "limits.open_files"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
	if err := (Limits{}).Validate(); err != nil {
		t.Errorf("zero limits are valid (defaults): %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{HostUID: 5}, "set both or neither"},
		{Config{CgroupParent: "/abs"}, "cgroup_parent"},
		{Config{CgroupParent: "a/../b"}, "cgroup_parent"},
		{Config{Limits: Limits{Output: -1}}, "limits.output_bytes"},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: want error with %q, got %v", c.cfg, c.want, err)
		}
		if _, err := New(c.cfg); err == nil {
			t.Errorf("New accepted %+v", c.cfg)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("the zero Config is valid: %v", err)
	}
}

func TestRunBeforeStartAndShutdownWithoutStart(t *testing.T) {
	r, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(context.Background(), Request{Command: []string{"true"}}); err == nil || !strings.Contains(err.Error(), "before Start") {
		t.Errorf("Run before Start: got %v", err)
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown without Start: %v", err)
	}
	if err := r.Start(context.Background()); !errors.Is(err, ErrShutdown) {
		t.Errorf("Start after Shutdown: want ErrShutdown, got %v", err)
	}
}

func TestStartRefusesAMissingHelperExecutable(t *testing.T) {
	r, err := New(Config{Executable: "/nonexistent/loom-eval"})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/loom-eval") {
		t.Errorf("want a refusal naming the executable, got %v", err)
	}
}

func TestDetectCgroupsRefusesNamingTheMissingMechanism(t *testing.T) {
	mi, err := os.ReadFile("testdata/mountinfo-v1-no-pids")
	if err != nil {
		t.Fatal(err)
	}
	_, err = detectCgroupsFrom(mi, "loomwork-sandbox")
	if err == nil {
		t.Fatal("want a refusal")
	}
	for _, want := range []string{"cgroup2 hierarchy", "pids controller"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal does not name %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "memory controller") {
		t.Errorf("memory is present, yet named missing: %v", err)
	}
}

func TestReadCgroupMountsParsesBothLayouts(t *testing.T) {
	mi, _ := os.ReadFile("testdata/mountinfo-hybrid")
	got := readCgroupMounts(mi)
	var v2 []string
	v1 := map[string]string{}
	for _, m := range got {
		if m.fstype == "cgroup2" {
			v2 = append(v2, m.point)
		}
		for _, c := range m.controllers {
			v1[c] = m.point
		}
	}
	if !slices.Equal(v2, []string{"/sys/fs/cgroup/unified"}) || v1["pids"] != "/sys/fs/cgroup/pids" || v1["memory"] != "/sys/fs/cgroup/memory" || v1["name=systemd"] == "" {
		t.Errorf("hybrid: got v2 %v, v1 %v", v2, v1)
	}
	mi, _ = os.ReadFile("testdata/mountinfo-v2")
	got = readCgroupMounts(mi)
	if len(got) != 1 || got[0].fstype != "cgroup2" || got[0].point != "/sys/fs/cgroup" {
		t.Errorf("v2 (with optional fields): got %+v", got)
	}
	mi, _ = os.ReadFile("testdata/mountinfo-v1-no-pids")
	got = readCgroupMounts(mi)
	if len(got) != 2 || got[0].point != "/sys/fs/cgroup/cpu acct" {
		t.Errorf("escaped mount point: got %+v", got)
	}
}

func FuzzReadCgroupMounts(f *testing.F) {
	for _, name := range []string{"mountinfo-hybrid", "mountinfo-v2", "mountinfo-v1-no-pids"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("1 2 3 4 - cgroup\n\\0 - - - - - cgroup2"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range readCgroupMounts(data) {
			if m.fstype != "cgroup" && m.fstype != "cgroup2" {
				t.Errorf("non-cgroup mount returned: %+v", m)
			}
		}
	})
}

func TestRunCgroupNamesRoundTripAndRejectStrangers(t *testing.T) {
	name := runCgroupName(1234, 987654321, 42)
	pid, start, ok := parseRunCgroupName(name)
	if !ok || pid != 1234 || start != 987654321 {
		t.Errorf("round trip of %q: %d %d %v", name, pid, start, ok)
	}
	for _, bad := range []string{"run-", "run-1-2", "run-x-2-3", "run-0-2-3", "other-1-2-3", "run-1-2-3-4", "probe-5"} {
		if _, _, ok := parseRunCgroupName(bad); ok {
			t.Errorf("%q parsed as a run cgroup", bad)
		}
	}
}

func FuzzParseRunCgroupName(f *testing.F) {
	f.Add("run-1-2-3")
	f.Add("run-99999-18446744073709551615-0")
	f.Add("run--1-2-3")
	f.Fuzz(func(t *testing.T, s string) {
		pid, start, ok := parseRunCgroupName(s)
		if ok && runCgroupName(pid, start, 0) == "" {
			t.Errorf("accepted %q", s)
		}
		if ok && pid <= 0 {
			t.Errorf("accepted non-positive pid in %q", s)
		}
	})
}

func TestOwnerAliveTellsLiveFromDead(t *testing.T) {
	start, err := processStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !ownerAlive(os.Getpid(), start) {
		t.Errorf("this process reads as dead")
	}
	if ownerAlive(os.Getpid(), start+1) {
		t.Errorf("a reused pid (other start time) reads as alive")
	}
}

func TestClassifyPrefersOurKillThenKernelCounters(t *testing.T) {
	lim := DefaultLimits()
	cases := []struct {
		name       string
		killReason Reason
		res        Result
		st         helperStatus
		want       Reason
		evidence   string
	}{
		{"clean exit", "", Result{Exited: true, ExitCode: 3}, helperStatus{Started: true}, ReasonExit, ""},
		{"timeout beats pids", ReasonTimeout, Result{Signal: "SIGKILL", Counters: Counters{PidsMax: 4}}, helperStatus{}, ReasonTimeout, "pids.events max=4"},
		{"oom", "", Result{Signal: "SIGKILL", Counters: Counters{OOMKills: 1}}, helperStatus{Started: true}, ReasonMemory, "oom_kill=1"},
		{"sigxcpu", "", Result{Signal: "SIGXCPU"}, helperStatus{Started: true}, ReasonCPU, "SIGXCPU"},
		{"fsize file", "", Result{Exited: true, ExitCode: 1}, helperStatus{Started: true, BigFiles: []string{"/work/x (10 bytes)"}}, ReasonFileSize, "/work/x"},
		{"emfile", "", Result{Exited: true, ExitCode: 1, Stderr: "OSError: [Errno 24] Too many open files"}, helperStatus{Started: true}, ReasonOpenFiles, "EMFILE"},
		{"plain signal", "", Result{Signal: "SIGSEGV"}, helperStatus{Started: true}, ReasonSignal, "SIGSEGV"},
	}
	for _, c := range cases {
		got, ev := classify("hybrid", lim, c.killReason, string(c.killReason)+" happened", &c.res, &c.st)
		if got != c.want {
			t.Errorf("%s: got %s, want %s (%v)", c.name, got, c.want, ev)
		}
		if c.evidence != "" && !slices.ContainsFunc(ev, func(s string) bool { return strings.Contains(s, c.evidence) }) {
			t.Errorf("%s: evidence %v lacks %q", c.name, ev, c.evidence)
		}
	}
}

func TestRequestValidate(t *testing.T) {
	err := Request{Command: []string{"a\x00b"}, Env: []string{"=x", "K=V"}, Limits: Limits{Tasks: -2}}.Validate()
	for _, want := range []string{"command[0]", "env[0]", "limits.tasks"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
}

func TestReadWorkspaceFileRefusesLinksAndEscapes(t *testing.T) {
	ws := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "ok.txt"), []byte("fine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "abs-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("ok.txt", filepath.Join(ws, "rel-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(ws, "sub", "up")); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadWorkspaceFile(ws, "ok.txt", 100); err != nil || string(data) != "fine" {
		t.Errorf("ok.txt: %q %v", data, err)
	}
	for _, name := range []string{"abs-link", "rel-link", "../" + filepath.Base(ws) + "/ok.txt", outside, "sub/up/ok.txt", "sub", "/etc/passwd"} {
		if data, err := ReadWorkspaceFile(ws, name, 100); err == nil {
			t.Errorf("%s: read %q, want a refusal", name, data)
		}
	}
	if _, err := ReadWorkspaceFile(ws, "ok.txt", 2); !errors.Is(err, ErrTooLarge) {
		t.Errorf("want ErrTooLarge, got %v", err)
	}
}

func TestResultSummaryReadsLikeAnAnswer(t *testing.T) {
	r := Result{Signal: "SIGKILL", Reason: ReasonMemory, WallTime: 97 * time.Millisecond, PeakMemory: 64 << 20}
	if got := r.Summary(); got != "killed by SIGKILL (reason: memory), wall 97ms, cpu 0s, peak memory 64.0 MiB" {
		t.Errorf("got %q", got)
	}
}

func TestParseEgressReadsTheDocumentedFormat(t *testing.T) {
	e, err := ParseEgress(strings.NewReader(`{
  "allow": [
    {"host": "files.example.org", "ports": [443]},
    {"host": "*.pkg.example.org", "ports": [80, 443], "resolve": ["deb.pkg.example.org", "pypi.pkg.example.org"]},
    {"cidr": "192.0.2.0/24", "ports": [5432]}
  ],
  "deny": [{"host": "private.pkg.example.org"}],
  "credentials": [{"name": "index-token", "host": "files.example.org", "port": 443, "value_env": "INDEX_TOKEN", "upstream_tls": true}]
}`), "policy.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadEgressCredentials(func(k string) string { return map[string]string{"INDEX_TOKEN": "Bearer t0k"}[k] }); err != nil {
		t.Fatal(err)
	}
	if e.Credentials[0].Value.reveal() != "Bearer t0k" || !e.Credentials[0].UpstreamTLS {
		t.Errorf("credential not loaded: %+v", e.Credentials[0])
	}
	if err := e.LoadEgressCredentials(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "INDEX_TOKEN is empty or unset") {
		t.Errorf("a missing variable must be named, got %v", err)
	}
	for _, bad := range []string{`{"allow":[{"host":"a.test","ports":[1]}],"value":"x"}`, `{"allow":[]}`, `{"allow":[{"host":"a.test","ports":[1]}]} {}`,
		`{"allow":[{"host":"a.test","ports":[1]}],"credentials":[{"name":"n","host":"a.test","port":1,"value":"inline"}]}`} {
		if _, err := ParseEgress(strings.NewReader(bad), "bad.json"); err == nil || !strings.Contains(err.Error(), "bad.json") {
			t.Errorf("%s: want an error naming the file, got %v", bad, err)
		}
	}
}

// FuzzParseEgress: any input is refused with an error or gives a policy
// whose every allow rule has ports, whose decisions never panic, and which
// never allows what a port-less deny rule names.
func FuzzParseEgress(f *testing.F) {
	f.Add(`{"allow":[{"host":"*.a.test","ports":[443],"resolve":["b.a.test","c.a.test"]},{"cidr":"10.0.0.0/8","ports":[22]}],"deny":[{"host":"b.a.test"}]}`)
	f.Add(`{"allow":[{"host":"a.test","ports":[80]}],"credentials":[{"name":"n","host":"a.test","port":80,"value_env":"X"}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		e, err := ParseEgress(strings.NewReader(in), "fuzz")
		if err != nil {
			return
		}
		p, err := e.prepared()
		if err != nil {
			t.Fatalf("parsed policy does not validate again: %v", err)
		}
		for _, r := range p.Allow {
			if len(r.Ports) == 0 {
				t.Fatalf("allow rule without ports accepted: %+v", r)
			}
		}
		for _, d := range p.Deny {
			if d.Host == "" || len(d.Ports) > 0 {
				continue
			}
			name := strings.TrimPrefix(d.Host, "*.")
			if strings.HasPrefix(d.Host, "*.") {
				name = "x." + name
			}
			for _, port := range p.ports() {
				if v, _ := p.decide(name, netip.Addr{}, port); v.allowed {
					t.Fatalf("%s:%d allowed although deny rule %s names it", name, port, d.Host)
				}
			}
		}
	})
}
