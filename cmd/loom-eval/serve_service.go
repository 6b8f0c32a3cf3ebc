package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/collector/spool"
	"github.com/loomwork/loomwork/internal/service"
	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
	"github.com/loomwork/loomwork/store/storeurl"
	"github.com/loomwork/loomwork/web"
)

// serveShutdownTimeout bounds serve's shutdown: draining in-flight
// requests, the collector's writes and the store.
const serveShutdownTimeout = 30 * time.Second

// serveService is `loom-eval serve` running. Start acquires, in order,
// the UI's listener (first: it needs nothing else, so a taken port fails
// before the store is opened), the store, the collector, the store's
// retention job, the approvals journal, the UI server (with its keeper of
// huge traces' rollups) and the ready file, pushing each on its cleanup
// stack as it is acquired. Unwinding the stack is the shutdown order:
// remove the ready file, stop accepting (the UI server), stop the keeper,
// close the approvals journal, stop the retention job, stop the collector
// (its listeners, then in-flight writes and the spool), shut the store
// down.
type serveService struct {
	setup  *serveSetup
	flags  *serveFlags
	prices *pricing.Table

	cleanup   service.Stack
	uiLn      net.Listener // nil when the UI is off
	st        store.Store
	srv       *collector.Server
	approvals web.Approvals // nil without --approvals-journal
	uiURL     string
	ready     ServeReady
}

// newServeService is serve as configured; it does no I/O.
func newServeService(s *serveSetup, f *serveFlags, prices *pricing.Table) *serveService {
	return &serveService{setup: s, flags: f, prices: prices}
}

// Start acquires serve's parts. On an error it releases every part it
// acquired and returns the error, which names the part that failed.
func (v *serveService) Start(ctx context.Context) error {
	for _, step := range []func(context.Context) error{
		v.listenUI, v.openStore, v.startCollector, v.startRetention, v.openApprovals, v.serveUI, v.writeReady,
	} {
		if err := step(ctx); err != nil {
			return withReleaseError(err, v.release(ctx))
		}
	}
	return nil
}

// release unwinds the cleanup stack after a failed start, within
// serveShutdownTimeout even when ctx has ended.
func (v *serveService) release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serveShutdownTimeout)
	defer cancel()
	return v.cleanup.Unwind(ctx)
}

// Shutdown releases every part Start acquired, last acquired first. Safe
// more than once and after a failed Start.
func (v *serveService) Shutdown(ctx context.Context) error {
	err := v.cleanup.Unwind(ctx)
	if err == nil {
		v.setup.log.Info("stopped cleanly")
	}
	return err
}

// withReleaseError adds the error of releasing what a failed start had
// acquired to the start's error, keeping its exit code.
func withReleaseError(err, rerr error) error {
	if rerr == nil {
		return err
	}
	rerr = fmt.Errorf("serve: after the failed start: %w", rerr)
	if ee, ok := errors.AsType[*ExitError](err); ok {
		return &ExitError{Code: ee.Code, Err: errors.Join(ee.Err, rerr)}
	}
	return errors.Join(err, rerr)
}

// listenUI binds the UI's listener, unless the UI is off.
func (v *serveService) listenUI(context.Context) error {
	l := v.setup.uiL
	if l.addr == collector.AddrOff {
		return nil
	}
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("serve: %w", l.listenError(err))}
	}
	v.uiLn = ln
	v.cleanup.Push("close UI listener", func(context.Context) error {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
		return nil // the UI server closed it
	})
	return nil
}

// openStore opens the trace store.
func (v *serveService) openStore(ctx context.Context) error {
	// An unreachable ClickHouse does not stop serve: it waits up to
	// --store-wait, then starts and keeps connecting (the spool takes
	// data meanwhile; /readyz says what serve waits for).
	st, err := storeurl.OpenWithLogger(ctx, v.setup.url, false, v.setup.log, storeurl.WaitForServer(v.setup.storeWait), storeurl.KeepConnecting())
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("serve: --store: %w", err)}
	}
	v.st = st
	v.cleanup.Push("shut down store", st.Shutdown)
	return nil
}

