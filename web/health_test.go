package web

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
)

// /healthz and /readyz answer from the pipeline's report: 503 when it is
// unhealthy or not ready (a load balancer drains on /readyz), the full
// report to authorized callers, only the verdict to others.
func TestHealthAndReadinessFollowThePipeline(t *testing.T) {
	rep := HealthReport{Healthy: true, Ready: false, Status: "draining",
		Detail: map[string]any{"store": map[string]any{"reachable": false, "error": "dial tcp 10.0.0.7:9000: refused"}}}
	token := "0123456789abcdef0123"
	srv, err := New(Config{AuthToken: token}, Deps{Traces: openStore(t), Health: func(context.Context) HealthReport { return rep }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)

	code, body := get(t, ts, "/healthz")
	if code != 200 || !strings.Contains(body, `"status": "draining"`) || strings.Contains(body, "10.0.0.7") {
		t.Errorf("/healthz without the token: %d %s; want 200, the status, no store detail", code, body)
	}
	code, body = get(t, ts, "/readyz")
	if code != 503 || !strings.Contains(body, `"ready": false`) {
		t.Errorf("/readyz while draining: %d %s; want 503", code, body)
	}
	code, body = get(t, ts, "/healthz", "Authorization", "Bearer "+token)
	if code != 200 || !strings.Contains(body, "10.0.0.7") {
		t.Errorf("/healthz with the token: %d %s; want the full report", code, body)
	}
	rep.Healthy, rep.Status = false, "unavailable"
	if code, _ = get(t, ts, "/healthz"); code != 503 {
		t.Errorf("/healthz when unhealthy: %d, want 503", code)
	}
}
