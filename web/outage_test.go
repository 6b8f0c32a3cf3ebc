package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
	"github.com/loomwork/loomwork/store/storetest"
)

// TestReadsDuringAClickHouseOutageAnswer503InTime is issue 36's last
// fault: during a ClickHouse outage the API and the trace pages hung or
// answered 500, with no timeout. Each read must answer 503 with
// Retry-After — a JSON {"error": …} under /api/, the error page otherwise
// — naming the store, within the read timeout: with the server down
// (connections end at once) and hung (accepted, never answered).
func TestReadsDuringAClickHouseOutageAnswer503InTime(t *testing.T) {
	testtier.Slow(t) // a real ClickHouse
	chs := chtest.Start(t)
	db := chs.NewDatabase(t)
	outage := chs.NewOutage(t)
	ctx := store.WithDefaultProject(context.Background())
	st, err := clickhouse.Open(ctx, clickhouse.Config{DSN: outage.DSN(chs, db)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Shutdown(context.Background()) })
	spans := storetest.GenerateTraces(1, 3, 1)
	if err := st.WriteSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	const timeout = 2 * time.Second
	srv, err := New(Config{StoreTimeout: timeout, CacheFresh: time.Nanosecond}, Deps{Traces: st, StoreName: "clickhouse " + outage.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	client := &http.Client{Timeout: 30 * time.Second}
	id := spans[0].TraceID
	paths := []string{"/api/v1/traces", "/api/v1/traces/" + id, "/traces", "/traces/" + id}

	for _, p := range paths {
		resp, err := client.Get(hs.URL + p)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s before the outage: %v %v", p, resp.Status, err)
		}
		resp.Body.Close()
	}
	for _, mode := range []string{"down", "hung"} {
		if mode == "down" {
			outage.Down()
		} else {
			outage.Hang()
		}
		for _, p := range paths {
			began := time.Now()
			resp, err := client.Get(hs.URL + p)
			took := time.Since(began)
			if err != nil {
				t.Fatalf("%s: GET %s: %v after %s (the read hangs)", mode, p, err, took.Round(time.Millisecond))
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			msg := string(b)
			if strings.HasPrefix(p, "/api/") {
				var body map[string]string
				if err := json.Unmarshal(b, &body); err != nil {
					t.Errorf("%s: GET %s: body is not JSON: %s", mode, p, b)
				}
				msg = body["error"]
			}
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
				!strings.Contains(msg, outage.Addr()) {
				t.Errorf("%s: GET %s: %d, Retry-After %q, %q; want 503 with Retry-After naming the store %s",
					mode, p, resp.StatusCode, resp.Header.Get("Retry-After"), msg, outage.Addr())
			}
			if took > timeout+3*time.Second {
				t.Errorf("%s: GET %s answered after %s, past the %s read timeout", mode, p, took.Round(time.Millisecond), timeout)
			}
		}
	}
	outage.Up()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(hs.URL + "/api/v1/traces")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("reads did not recover within 30 s of the store's return: %v %v", resp.Status, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
