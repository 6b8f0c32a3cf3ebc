package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
)

// Fixtures the package's tests share, built once on first use and torn
// down by TestMain: the headless Chromium the browser tests open tabs in,
// and the 30,000-span trace the big-trace tests only read (writing it
// into the pure-Go SQLite takes tens of seconds under -race).

func TestMain(m *testing.M) {
	code := m.Run()
	sharedBrowser.stop()
	sharedBigTrace.stop()
	os.Exit(code)
}

// sharedBrowser is one Chromium process; each test gets a tab of its own
// (its own page, viewport and history), so tests stay independent while
// paying the browser's start-up once.
var sharedBrowser browserFixture

type browserFixture struct {
	once sync.Once
	ctx  context.Context // the browser's first tab; never used by a test
	err  error
	quit func()
}

func (b *browserFixture) stop() {
	if b.quit != nil {
		b.quit()
	}
}

// browser opens a tab of the shared headless Chromium (Debian's package)
// for an end-to-end test; the tab closes when the test ends. Without
// Chromium the test skips locally and fails in CI, which installs it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed; .ci/run installs Debian's chromium package")
		}
		t.Skip("chromium not installed (apt-get install chromium)")
	}
	b := &sharedBrowser
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "loomwork-web-chromium-")
		if err != nil {
			b.err = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.UserDataDir(dir),
			chromedp.WindowSize(1500, 1000),
		)
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, bcancel := chromedp.NewContext(actx)
		b.quit = func() { bcancel(); acancel(); os.RemoveAll(dir) }
		// The first Do on bctx starts the browser, which lives as long as
		// the context passed to that Do: bctx itself, not a timeout of it.
		if err := chromedp.Do(bctx); err != nil {
			b.err = fmt.Errorf("start chromium: %w", err)
			return
		}
		b.ctx = bctx
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	tab, closeTab := chromedp.NewContext(b.ctx)
	t.Cleanup(closeTab)
	// A guard against a hung page, not a performance bound: tabs of
	// parallel tests share two cores with -race builds.
	ctx, cancel := context.WithTimeout(tab, 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// sharedBigTrace is bigTraceSpans(30_000) in a SQLite store, served by
// one server (whose trace cache then holds it): the tests using it only
// read.
var sharedBigTrace bigTraceFixture

type bigTraceFixture struct {
	once  sync.Once
	dir   string
	st    *sqlite.Store
	ts    *httptest.Server
	spans []store.Span
	err   error
}

func (f *bigTraceFixture) stop() {
	if f.ts != nil {
		f.ts.Close()
	}
	if f.st != nil {
		f.st.Shutdown(context.Background())
	}
	if f.dir != "" {
		os.RemoveAll(f.dir)
	}
}

// sharedBigTraceServer returns the shared server of the 30,000-span trace and its
// spans (the caller must not change them).
func sharedBigTraceServer(t *testing.T) (*httptest.Server, []store.Span) {
	t.Helper()
	f := &sharedBigTrace
	f.once.Do(func() {
		f.dir, f.err = os.MkdirTemp("", "loomwork-web-bigtrace-")
		if f.err != nil {
			return
		}
		f.st, f.err = sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(f.dir, "traces.db")})
		if f.err != nil {
			return
		}
		f.spans = bigTraceSpans(30_000)
		if f.err = f.st.WriteSpans(context.Background(), f.spans); f.err != nil {
			return
		}
		// These tests check the whole-read waterfall (row pages, reveal,
		// the browser's expansions) at 30,000 spans; the windowed one has
		// its own (window_test.go).
		srv, err := New(Config{WindowSpans: 100_000}, Deps{Traces: f.st})
		if err != nil {
			f.err = err
			return
		}
		f.ts = httptest.NewServer(srv)
		// Open it once, so the server's trace cache holds it before the
		// tests (two at a time) ask for it.
		resp, err := http.Get(f.ts.URL + "/traces/" + f.spans[0].TraceID)
		if err != nil {
			f.err = err
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			f.err = fmt.Errorf("GET the trace page: %s", resp.Status)
		}
	})
	if f.err != nil {
		t.Fatalf("the shared 30,000-span trace: %v", f.err)
	}
	return f.ts, f.spans
}
