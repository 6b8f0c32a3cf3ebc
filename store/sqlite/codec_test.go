package sqlite

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"unsafe"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// decodePayloadJSON is how GetTrace decoded payloads before payloadDecoder:
// encoding/json into the payload struct. It is the reference the fast
// decoder must match.
func decodePayloadJSON(raw []byte, sp *store.Span) error {
	var p payload
	if err := json.Unmarshal(raw, &p); err != nil {
		return err
	}
	p.applyTo(sp)
	return nil
}

// samePayload compares two decoded spans, treating NaN costs as equal.
func samePayload(a, b store.Span) bool {
	an := a.CostUSD != nil && math.IsNaN(*a.CostUSD)
	bn := b.CostUSD != nil && math.IsNaN(*b.CostUSD)
	if an != bn {
		return false
	}
	a.CostUSD, b.CostUSD = nil, nil
	return reflect.DeepEqual(a, b)
}

// checkDecodersAgree decodes raw with the fast decoder, in both string
// modes, and with encoding/json, and fails unless they accept the same input
// and produce the same span.
func checkDecodersAgree(t *testing.T, raw []byte) {
	t.Helper()
	var want store.Span
	wantErr := decodePayloadJSON(raw, &want)
	for _, share := range []bool{true, false} {
		var got store.Span
		d := payloadDecoder{}
		d.reset(string(raw), share)
		gotErr := d.decode(&got)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("share=%v: payload %q: fast decoder error %v, encoding/json error %v", share, raw, gotErr, wantErr)
		}
		if gotErr == nil && !samePayload(got, want) {
			t.Fatalf("share=%v: payload %q:\nfast decoder  %#v\nencoding/json %#v", share, raw, got, want)
		}
	}
}

var payloadSeeds = []string{
	`{"a":null,"e":null,"l":null,"r":null,"c":null}`,
	`{"a":{},"e":[],"l":[],"r":[],"c":[]}`,
	`{"a":{"i":3,"f":3.0,"e":1e3,"neg":-0,"big":123456789012345678901234,"huge":1e400,"tiny":1e-400,"s":"x","b":true,"n":null,"l":[1,2.5,"a",[],{}],"m":{"k":{"z":false}}},"e":null,"l":null,"r":["d1"],"c":null,"cn":true}`,
	`{"a":{"esc":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00\ud800x\udc00","utf8":"héllo","bad":"` + "\xff\xfe" + `"},"e":null,"l":null,"r":null,"c":null}`,
	`{"a":null,"e":[{"t":1700000000000000000,"n":"exception","a":{"exception.type":"ValueError"}},null,{"t":-5,"n":null,"a":null}],"l":[{"t":"0af7651916cd43dd8448eb211c80319c","s":"b7ad6b7169203331","ts":"k=v","a":{"x":1}}],"r":null,"c":["c1","c2"]}`,
	` { "A" : {"k":1} , "E":null, "Ts":1, "unknown":{"x":[1,{"y":null}]}, "cN": false } `,
	`{"e":[{"n":"x","t":2}],"e":[{"t":1}],"r":["a","b"],"r":[null],"cn":true,"cn":null}`,
	`null`,
	`{"a":{"k":1},"a":null}`,
	`{"e":[{"t":1.5}]}`,
	`{"e":[{"t":"1"}]}`,
	`{"a":[1]}`,
	`{"a":{"k":01}}`,
	`{"a":{"k":"ctl` + "\x01" + `"}}`,
	`{"a":{"k":1},}`,
	`{"a":{"k":"\x"}}`,
	`{"r":[1]}`,
	`{"cn":1}`,
	`[]`,
	`{"a":{"k":1}} x`,
	`{"a":{"k":tru}}`,
	// Flags and dropped counts (uint32: whole, non-negative, in range).
	`{"a":null,"e":[{"t":1,"n":"x","a":null,"d":4}],"l":[{"t":"0af7651916cd43dd8448eb211c80319c","s":"b7ad6b7169203331","a":null,"f":769,"d":1}],"r":null,"c":null,"f":257,"da":3,"de":1,"dl":4294967295}`,
	`{"F":1,"DA":null,"dE":0,"l":[{"F":2,"D":3}]}`,
	`{"f":4294967296}`,
	`{"f":-1}`,
	`{"f":-0}`,
	`{"f":1.0}`,
	`{"f":1e2}`,
	`{"f":"1"}`,
	`{"e":[{"d":true}]}`,
	`{"l":[{"f":-5}]}`,
}

// scopeSeeds are scopes row JSON documents, valid and not.
var scopeSeeds = []string{
	`{"a":null}`,
	`{"a":{}}`,
	`{"a":{"team":"search","n":2,"l":[1,"x"]},"d":3,"u":"https://opentelemetry.io/schemas/1.37.0","ru":"https://opentelemetry.io/schemas/1.26.0","rd":4294967295}`,
	`null`,
	`{"A":{"k":1},"U":"x","RU":"y","x":[1]}`,
	`{"d":4294967296}`,
	`{"d":-1}`,
	`{"u":1}`,
	`{"a":[1]}`,
	`{"a":{"k":1}} x`,
}

