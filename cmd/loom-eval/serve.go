package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/collector/genai"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storeurl"
	"github.com/loomwork/loomwork/web"
)

// runServe runs the OTLP collector pipeline, the trace store and the HTTP
// API/UI until the context ends (SIGINT/SIGTERM), then drains and closes.
func (m *Main) runServe(ctx context.Context, args []string) error {
	fs := m.newFlagSet("serve", "serve [--store URL] [--grpc-addr ADDR] [--http-addr ADDR] [--ui-addr ADDR]")
	storeURL := fs.String("store", "", "trace store URL: a file path or sqlite:PATH (embedded), clickhouse://HOST:PORT/DB; default $"+storeurl.EnvVar+", else "+storeurl.DefaultPath)
	grpcAddr := fs.String("grpc-addr", collector.DefaultGRPCAddr, "OTLP/gRPC listen address (host:port, or off)")
	httpAddr := fs.String("http-addr", collector.DefaultHTTPAddr, "OTLP/HTTP listen address (host:port, or off)")
	uiAddr := fs.String("ui-addr", "127.0.0.1:8080", "web UI and JSON API listen address (host:port, or off)")
	maxAttr := fs.Int("max-attr-bytes", genai.DefaultMaxAttrBytes, "truncate attribute values larger than this many bytes (-1: never)")
	receiver := fs.String("receiver", collector.ReceiverLoomwork, "OTLP receiver: loomwork (partial_success, precise errors) or otlp (the Collector's core otlpreceiver)")
	memMiB := fs.Uint("memory-limit-mib", 0, "refuse data (retryably) above this heap size; 0: 80% of the machine's memory")
	gcPercent := fs.Int("gc-percent", 0, fmt.Sprintf("Go GC target percentage (GOGC); 0: $GOGC when set, else %d (trades heap for CPU; the memory limit still applies)", collector.DefaultGCPercent))
	writers := fs.Int("writers", 1, "concurrent store writes; 1 coalesces the most requests per write, which ClickHouse needs most")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	authToken := fs.String("auth-token", "", "require this bearer token on OTLP ingest, the UI and the API (default $LOOMWORK_AUTH_TOKEN; empty: no authentication)")
	runsDir := fs.String("runs-dir", "", "directory of journals (*.jsonl) and replay reports (*.replay.json) for the Runs pages")
	reportsDir := fs.String("reports-dir", "", "directory of score reports (*.json) for the Reports pages")
	ablationsDir := fs.String("ablations-dir", "", "directory of ablation results (*.json) for the Ablations pages")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("serve: unexpected arguments %q", fs.Args())
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError("serve: --log-level: %v", err)
	}
	log := slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: level}))

	if *gcPercent < 0 {
		return usageError("serve: --gc-percent: must not be negative (got %d)", *gcPercent)
	}
	tuneGC(m.Getenv, *gcPercent, *memMiB, log)

	if *authToken == "" && m.Getenv != nil {
		*authToken = m.Getenv("LOOMWORK_AUTH_TOKEN")
	}
	url := *storeURL
	if url == "" && m.Getenv != nil {
		url = m.Getenv(storeurl.EnvVar)
	}
	loc, err := storeurl.Parse(url)
	if err != nil {
		return usageError("serve: --store: %v", err)
	}
	cfg := collector.ServerConfig{
		GRPCAddr: *grpcAddr,
		HTTPAddr: *httpAddr,
		Receiver: *receiver,
		Exporter: collector.Config{
			MaxAttributeBytes: *maxAttr,
			Writers:           *writers,
			Timeout:           collector.DefaultTimeout,
		},
		MemoryLimitMiB: uint32(*memMiB),
		AuthToken:      *authToken,
		Logger:         log,
	}
	if *uiAddr != collector.AddrOff {
		if _, _, err := net.SplitHostPort(*uiAddr); err != nil {
			return usageError("serve: --ui-addr: %q is not host:port", *uiAddr)
		}
	}
	if err := cfg.Validate(); err != nil {
		return usageError("serve: %v", err)
	}

	st, err := storeurl.OpenWithLogger(ctx, url, false, log)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("serve: %w", err)}
	}
	srv, err := collector.NewServer(cfg, st)
	if err != nil {
		st.Close()
		return usageError("serve: %v", err)
	}
	if err := srv.Start(ctx); err != nil {
		st.Close()
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("serve: %w", err)}
	}

	var ui *http.Server
	uiURL := ""
	if *uiAddr != collector.AddrOff {
		ln, err := net.Listen("tcp", *uiAddr)
		if err != nil {
			err = fmt.Errorf("serve: listen for the UI on %s: %w", *uiAddr, err)
			return errors.Join(&ExitError{Code: ExitRuntimeErr, Err: err}, shutdownServe(srv, nil, st, log))
		}
		files := &web.FileSources{RunsDir: *runsDir, ReportsDir: *reportsDir, AblationsDir: *ablationsDir}
		h, err := web.New(web.Config{AuthToken: *authToken}, web.Deps{Traces: st, Logger: log, Files: files})
		if err != nil {
			ln.Close()
			return errors.Join(usageError("serve: %v", err), shutdownServe(srv, nil, st, log))
		}
		ui = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		uiURL = "http://" + ln.Addr().String()
		go func() {
			if err := ui.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("UI server stopped", "error", err)
			}
		}()
	}

	fmt.Fprintf(m.Stdout, "loom-eval serve: storing traces in %s\n", loc)
	fmt.Fprintf(m.Stdout, "  OTLP gRPC  %s\n", serveAddr(srv.GRPCAddr(), cfg.GRPCAddr))
	fmt.Fprintf(m.Stdout, "  OTLP HTTP  %s\n", serveAddr(srv.HTTPAddr(), cfg.HTTPAddr))
	if uiURL != "" {
		fmt.Fprintf(m.Stdout, "  UI / API   %s  (JSON under /api/v1/)\n", uiURL)
	}
	fmt.Fprintln(m.Stdout, "Send a trace with: loom-eval demo   (Ctrl-C stops; acknowledged spans are on disk)")

	<-ctx.Done()
	log.Info("shutting down: draining in-flight requests")
	if err := shutdownServe(srv, ui, st, log); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("serve: %w", err)}
	}
	return nil
}

