package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loomwork/loomwork/collector/agenttrace"
	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/internal/testtier"
)

// getJSONStatus GETs url and decodes a JSON body into a map; it returns the
// status, the body and the Retry-After header.
func getJSONStatus(t *testing.T, url string) (int, map[string]any, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("GET %s: %d, body not JSON: %v\n%s", url, resp.StatusCode, err, b)
	}
	return resp.StatusCode, m, resp.Header.Get("Retry-After")
}

// TestServeStartsDuringAClickHouseOutageAndFeedsItWhenItReturns is issue
// 36's second fault: serve used to refuse to start while ClickHouse was
// unreachable (17 restarts over 26 s exited 3, and the senders lost 6,152
// spans meanwhile). Now it starts, says on /readyz what it waits for,
// acknowledges into its spool, and stores everything once ClickHouse
// answers — each acknowledged span exactly once.
func TestServeStartsDuringAClickHouseOutageAndFeedsItWhenItReturns(t *testing.T) {
	testtier.Slow(t)
	chs := chtest.Start(t)
	db := chs.NewDatabase(t)
	outage := chs.NewOutage(t)
	outage.Down()

	began := time.Now()
	r, _, stop := startServe(t, nil, "--store", outage.DSN(chs, db), "--spool-dir", filepath.Join(t.TempDir(), "spool"),
		"--store-wait", "1s", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--ui-addr", "127.0.0.1:0")
	t.Logf("serve ready %s after start, ClickHouse unreachable", time.Since(began).Round(time.Millisecond))

	code, body, _ := getJSONStatus(t, r.UIURL+"/readyz")
	if code != http.StatusOK || body["status"] != "degraded" || !strings.Contains(body["reason"].(string), "unreachable") {
		t.Errorf("/readyz during the outage: %d %v; want 200, degraded, a reason naming the unreachable store", code, body)
	}

	code, body, retry := getJSONStatus(t, r.UIURL+"/api/v1/traces")
	if code != http.StatusServiceUnavailable || retry == "" || !strings.Contains(body["error"].(string), outage.Addr()) {
		t.Errorf("/api/v1/traces during the outage: %d (Retry-After %q) %v; want 503 with Retry-After naming the store", code, retry, body)
	}

	conn, err := grpc.NewClient(r.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)
	const batches, traces = 5, 10
	for i := range batches {
		td := agenttrace.NewGenerator(uint64(3620+i), time.Now().Add(-time.Minute)).Batch(traces, 10)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
		cancel()
		if err != nil {
			t.Fatalf("export %d during the outage: %v (the spool should take it)", i, err)
		}
	}
	if n := chs.QueryUint(t, "SELECT count() FROM system.tables WHERE database = '"+db+"'"); n != 0 {
		t.Fatalf("%d tables in %s while ClickHouse was unreachable through the proxy", n, db)
	}

	outage.Up()
	want := uint64(batches * traces * 10)
	deadline := time.Now().Add(60 * time.Second)
	for {
		tables := chs.QueryUint(t, "SELECT count() FROM system.tables WHERE database = '"+db+"' AND name = 'spans'")
		if tables == 1 && chs.QueryUint(t, "SELECT uniqExact(trace_id, span_id) FROM "+db+".spans") >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the spooled spans did not reach ClickHouse within 60 s of its return")
		}
		time.Sleep(200 * time.Millisecond)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, body, _ = getJSONStatus(t, r.UIURL+"/readyz")
		if code == http.StatusOK && body["status"] == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after ClickHouse returned: %d %v; want 200 ok", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if u := chs.QueryUint(t, "SELECT uniqExact(trace_id, span_id) FROM "+db+".spans"); u != want {
		t.Errorf("ClickHouse holds %d distinct spans, want the %d acknowledged", u, want)
	}
}