// checkScopeDecodersAgree is checkDecodersAgree for scopes rows.
func checkScopeDecodersAgree(t *testing.T, raw []byte) {
	t.Helper()
	var want scopeRec
	wantErr := json.Unmarshal(raw, &want)
	var got scopeRec
	d := payloadDecoder{}
	d.reset(string(raw), false)
	gotErr := d.decodeScope(&got)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("scope %q: fast decoder error %v, encoding/json error %v", raw, gotErr, wantErr)
	}
	if gotErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("scope %q:\nfast decoder  %#v\nencoding/json %#v", raw, got, want)
	}
}

func TestScopeDecoderMatchesEncodingJSON(t *testing.T) {
	for _, s := range scopeSeeds {
		checkScopeDecodersAgree(t, []byte(s))
	}
	// What the write path produces reads back as the span had it.
	for _, sp := range storetest.GenerateTraces(20, 5, 3) {
		if !hasScope(&sp) {
			t.Fatalf("generated span %s has no scope data", sp.SpanID)
		}
		raw, err := appendScope(nil, &sp)
		if err != nil {
			t.Fatal(err)
		}
		checkScopeDecodersAgree(t, raw)
		var r scopeRec
		d := payloadDecoder{}
		d.reset(string(raw), false)
		if err := d.decodeScope(&r); err != nil {
			t.Fatal(err)
		}
		var back store.Span
		r.applyTo(&back)
		if !reflect.DeepEqual(back.ScopeAttributes, sp.ScopeAttributes) || back.ScopeSchemaURL != sp.ScopeSchemaURL ||
			back.ResourceSchemaURL != sp.ResourceSchemaURL || back.ScopeDroppedAttributesCount != sp.ScopeDroppedAttributesCount ||
			back.ResourceDroppedAttributesCount != sp.ResourceDroppedAttributesCount {
			t.Fatalf("scope of span %s: %s read back as %+v", sp.SpanID, raw, r)
		}
	}
}

// FuzzScopeDecoderMatchesEncodingJSON is FuzzPayloadDecoderMatchesEncodingJSON
// for scopes rows.
func FuzzScopeDecoderMatchesEncodingJSON(f *testing.F) {
	for _, s := range scopeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkScopeDecodersAgree(t, raw)
	})
}

func TestPayloadDecoderMatchesEncodingJSON(t *testing.T) {
	for _, s := range payloadSeeds {
		checkDecodersAgree(t, []byte(s))
	}
	// Everything the write path produces for the generated agent traces,
	// resource attributes included.
	for _, sp := range storetest.GenerateTraces(50, 10, 3) {
		raw, err := appendPayload(nil, &sp)
		if err != nil {
			t.Fatal(err)
		}
		checkDecodersAgree(t, raw)
		res, err := sp.ResourceAttributes.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		var want, got store.Attributes
		if err := json.Unmarshal(res, &want); err != nil {
			t.Fatal(err)
		}
		d := payloadDecoder{}
		d.reset(string(res), false)
		if err := d.decodeAttributes(&got); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("resource %s: got %#v, %v; want %#v", res, got, err, want)
		}
	}
}

func TestPayloadDecoderDoesNotAliasInputWhenNotSharing(t *testing.T) {
	raw := []byte(`{"a":{"key":"value","l":["elem"]},"e":[{"t":1,"n":"ev","a":null}],"l":null,"r":["doc"],"c":null}`)
	d := payloadDecoder{}
	src := string(raw)
	d.reset(src, false)
	var sp store.Span
	if err := d.decode(&sp); err != nil {
		t.Fatal(err)
	}
	inSrc := func(s string) bool {
		return len(s) > 0 && sliceOverlaps(src, s)
	}
	for k, v := range sp.Attributes {
		if inSrc(k) {
			t.Errorf("key %q points into the input", k)
		}
		if s, ok := v.(string); ok && inSrc(s) {
			t.Errorf("value %q points into the input", s)
		}
	}
	if inSrc(sp.Attributes["l"].([]any)[0].(string)) || inSrc(sp.Events[0].Name) || inSrc(sp.RetrievedDocs[0]) {
		t.Error("a string points into the input")
	}
}

// FuzzPayloadDecoderMatchesEncodingJSON feeds arbitrary bytes to both
// decoders: they must accept the same payloads and decode them alike.
func FuzzPayloadDecoderMatchesEncodingJSON(f *testing.F) {
	for _, s := range payloadSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkDecodersAgree(t, raw)
	})
}

// sliceOverlaps reports whether s shares memory with src.
func sliceOverlaps(src, s string) bool {
	sp, ep := uintptr(unsafe.Pointer(unsafe.StringData(src))), uintptr(unsafe.Pointer(unsafe.StringData(src)))+uintptr(len(src))
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	return p >= sp && p < ep
}
