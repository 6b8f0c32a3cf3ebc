// Command launcher is a minimal stand-alone form of `loom-eval
// clickhouse-local` (same flags) for tests: the chtest helper builds it
// instead of the whole loom-eval binary, which takes far longer to compile
// and depends on every other package in the module. It runs only the
// ClickHouse server, in its own process, as package chlocal requires.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/loomwork/loomwork/internal/chlocal"
)

func main() {
	fs := flag.NewFlagSet("launcher", flag.ContinueOnError)
	lib := fs.String("lib", chlocal.DefaultLibPath(os.Getenv), "path of libchdb.so")
	path := fs.String("path", "", "data directory (created if missing)")
	portsFile := fs.String("ports-file", "", "file that receives the ports once the server is ready")
	startTimeout := fs.Duration("start-timeout", 60*time.Second, "how long to wait for start-up")
	parentPID := fs.Int("parent-pid", 0, "stop when this process (the parent) exits; 0 disables")
	configFile := fs.String("config", "", "ClickHouse server configuration file (XML), e.g. a cluster node's")
	tcpPort := fs.Int("tcp-port", 0, "native protocol port (0: the OS picks)")
	httpPort := fs.Int("http-port", 0, "HTTP port (0: the OS picks)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
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
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "launcher:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "launcher:", err)
		os.Exit(3)
	}
}
