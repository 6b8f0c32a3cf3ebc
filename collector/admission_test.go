package collector_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/internal/testtier"
)

// A flood of large requests against a small in-flight budget: the ones
// over the budget are refused before they are decoded, with
// RESOURCE_EXHAUSTED and a retry delay; every request answered OK is
// stored; and when the flood is over nothing is left reserved — including
// the reservations of calls gRPC refused itself (over the size limit).
func TestAdmissionRefusesAFloodRetryablyAndStoresWhatItAcknowledged(t *testing.T) {
	testtier.Slow(t)
	st := openSQLite(t)
	srv := startServer(t, st, func(c *collector.ServerConfig) {
		c.MaxInFlightMiB = 2
		c.MaxRequestMiB = 4
		c.HTTPAddr = collector.AddrOff
	})
	client := ptraceotlp.NewGRPCClient(dialGRPC(t, srv.GRPCAddr()))
	var ok, refused atomic.Int64
	var okIDs sync.Map
	var wg sync.WaitGroup
	for i := range 48 {
		wg.Go(func() {
			td, ids := uniqueBatch(uint64(5000+i), 200) // ~1 MB a request
			_, err := client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td))
			switch st, _ := status.FromError(err); {
			case err == nil:
				ok.Add(1)
				for _, id := range ids {
					okIDs.Store(id, true)
				}
			case st.Code() == codes.ResourceExhausted && retryDelay(st) > 0:
				refused.Add(1)
			default:
				t.Errorf("request %d: %v; want OK or RESOURCE_EXHAUSTED with RetryInfo", i, err)
			}
		})
	}
	// Over the size limit: refused by gRPC after the tap reserved.
	for i := range 5 {
		wg.Go(func() {
			td, _ := uniqueBatch(uint64(6000+i), 1000) // ~5 MB
			_, err := client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td))
			if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted {
				t.Errorf("a request over the size limit: %v; want RESOURCE_EXHAUSTED", err)
			}
		})
	}
	wg.Wait()
	t.Logf("%d acknowledged, %d refused", ok.Load(), refused.Load())
	if refused.Load() == 0 || ok.Load() == 0 {
		t.Fatalf("%d acknowledged, %d refused: a 2 MiB budget under 48 concurrent 1 MB requests must do both", ok.Load(), refused.Load())
	}
	okIDs.Range(func(k, _ any) bool {
		if spans, err := st.GetTrace(context.Background(), k.(string)); err != nil || len(spans) != 10 {
			t.Errorf("acknowledged trace %s: %d spans stored (%v), want 10", k, len(spans), err)
		}
		return true
	})
	waitFor(t, "every reservation to be returned", 5*time.Second, func() bool {
		return srv.Health(context.Background()).Admission.InFlightBytes == 0
	})
	if h := srv.Health(context.Background()); h.Admission.Refused < refused.Load() {
		t.Errorf("health counts %d refusals, the senders saw %d", h.Admission.Refused, refused.Load())
	}
}
