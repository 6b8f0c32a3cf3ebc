package reliability

import "testing"

// The outage rows read /healthz as serve writes it (this answer is one
// serve gave while its ClickHouse was down); an answer that is not JSON
// (the old "ok") is not taken for one.
func TestParseHealthReadsServesAnswer(t *testing.T) {
	h := parseHealth(200, []byte(`{"status": "degraded", "ready": true, "store": {"reachable": false, "error": "ping clickhouse: EOF"},
		"spool": {"bytes": 106898438, "max_bytes": 1073741824, "fill": 0.0995}, "admission": {"in_flight_bytes": 0}}`))
	if !h.OK || h.Status != 200 || h.Store.Reachable == nil || *h.Store.Reachable || h.Spool == nil || h.Spool.Bytes != 106898438 || h.Spool.MaxBytes != 1<<30 {
		t.Errorf("parseHealth = %+v (spool %+v): want JSON, store unreachable, spool 106898438 of 1 GiB", h, h.Spool)
	}
	if h := parseHealth(200, []byte("ok\n")); h.OK {
		t.Errorf(`parseHealth("ok") = %+v, want not OK`, h)
	}
}