// startCollector starts the OTLP collector (gRPC and HTTP) over the store.
// A listener it cannot bind is named with the flag and variable that
// move it.
func (v *serveService) startCollector(ctx context.Context) error {
	srv, err := collector.NewServer(v.setup.cfg, v.st)
	if err != nil {
		return usageError("serve: %v", err)
	}
	if err := srv.Start(ctx); err != nil { // a failed Start has released what it opened
		if l, ok := failedListener(err, v.setup.grpcL, v.setup.httpL); ok {
			err = l.listenError(err)
		}
		if ce, ok := errors.AsType[*spool.CorruptionError](err); ok {
			err = fmt.Errorf("%w (loom-eval spool repair %s cuts the spool at the bad record and says how much is lost)", err, ce.Dir)
		}
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("serve: %w", err)}
	}
	v.srv = srv
	v.cleanup.Push("stop collector", srv.Shutdown)
	return nil
}

// startRetention starts the embedded store's deletion of traces past
// their project's retention (with --keys).
func (v *serveService) startRetention(ctx context.Context) error {
	s := v.setup
	if s.keys == nil {
		return nil
	}
	if sq, ok := v.st.(*sqlite.Store); ok {
		job := &sqlite.RetentionJob{Store: sq, Policies: retentionPolicies(s.keys), Interval: *v.flags.retentionEvery, Logger: s.log}
		if err := job.Start(ctx); err != nil {
			return usageError("serve: --retention-interval: %v", err)
		}
		v.cleanup.Push("stop retention job", job.Shutdown)
	} else if s.loc.Backend == storeurl.ClickHouse {
		// ClickHouse: the collector stamps each span with its project's
		// retention and the store writes the row's expiry; the tables'
		// TTL deletes expired rows in merges (docs/projects.md).
	} else if len(retentionPolicies(s.keys)()) > 0 {
		s.log.Warn("project retention is enforced by the embedded store's deletion job; this store does not run it", "store", s.loc.String())
	}
	return nil
}

// openApprovals opens --approvals-journal for the UI (not without it or
// with the UI off).
func (v *serveService) openApprovals(ctx context.Context) error {
	path := *v.flags.approvalsJournal
	if path == "" || v.uiLn == nil {
		return nil
	}
	j, err := journaldb.Open(ctx, journaldb.Config{Path: path})
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("serve: --approvals-journal %s: %w", path, err)}
	}
	v.cleanup.Push("close approvals journal", j.Shutdown)
	v.approvals = webApprovals{j: j, clock: time.Now}
	return nil
}

// serveUI serves the web UI and JSON API on the UI's listener in the
// background (not with the UI off).
func (v *serveService) serveUI(ctx context.Context) error {
	if v.uiLn == nil {
		return nil
	}
	h, err := v.setup.uiHandler(v.flags, v.srv, v.st, v.prices, v.approvals)
	if err != nil {
		return usageError("serve: %v", err)
	}
	// Huge traces' rollups are derived behind ingest, so their first
	// page reads one kept row (web.Keeper).
	k, err := h.NewKeeper(web.KeeperConfig{Projects: v.setup.projectNames})
	if err != nil {
		return usageError("serve: %v", err)
	}
	if err := k.Start(ctx); err != nil {
		return err
	}
	v.cleanup.Push("stop keeping huge traces", k.Shutdown)
	ui := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	srv := service.ServeHTTP(ui, v.uiLn, func(err error) { v.setup.log.Error("UI server stopped", "error", err) })
	v.cleanup.Push("stop UI server", srv.Shutdown)
	v.uiURL = "http://" + v.uiLn.Addr().String()
	return nil
}

// writeReady fills in the addresses in use and writes --ready-file.
func (v *serveService) writeReady(context.Context) error {
	v.ready = serveReady(v.setup.loc, v.srv, v.setup.cfg, v.uiLn, v.uiURL)
	path := *v.flags.readyFile
	if path == "" {
		return nil
	}
	if err := writeReadyFile(path, v.ready); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("serve: --ready-file: %w", err)}
	}
	v.cleanup.Push("remove ready file", func(context.Context) error {
		removeReadyFile(path, v.setup.log)
		return nil
	})
	return nil
}