// shutdownServe stops accepting (UI and OTLP), waits for in-flight writes,
// then closes the store.
func shutdownServe(srv *collector.Server, ui *http.Server, st store.Store, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	if ui != nil {
		if err := ui.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop UI server: %w", err))
		}
	}
	if err := srv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stop collector: %w", err))
	}
	if err := st.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close store: %w", err))
	}
	if len(errs) == 0 {
		log.Info("stopped cleanly")
	}
	return errors.Join(errs...)
}

func serveAddr(actual, configured string) string {
	if actual != "" {
		return actual
	}
	if configured == collector.AddrOff {
		return "off"
	}
	return strings.TrimSpace(configured)
}

// tuneGC sets the process's GC target and soft memory limit: an explicit
// --gc-percent wins, then $GOGC (the runtime read it already), then
// collector.DefaultGCPercent. With --memory-limit-mib, the runtime's soft
// limit goes to the memory limiter's soft limit (80%), so the GC works
// harder before the limiter starts refusing data; $GOMEMLIMIT wins over it.
func tuneGC(getenv func(string) string, percent int, memMiB uint, log *slog.Logger) {
	env := func(k string) string {
		if getenv == nil {
			return ""
		}
		return getenv(k)
	}
	gogc := "GOGC=" + env("GOGC")
	switch {
	case percent > 0:
		debug.SetGCPercent(percent)
		gogc = strconv.Itoa(percent)
	case env("GOGC") == "":
		debug.SetGCPercent(collector.DefaultGCPercent)
		gogc = strconv.Itoa(collector.DefaultGCPercent)
	}
	if memMiB > 0 && env("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(int64(memMiB) << 20 / 5 * 4)
	}
	log.Debug("garbage collector", "gc_percent", gogc, "soft_memory_limit_bytes", debug.SetMemoryLimit(-1))
}
