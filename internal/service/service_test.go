package service_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/service"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStackReleasesInReverseAndNamesWhatFailed(t *testing.T) {
	var s service.Stack
	var order []string
	for _, name := range []string{"store", "collector", "ui"} {
		s.Push("close "+name, func(context.Context) error {
			order = append(order, name)
			if name == "collector" {
				return errors.New("still busy")
			}
			return nil
		})
	}
	err := s.Unwind(context.Background())
	if got := strings.Join(order, ","); got != "ui,collector,store" {
		t.Fatalf("released %s, want ui,collector,store", got)
	}
	if err == nil || err.Error() != "close collector: still busy" {
		t.Fatalf("Unwind = %v, want the collector's error named", err)
	}
	order = nil
	if err := s.Unwind(context.Background()); err != nil || len(order) != 0 {
		t.Fatalf("second Unwind released %v again (err %v)", order, err)
	}
}

func TestStackTakesPushesFromManyGoroutines(t *testing.T) {
	var s service.Stack
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for range 16 {
		wg.Go(func() {
			s.Push("part", func(context.Context) error { mu.Lock(); n++; mu.Unlock(); return nil })
		})
	}
	wg.Wait()
	if err := s.Unwind(context.Background()); err != nil || n != 16 {
		t.Fatalf("released %d of 16 (err %v)", n, err)
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func TestServeHTTPServesUntilShutdownAndDrainsARequestInFlight(t *testing.T) {
	ln := listen(t)
	started, release := make(chan struct{}), make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
		}
		io.WriteString(w, "ok")
	}), ReadHeaderTimeout: time.Second}
	h := service.ServeHTTP(srv, ln, func(err error) { t.Errorf("onStop called on a clean shutdown: %v", err) })
	url := "http://" + ln.Addr().String()
	resp, err := http.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	slow := make(chan string, 1)
	go func() {
		resp, err := http.Get(url + "/slow")
		if err != nil {
			slow <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		slow <- string(b)
	}()
	<-started
	shut := make(chan error, 1)
	go func() { shut <- h.Shutdown(context.Background()) }()
	time.Sleep(50 * time.Millisecond) // Shutdown is waiting on the request in flight
	close(release)
	if got := <-slow; got != "ok" {
		t.Fatalf("the request in flight got %q, want it answered", got)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	select {
	case <-h.Done():
	default:
		t.Fatal("Done is open after Shutdown returned")
	}
	if h.Err() != nil {
		t.Fatalf("Err after a Shutdown = %v, want nil", h.Err())
	}
}

func TestServeHTTPShutdownDropsAHungRequestWhenItsContextEnds(t *testing.T) {
	ln := listen(t)
	hung := make(chan struct{})
	defer close(hung)
	started := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-hung:
		case <-r.Context().Done():
		}
	}), ReadHeaderTimeout: time.Second}
	h := service.ServeHTTP(srv, ln, nil)
	go func() {
		if resp, err := http.Get("http://" + ln.Addr().String()); err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := h.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown under a hung request = %v, want the deadline", err)
	}
}

func TestServeHTTPReportsAServerThatStopsOnItsOwn(t *testing.T) {
	ln := listen(t)
	ln.Close() // Serve fails at once
	got := make(chan error, 1)
	h := service.ServeHTTP(&http.Server{ReadHeaderTimeout: time.Second}, ln, func(err error) { got <- err })
	<-h.Done()
	if h.Err() == nil {
		t.Fatal("Err = nil for a server whose listener was closed")
	}
	if err := <-got; err != h.Err() {
		t.Fatalf("onStop got %v, Err is %v", err, h.Err())
	}
}

func TestSerializedWritesNeverInterleave(t *testing.T) {
	var buf bytes.Buffer
	w := service.Serialized(&buf)
	if service.Serialized(w) != w || service.Serialized(nil) != nil {
		t.Fatal("Serialized wraps a serialised writer again, or nil")
	}
	var wg sync.WaitGroup
	line := strings.Repeat("x", 1000) + "\n"
	for range 8 {
		wg.Go(func() {
			for range 50 {
				io.WriteString(w, line)
			}
		})
	}
	wg.Wait()
	for i, l := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		if l != line[:1000] {
			t.Fatalf("line %d is %d bytes: writes interleaved", i, len(l))
		}
	}
}
