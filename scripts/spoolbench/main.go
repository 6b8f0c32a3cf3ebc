// Command spoolbench compares two ways of making an OTLP acknowledgement
// wait for local disk, on the same load: the Collector's exporterhelper
// persistent queue on the contrib filestorage extension (bbolt), with
// fsync off (its default) and on, and Loomwork's collector/spool WAL.
//
// Each run has two phases on a fresh directory. Produce: P producers send
// pre-generated ptrace.Traces (agent-shaped, collector/agenttrace) for the
// given seconds while nothing is consumed; a request counts once it is
// acknowledged (ConsumeTraces returned nil / Append returned nil). Drain:
// the consumer reads everything back (the queue's consumer; the WAL's
// Read+Commit) and decodes it, until all of it is consumed. For each phase
// it reports requests/s, spans/s, CPU-s per million spans (getrusage of
// this process), and bytes written per span (write_bytes of
// /proc/self/io: what the process sent towards the disk).
//
// It is its own module so that the main module does not depend on contrib:
//
//	cd scripts/spoolbench && go run . -seconds 20
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loomwork/loomwork/collector/agenttrace"
	"github.com/loomwork/loomwork/collector/spool"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "spoolbench:", err)
		os.Exit(1)
	}
}

type config struct {
	seconds   int
	producers int
	traces    int // per request
	spans     int // per trace
	modes     []string
	dir       string
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("spoolbench", flag.ContinueOnError)
	var c config
	var modes string
	fs.IntVar(&c.seconds, "seconds", 20, "length of each produce phase")
	fs.IntVar(&c.producers, "producers", 4, "concurrent producers")
	fs.IntVar(&c.traces, "traces", 100, "traces per request")
	fs.IntVar(&c.spans, "spans", 10, "spans per trace")
	fs.StringVar(&modes, "modes", "wal,queue-fsync,queue-nofsync", "comma-separated: wal, queue-fsync, queue-nofsync")
	fs.StringVar(&c.dir, "dir", "", "parent of the scratch directories (default: a temporary directory)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.modes = strings.Split(modes, ",")
	if c.dir == "" {
		d, err := os.MkdirTemp("", "spoolbench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		c.dir = d
	}

	// Pre-generated requests, four per producer, so that generating them
	// is not measured; both mechanisms encode them (the queue marshals in
	// Offer, the WAL's producer marshals before Append).
	batches := make([][]ptrace.Traces, c.producers)
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for p := range batches {
		g := agenttrace.NewGenerator(uint64(p+1), start)
		for range 4 {
			batches[p] = append(batches[p], g.Batch(c.traces, c.spans))
		}
	}
	b, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(batches[0][0])
	fmt.Fprintf(out, "load: %d producers, requests of %d spans (%d traces × %d), %d bytes encoded; produce phase %d s; GOMAXPROCS from the machine\n\n",
		c.producers, c.traces*c.spans, c.traces, c.spans, len(b), c.seconds)
	fmt.Fprintln(out, "| mechanism | ack durable | phase | requests | req/s | spans/s | CPU-s per M spans | bytes written per span | disk at end of produce (bytes/span) | fsyncs per request |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|")
	for _, m := range c.modes {
		dir := filepath.Join(c.dir, m)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		var mech mechanism
		var err error
		switch m {
		case "wal":
			mech, err = newWAL(ctx, dir)
		case "queue-fsync":
			mech, err = newQueue(ctx, dir, true)
		case "queue-nofsync":
			mech, err = newQueue(ctx, dir, false)
		default:
			return fmt.Errorf("unknown mode %q", m)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		if err := measure(ctx, c, m, mech, dir, batches, out); err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		os.RemoveAll(dir)
	}
	return nil
}

// mechanism is one way of acknowledging and reading back.
type mechanism interface {
	durable() string
	send(ctx context.Context, td ptrace.Traces) error
	// drain consumes until spans spans were read back, and returns.
	drain(ctx context.Context, spans int64) error
	fsyncs() int64 // -1 when unknown
	close(ctx context.Context) error
}

type sample struct {
	at       time.Time
	cpu      time.Duration
	writeB   int64
	reqs     int64
	spans    int64
	syncs    int64
	diskSize int64
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeBytes is write_bytes from /proc/self/io: bytes this process caused
// to be sent to the storage layer (counted when pages are dirtied).
func writeBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "write_bytes: "); ok {
			var n int64
			fmt.Sscan(v, &n)
			return n
		}
	}
	return -1
}

func dirSize(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

func measure(ctx context.Context, c config, name string, m mechanism, dir string, batches [][]ptrace.Traces, out io.Writer) error {
	var reqs, spans atomic.Int64
	var failed atomic.Value
	before := sample{at: time.Now(), cpu: cpuNow(), writeB: writeBytes(), syncs: m.fsyncs()}
	stop := time.Now().Add(time.Duration(c.seconds) * time.Second)
	var wg sync.WaitGroup
	for p := range c.producers {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				td := batches[p][i%len(batches[p])]
				if err := m.send(ctx, td); err != nil {
					failed.Store(err)
					return
				}
				reqs.Add(1)
				spans.Add(int64(td.SpanCount()))
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	after := sample{at: time.Now(), cpu: cpuNow(), writeB: writeBytes(), reqs: reqs.Load(), spans: spans.Load(), syncs: m.fsyncs(), diskSize: dirSize(dir)}
	row(out, name, m.durable(), "produce (ack)", before, after, after.reqs, after.spans)

	before = sample{at: time.Now(), cpu: cpuNow(), writeB: writeBytes(), syncs: m.fsyncs()}
	if err := m.drain(ctx, after.spans); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	drained := sample{at: time.Now(), cpu: cpuNow(), writeB: writeBytes(), syncs: m.fsyncs()}
	row(out, name, m.durable(), "drain (read back)", before, drained, after.reqs, after.spans)
	return m.close(ctx)
}

func row(out io.Writer, name, durable, phase string, a, b sample, reqs, spans int64) {
	el := b.at.Sub(a.at).Seconds()
	cpu := (b.cpu - a.cpu).Seconds()
	syncs := "?"
	if b.syncs >= 0 {
		syncs = fmt.Sprintf("%.2f", float64(b.syncs-a.syncs)/float64(reqs))
	}
	disk := "—"
	if b.diskSize > 0 {
		disk = fmt.Sprintf("%.0f", float64(b.diskSize)/float64(spans))
	}
	fmt.Fprintf(out, "| %s | %s | %s | %d | %.1f | %.0f | %.2f | %.0f | %s | %s |\n",
		name, durable, phase, reqs, float64(reqs)/el, float64(spans)/el, cpu/(float64(spans)/1e6),
		float64(b.writeB-a.writeB)/float64(spans), disk, syncs)
}

// --- the WAL ---

type walMech struct {
	w *spool.WAL
}

func newWAL(ctx context.Context, dir string) (*walMech, error) {
	w, err := spool.Open(ctx, spool.Options{Dir: dir, MaxBytes: 64 << 30,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return nil, err
	}
	return &walMech{w: w}, nil
}

func (m *walMech) durable() string { return "yes (fdatasync, group commit)" }

func (m *walMech) send(ctx context.Context, td ptrace.Traces) error {
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		return err
	}
	return m.w.Append(ctx, b)
}

func (m *walMech) drain(ctx context.Context, spans int64) error {
	var n int64
	var u ptrace.ProtoUnmarshaler
	for n < spans {
		recs, err := m.w.Read(ctx, 16<<20)
		if err != nil {
			return err
		}
		for _, r := range recs {
			td, err := u.UnmarshalTraces(r.Data)
			if err != nil {
				return err
			}
			n += int64(td.SpanCount())
		}
		if err := m.w.Commit(recs[len(recs)-1].End); err != nil {
			return err
		}
	}
	return nil
}

func (m *walMech) fsyncs() int64 { return m.w.Stats().SyncCount }

func (m *walMech) close(context.Context) error { return m.w.Close() }

// --- the exporterhelper persistent queue on filestorage ---

type queueMech struct {
	fsync bool
	ext   component.Component
	exp   exporter.Traces
	gate  chan struct{} // closed when the drain phase starts
	spans atomic.Int64
	done  chan struct{}
	want  atomic.Int64
}

type host struct {
	ext map[component.ID]component.Component
}

func (h host) GetExtensions() map[component.ID]component.Component { return h.ext }

func newQueue(ctx context.Context, dir string, fsync bool) (*queueMech, error) {
	ff := filestorage.NewFactory()
	fcfg := ff.CreateDefaultConfig().(*filestorage.Config)
	fcfg.Directory = dir
	fcfg.FSync = fsync
	extID := component.MustNewID("file_storage")
	ext, err := ff.Create(ctx, extensiontest.NewNopSettings(ff.Type()), fcfg)
	if err != nil {
		return nil, err
	}
	h := host{ext: map[component.ID]component.Component{extID: ext}}
	if err := ext.Start(ctx, h); err != nil {
		return nil, err
	}
	m := &queueMech{fsync: fsync, ext: ext, gate: make(chan struct{}), done: make(chan struct{})}
	m.want.Store(-1)

	q := exporterhelper.NewDefaultQueueConfig()
	q.StorageID = &extID
	q.QueueSize = 100_000_000 // requests: never the limit here
	q.NumConsumers = 1
	q.Batch = configoptional.None[exporterhelper.BatchConfig]()
	typ := component.MustNewType("spoolbench")
	exp, err := exporterhelper.NewTraces(ctx, exportertest.NewNopSettings(typ), &struct{}{},
		func(_ context.Context, td ptrace.Traces) error {
			<-m.gate
			n := m.spans.Add(int64(td.SpanCount()))
			if w := m.want.Load(); w >= 0 && n >= w {
				select {
				case <-m.done:
				default:
					close(m.done)
				}
			}
			return nil
		},
		exporterhelper.WithQueue(configoptional.Some(q)),
		exporterhelper.WithRetry(configretry.BackOffConfig{Enabled: false}),
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{}),
	)
	if err != nil {
		return nil, errors.Join(err, ext.Shutdown(ctx))
	}
	if err := exp.Start(ctx, h); err != nil {
		return nil, errors.Join(err, ext.Shutdown(ctx))
	}
	m.exp = exp
	return m, nil
}

func (m *queueMech) durable() string {
	if m.fsync {
		return "yes (bbolt fdatasync per transaction)"
	}
	return "no (page cache only)"
}

func (m *queueMech) send(ctx context.Context, td ptrace.Traces) error {
	return m.exp.ConsumeTraces(ctx, td)
}

func (m *queueMech) drain(ctx context.Context, spans int64) error {
	m.want.Store(spans)
	close(m.gate)
	if m.spans.Load() >= spans {
		return nil
	}
	select {
	case <-m.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *queueMech) fsyncs() int64 { return -1 }

func (m *queueMech) close(ctx context.Context) error {
	return errors.Join(m.exp.Shutdown(ctx), m.ext.Shutdown(ctx))
}
