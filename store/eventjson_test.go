package store

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// FuzzAppendEventsJSON: for any events, AppendEventsJSON writes the bytes
// encoding/json.Marshal writes (what the ClickHouse store wrote before it
// had its own encoder, and what readers unmarshal), and fails when it
// fails.
func FuzzAppendEventsJSON(f *testing.F) {
	f.Add(int64(1_700_000_000_123_456_789), "exception", `{"exception.type":"ValueError","exception.message":"<bad> & \"quoted\"\n","n":3,"f":1.5,"l":["a",1]}`, uint32(0), 0, 2)
	f.Add(int64(0), "", `{}`, uint32(7), 3, 1)
	f.Add(int64(-9_000_000_000_000_000_000), "\u2028\xff", `{"k":null}`, uint32(1), -5, 3)
	f.Add(int64(9_000_000_000_000_000_000), "late", `{"x":{"y":[true,false]}}`, uint32(0), 14, 1)
	f.Fuzz(func(t *testing.T, ns int64, name, attrs string, dropped uint32, zoneHours, count int) {
		var a Attributes
		if attrs != "" && json.Unmarshal([]byte(attrs), &a) != nil {
			return
		}
		zone := time.UTC
		if zoneHours != 0 {
			zone = time.FixedZone("z", (zoneHours%30)*3600+zoneHours%7*60)
		}
		events := make([]Event, 1+abs(count)%4)
		for i := range events {
			events[i] = Event{Time: time.Unix(0, ns+int64(i)*1_000_000_007).In(zone), Name: name, Attributes: a, DroppedAttributesCount: dropped}
			if i == 1 {
				events[i].Attributes, events[i].DroppedAttributesCount = nil, 0
			}
			if i == 2 {
				events[i].Time = time.Unix(ns%1e9, ns).UTC().AddDate(int(ns%20000), 0, 0)
			}
		}
		want, werr := json.Marshal(events)
		got, gerr := AppendEventsJSON(nil, events)
		if (werr != nil) != (gerr != nil) || (werr == nil && string(got) != string(want)) {
			t.Fatalf("events %+v:\n got %s (%v)\nwant %s (%v)", events, got, gerr, want, werr)
		}
		links := []Link{
			{TraceID: name, SpanID: attrs, TraceState: name, Attributes: a, Flags: dropped, DroppedAttributesCount: dropped / 2},
			{TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331"},
		}
		want, werr = json.Marshal(links)
		got, gerr = AppendLinksJSON(nil, links)
		if (werr != nil) != (gerr != nil) || (werr == nil && string(got) != string(want)) {
			t.Fatalf("links %+v:\n got %s (%v)\nwant %s (%v)", links, got, gerr, want, werr)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func TestAppendEventsJSONNamesTheEventThatCannotBeWritten(t *testing.T) {
	events := []Event{{Time: time.Unix(0, 0).UTC(), Name: "ok"}, {Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Name: "far"}}
	if _, err := AppendEventsJSON(nil, events); err == nil || !strings.Contains(err.Error(), "event 1") {
		t.Fatalf("err = %v, want one naming event 1", err)
	}
	if _, err := AppendEventsJSON(nil, []Event{{Name: "x", Attributes: Attributes{"c": make(chan int)}}}); err == nil {
		t.Fatal("an attribute JSON cannot hold was written")
	}
	if b, _ := AppendEventsJSON([]byte("x"), nil); string(b) != "xnull" {
		t.Fatalf("nil events: %q, want null as json.Marshal writes", b)
	}
}

// BenchmarkAppendEventsJSON writes an exception event with a stack trace,
// against json.Marshal.
func BenchmarkAppendEventsJSON(b *testing.B) {
	events := []Event{{Time: time.Unix(1_700_000_000, 123456789).UTC(), Name: "exception", Attributes: Attributes{
		"exception.type": "httpx.HTTPStatusError", "exception.message": "Server error '502 Bad Gateway' for url 'https://api.example.com/v1/x'",
		"exception.stacktrace": strings.Repeat("  File \"/app/.venv/lib/python3.12/site-packages/httpx/_client.py\", line 1014, in send\n    response.raise_for_status()\n", 12),
		"exception.escaped":    false,
	}}}
	b.Run("append", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf, _ = AppendEventsJSON(buf[:0], events)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(events)
		}
	})
}
