package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storeurl"
)

// traceBackend is an experiment's experiment.Backend: the store at the
// record's URL and either the user's running collector (--otlp-endpoint,
// writing that store) or a collector started here on 127.0.0.1 ports the
// OS picks.
type traceBackend struct {
	st       store.Store
	srv      *collector.Server
	endpoint string
	grpc     string
}

func (b *traceBackend) OTLPEndpoint() string { return b.endpoint }
func (b *traceBackend) GRPCAddr() string     { return b.grpc }
func (b *traceBackend) Reader() store.Reader { return b.st }

// startTraceBackend opens storeURL and, without an endpoint, starts the
// collector that writes it. The caller shuts it down.
func startTraceBackend(ctx context.Context, storeURL, endpoint string, log *slog.Logger) (*traceBackend, error) {
	external := endpoint != ""
	st, err := storeurl.OpenWithLogger(ctx, storeURL, external, log)
	if err != nil {
		return nil, fmt.Errorf("trace store %s: %w", storeURL, err)
	}
	b := &traceBackend{st: st, endpoint: endpoint}
	if external {
		return b, nil
	}
	srv, err := collector.NewServer(collector.ServerConfig{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Exporter: collector.Config{Timeout: collector.DefaultTimeout}, Logger: log}, st)
	if err == nil {
		err = srv.Start(ctx)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("collector: %w", err), b.Shutdown(ctx))
	}
	b.srv, b.endpoint, b.grpc = srv, "http://"+srv.HTTPAddr(), srv.GRPCAddr()
	return b, nil
}

// Shutdown stops the collector, then the store.
func (b *traceBackend) Shutdown(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	if b.srv != nil {
		errs = append(errs, b.srv.Shutdown(ctx))
		b.srv = nil
	}
	if b.st != nil {
		errs = append(errs, b.st.Shutdown(ctx))
		b.st = nil
	}
	return errors.Join(errs...)
}

// openStoreReadOnly is the experiment.OpenStore the records commands use.
func openStoreReadOnly(ctx context.Context, url string) (store.Store, error) {
	return storeurl.Open(ctx, url, true)
}
