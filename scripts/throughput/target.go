package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// target is one of the two things measured.
type target struct {
	Name     string // "peer" or "serve"
	Table    string // where its spans land, in the run's database
	TraceCol string // trace id column of Table
	SpanCol  string // span id column of Table
}

// process is a started target.
type process struct {
	cmd      *exec.Cmd
	logPath  string
	PID      int
	GRPCAddr string
	exited   chan struct{}
	waitErr  error
}

// startProcess starts bin with its output in logPath. sessions is the
// process arrangement (-sessions), the same for every process the harness
// starts: "own" puts it in a new session (setsid), "shared" in a process
// group of its own within the harness's session. Either way a Ctrl-C to
// the harness is the harness's to handle (it stops its children by pid).
//
// The difference matters on Linux with autogroup scheduling
// (/proc/sys/kernel/sched_autogroup_enabled): the scheduler shares the
// CPU fairly between sessions first, then between the threads of a
// session. In sessions of their own, ClickHouse and the target each get
// half the machine when both want more, as two services would; in one
// session, they compete thread against thread.
func startProcess(bin string, args []string, logPath, sessions string) (*process, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	cmd := exec.Command(bin, args...)
	// The run's directory: what a target writes relative to its working
	// directory (serve's default spool, .loomwork/spool) is the run's own.
	cmd.Dir = filepath.Dir(logPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if sessions == "own" {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &process{cmd: cmd, logPath: logPath, PID: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	return p, nil
}

// died says whether the process has exited, and how, as an error naming
// it (what); nil while it runs.
func (p *process) died(what string) error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s (pid %d) exited during the run: %v; see %s", what, p.PID, p.waitErr, p.logPath)
	default:
		return nil
	}
}

// stop sends SIGTERM and waits up to grace, then SIGKILL.
func (p *process) stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("pid %d did not stop within %s of SIGTERM; killed", p.PID, grace)
	}
}

// waitReady polls ready until it returns true, the process exits or the
// timeout passes.
func (p *process) waitReady(ctx context.Context, timeout time.Duration, logPath string, ready func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !ready() {
		select {
		case <-p.exited:
			return fmt.Errorf("pid %d exited during start-up (%v); see %s", p.PID, p.waitErr, logPath)
		case <-ctx.Done():
			return fmt.Errorf("pid %d not ready within %s; see %s", p.PID, timeout, logPath)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// freePort asks the kernel for a free loopback port (closed again at once;
// the target binds it a moment later).
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// peerConfig is the Collector configuration of one peer run: the OTLP
// gRPC receiver, the batch processor at send_batch_size 5000 (issue 17's
// setting; timeout stays at its 200 ms default) and the contrib ClickHouse
// exporter with its defaults (sending queue: 1,000 requests, 10 consumers,
// not blocking; retry on; async_insert as set), writing into db. The
// receiver takes requests up to 64 MiB, as serve does by default
// (--max-request-mib): gRPC's own 4 MiB limit would refuse the agent
// load's largest requests at the peer alone. Logs at
// info, so the exporter's retries ("Exporting failed. Will retry …") are in
// the run's peer.log.
func peerConfig(grpcAddr, chAddr, db string, asyncInsert bool) string {
	return fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
        max_recv_msg_size_mib: 64
processors:
  batch:
    send_batch_size: 5000
exporters:
  clickhouse:
    endpoint: tcp://%s
    database: %s
    create_schema: true
    async_insert: %t
service:
  telemetry:
    logs:
      level: info
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [clickhouse]
`, grpcAddr, chAddr, db, asyncInsert)
}

func startPeer(ctx context.Context, bin, dir, chAddr, db string, asyncInsert bool, sessions string) (*process, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "peer.yaml")
	if err := os.WriteFile(cfg, []byte(peerConfig(addr, chAddr, db, asyncInsert)), 0o644); err != nil {
		return nil, fmt.Errorf("peer config: %w", err)
	}
	logPath := filepath.Join(dir, "peer.log")
	p, err := startProcess(bin, []string{"--config", cfg}, logPath, sessions)
	if err != nil {
		return nil, err
	}
	p.GRPCAddr = addr
	// The Collector starts exporters (and so the ClickHouse DDL) before
	// receivers: once the receiver accepts connections, the pipeline is up.
	err = p.waitReady(ctx, 2*time.Minute, logPath, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("peer: %w", err), p.stop(10*time.Second))
	}
	return p, nil
}

func startServe(ctx context.Context, bin, dir, chAddr, db, extra, sessions string) (*process, error) {
	ready := filepath.Join(dir, "serve.ready.json")
	args := []string{"serve",
		"--store", "clickhouse://" + chAddr + "/" + db,
		"--grpc-addr", "127.0.0.1:0", "--http-addr", "off", "--ui-addr", "127.0.0.1:0",
		"--ready-file", ready}
	args = append(args, strings.Fields(strings.ReplaceAll(extra, "{dir}", dir))...)
	logPath := filepath.Join(dir, "serve.log")
	p, err := startProcess(bin, args, logPath, sessions)
	if err != nil {
		return nil, err
	}
	var r struct {
		GRPCAddr string `json:"grpc_addr"`
	}
	err = p.waitReady(ctx, 2*time.Minute, logPath, func() bool {
		b, err := os.ReadFile(ready)
		return err == nil && json.Unmarshal(b, &r) == nil && r.GRPCAddr != ""
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("serve: %w", err), p.stop(10*time.Second))
	}
	p.GRPCAddr = r.GRPCAddr
	return p, nil
}
