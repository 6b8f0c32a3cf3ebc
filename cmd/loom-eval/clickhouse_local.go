package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/loomwork/loomwork/internal/chlocal"
)

// runClickHouseLocal runs a local ClickHouse 26.7 from libchdb in this
// process until SIGTERM/SIGINT. It must stay the only thing the process
// does: ClickHouse installs its own signal and crash handlers once loaded.
// scripts/clickhouse.sh start and the tests' chtest helper run it as a child.
func (m *Main) runClickHouseLocal(ctx context.Context, args []string) error {
	fs := m.newFlagSet("clickhouse-local",
		"clickhouse-local [--lib PATH] --path DIR --ports-file FILE [--config FILE] [--tcp-port N] [--http-port N]\n\n"+
			"Serves ClickHouse on 127.0.0.1 (native and HTTP, OS-assigned ports) until\n"+
			"SIGTERM or SIGINT. Once it answers queries, FILE receives \"TCP_PORT<TAB>HTTP_PORT\".\n"+
			"Fetch the library first: scripts/clickhouse.sh fetch")
	lib := fs.String("lib", chlocal.DefaultLibPath(m.Getenv), "path of libchdb.so")
	path := fs.String("path", "", "data directory (created if missing)")
	portsFile := fs.String("ports-file", "", "file that receives the ports once the server is ready")
	startTimeout := fs.Duration("start-timeout", 60*time.Second, "how long to wait for start-up")
	parentPID := fs.Int("parent-pid", 0, "stop when this process (the parent) exits; 0 disables")
	configFile := fs.String("config", "", "ClickHouse server configuration file (XML), e.g. a cluster node's")
	tcpPort := fs.Int("tcp-port", 0, "native protocol port (0: the OS picks)")
	httpPort := fs.Int("http-port", 0, "HTTP port (0: the OS picks)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("clickhouse-local: unexpected argument %q", fs.Arg(0))
	}
	if *path == "" {
		return usageError("clickhouse-local: --path is required")
	}
	if *portsFile == "" {
		return usageError("clickhouse-local: --ports-file is required")
	}
	if _, err := os.Stat(*lib); err != nil {
		return usageError("clickhouse-local: --lib %s: %v (run scripts/clickhouse.sh fetch)", *lib, err)
	}
	srv, err := chlocal.NewServer(chlocal.Config{
		LibPath:      *lib,
		DataDir:      *path,
		PortsFile:    *portsFile,
		StartTimeout: *startTimeout,
		ParentPID:    *parentPID,
		ConfigFile:   *configFile,
		TCPPort:      *tcpPort,
		HTTPPort:     *httpPort,
		Logger:       slog.New(slog.NewTextHandler(m.Stderr, nil)),
	})
	if err != nil {
		return usageError("%v", err)
	}
	if err := srv.Run(ctx); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	return nil
}
