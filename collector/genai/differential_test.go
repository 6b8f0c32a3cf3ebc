package genai

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/loomwork/loomwork/store"
)

// The direct decoder must accept exactly what pdata accepts and map it to
// exactly the spans and rejections the pdata walk produced. These tests
// decode every input both ways (refDecodeProto, in pdataref_*_test.go, is the pdata path as it was).

// sameAsPdata decodes b both ways with the attribute limit max and reports
// the first difference.
func sameAsPdata(t *testing.T, b []byte, max int) {
	t.Helper()
	gotS, gotR, gotErr := DecodeProto(b, Options{MaxAttrBytes: max})
	wantS, wantR, wantErr := refDecodeProto(b, refOptions{MaxAttrBytes: max})
	if gotErr == nil && wantErr != nil && strings.Contains(wantErr.Error(), "recursion depth") {
		// The one place the decoders part on purpose: pdata refuses a
		// request holding a value nested past its recursion limit; the
		// direct decoder rejects the spans it belongs to (issue 36) and
		// maps the rest (TestDecodeProtoRejectsTooDeepSpansAlone holds
		// those to pdata's mapping of the request without them).
		deep := false
		for _, r := range gotR {
			deep = deep || strings.Contains(r.Reason, store.ErrTooDeep.Error())
		}
		if !deep {
			t.Fatalf("pdata refused %x for its depth, the direct decoder rejected no span for it: %v", b, gotR)
		}
		for i := range gotS {
			if err := store.CheckStorable(&gotS[i]); err != nil && strings.Contains(err.Error(), store.ErrTooDeep.Error()) {
				t.Fatalf("span %d mapped with a value nested too deep: %v", i, err)
			}
		}
		return
	}
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("verdicts differ on %x:\ndirect: %v\npdata:  %v", b, gotErr, wantErr)
	}
	if gotErr != nil {
		return
	}
	if len(gotS) != len(wantS) {
		t.Fatalf("direct mapped %d spans, pdata %d (input %x)", len(gotS), len(wantS), b)
	}
	for i := range gotS {
		if !reflect.DeepEqual(gotS[i], wantS[i]) {
			t.Fatalf("span %d differs (input %x):\ndirect: %#v\npdata:  %#v", i, b, gotS[i], wantS[i])
		}
	}
	if len(gotR) != len(wantR) {
		t.Fatalf("direct rejected %d spans, pdata %d (input %x): %v vs %v", len(gotR), len(wantR), b, gotR, wantR)
	}
	for i := range gotR {
		g, w := gotR[i], wantR[i]
		if g.TraceID != w.TraceID || g.SpanID != w.SpanID || g.SpanName != w.SpanName || g.Reason != w.Reason {
			t.Fatalf("rejection %d differs: direct %+v, pdata %+v", i, g, w)
		}
	}
}

// wireSeeds are protobuf inputs that reach the decoder's corners: the
// shipped agent trace, and hand-made messages with repeated singular
// messages, the deprecated scope-spans field, groups, unknown fields,
// wrong wire types, bad id lengths, deep nesting and odd AnyValues.
func wireSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	add := func(b []byte) { seeds = append(seeds, b) }

	docs, protos := fuzzSeeds(t)
	seeds = append(seeds, protos...)
	for _, d := range docs {
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalJSON(d); err == nil {
			if pb, err := req.MarshalProto(); err == nil {
				add(pb)
			}
		}
	}

	msg := func(fields ...[]byte) []byte {
		var b []byte
		for _, f := range fields {
			b = append(b, f...)
		}
		return b
	}
	bytesF := func(n protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, n, protowire.BytesType), v)
	}
	varintF := func(n protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, n, protowire.VarintType), v)
	}
	fixed64F := func(n protowire.Number, v uint64) []byte {
		return protowire.AppendFixed64(protowire.AppendTag(nil, n, protowire.Fixed64Type), v)
	}
	fixed32F := func(n protowire.Number, v uint32) []byte {
		return protowire.AppendFixed32(protowire.AppendTag(nil, n, protowire.Fixed32Type), v)
	}
	str := func(s string) []byte { return []byte(s) }
	tid := make([]byte, 16)
	binary.BigEndian.PutUint64(tid[8:], 7)
	sid := []byte{0, 0, 0, 0, 0, 0, 0, 9}
	anyStr := func(s string) []byte { return bytesF(1, str(s)) }
	kvF := func(n protowire.Number, k string, v []byte) []byte {
		return bytesF(n, msg(bytesF(1, str(k)), bytesF(2, v)))
	}
	span := func(extra ...[]byte) []byte {
		return msg(append([][]byte{bytesF(1, tid), bytesF(2, sid), bytesF(5, str("chat m")), varintF(6, 3),
			fixed64F(7, 1_700_000_000_000_000_000), fixed64F(8, 1_700_000_001_000_000_000),
			kvF(9, "gen_ai.operation.name", anyStr("chat")),
			kvF(9, "gen_ai.usage.input_tokens", varintF(3, 12))}, extra...)...)
	}
	request := func(rs ...[]byte) []byte {
		var b []byte
		for _, r := range rs {
			b = append(b, bytesF(1, r)...)
		}
		return b
	}
	res := bytesF(1, msg(kvF(1, "service.name", anyStr("svc")), varintF(2, 3)))
	scope := bytesF(1, msg(bytesF(1, str("lib")), bytesF(2, str("1.0")), kvF(3, "team", anyStr("a"))))

	// one ResourceSpans request; ss: a ScopeSpans field; sp: a Span field.
	one := func(fields ...[]byte) []byte { return request(msg(fields...)) }
	ss := func(fields ...[]byte) []byte { return bytesF(2, msg(fields...)) }
	sp := func(extra ...[]byte) []byte { return bytesF(2, span(extra...)) }

	// Plain.
	add(one(res, ss(scope, sp())))
	// Resource and scope after the spans, and each repeated (merged).
	add(one(ss(sp(), scope, bytesF(1, bytesF(2, str("2.0")))), res,
		bytesF(1, msg(kvF(1, "service.name", anyStr("other")), kvF(1, "host", anyStr("h")))),
		bytesF(3, str("https://s"))))
	// The deprecated field alone, and beside the current one.
	add(one(res, bytesF(1000, msg(scope, sp()))))
	add(one(res, ss(sp()), bytesF(1000, msg(sp(bytesF(5, str("old")))))))
	add(one(res, ss(sp()), bytesF(1000, msg(bytesF(2, bytesF(1, []byte{1, 2})))))) // malformed but unused
	// Status merged; kind and code out of range; flags; dropped counts.
	status1 := bytesF(15, msg(bytesF(2, str("boom")), varintF(3, 2)))
	status2 := bytesF(15, varintF(3, 77))
	add(one(ss(sp(status1, status2, fixed32F(16, 0x301), varintF(10, 1<<40|5), varintF(12, 2), varintF(14, 3), varintF(6, 1<<33)))))
	// Events and links, with ids of every length.
	event := bytesF(11, msg(fixed64F(1, 5), bytesF(2, str("e")), kvF(3, "k", varintF(2, 1)), varintF(4, 2)))
	link := bytesF(13, msg(bytesF(1, tid), bytesF(2, sid), bytesF(3, str("a=b")), fixed32F(6, 0x100), varintF(5, 4)))
	add(one(ss(sp(event, link, bytesF(13, nil)))))
	add(one(ss(sp(bytesF(13, bytesF(1, tid[:15]))))))
	add(one(ss(sp(bytesF(4, sid[:7])))))
	// Rejections: zero ids, self parent, negative tokens.
	noTrace := bytesF(2, msg(bytesF(2, sid), bytesF(5, str("no trace"))))
	add(one(ss(noTrace, sp(bytesF(4, sid)), sp(kvF(9, "gen_ai.usage.output_tokens", varintF(3, uint64(1<<64-5)))))))
	// AnyValue corners: oneof replaced, strindex, bytes, double NaN, nested lists and maps, duplicate keys.
	nested := anyStr("x")
	for range 5 {
		nested = bytesF(5, msg(bytesF(1, nested), bytesF(1, bytesF(6, msg(kvF(1, "id", anyStr("d1")), kvF(1, "id", anyStr("d2")))))))
	}
	add(one(ss(sp(
		kvF(9, "a", msg(anyStr("s"), varintF(3, 4))),
		kvF(9, "b", varintF(8, 3)),
		kvF(9, "c", bytesF(7, []byte{0xff, 0, 1})),
		kvF(9, "d", fixed64F(4, 0x7ff8000000000001)),
		kvF(9, "gen_ai.retrieval.documents", nested),
		kvF(9, "a", anyStr("dup")),
		kvF(9, "\xff\xfe", anyStr("bad utf8 \xc3")),
		kvF(9, "gen_ai.usage.cost", anyStr(" 0.25 ")),
		kvF(9, "retrieval.documents.1.document.id", varintF(3, 42)),
		kvF(9, "retrieval.documents.0.document.id", anyStr("first")),
	))))
	// KeyValue and AnyValue shapes around the fast path for the usual
	// encoding (key and one value, either order; one scalar field).
	kvRaw := func(fields ...[]byte) []byte { return bytesF(9, msg(fields...)) }
	long := string(make([]byte, 300))
	add(one(ss(sp(
		kvRaw(bytesF(2, anyStr("value first")), bytesF(1, str("vf"))),
		kvRaw(bytesF(1, str("key only"))),
		kvRaw(bytesF(2, anyStr("value only"))),
		kvRaw(bytesF(1, str("k2")), bytesF(2, anyStr("one")), bytesF(2, varintF(3, 2))),
		kvRaw(bytesF(1, str("k3")), bytesF(1, str("k3 again")), bytesF(2, anyStr("v"))),
		kvRaw(bytesF(1, str("empty value")), bytesF(2, nil)),
		kvRaw(bytesF(1, str("two fields")), bytesF(2, msg(anyStr("s"), varintF(2, 1)))),
		kvRaw(bytesF(1, str("bool")), bytesF(2, varintF(2, 0))),
		kvRaw(bytesF(1, str("bool big")), bytesF(2, varintF(2, 1<<40))),
		kvRaw(bytesF(1, str("int")), bytesF(2, []byte{0x18, 0x80, 0x80, 0x00})),
		kvRaw(bytesF(1, str("neg")), bytesF(2, varintF(3, uint64(1<<64-1)))),
		kvRaw(bytesF(1, str("double")), bytesF(2, fixed64F(4, 0x400921FB54442D18))),
		kvRaw(bytesF(1, str("long string")), bytesF(2, anyStr(long))),
		kvRaw(bytesF(1, str(long)), bytesF(2, anyStr("long key"))),
		kvRaw(bytesF(1, str("unknown after")), bytesF(2, anyStr("v")), varintF(7, 1)),
	))))
	add(one(ss(sp(kvRaw(bytesF(1, str("double cut")), bytesF(2, []byte{0x21, 1, 2, 3}))))))
	add(one(ss(sp(kvRaw(bytesF(1, str("wrong wire")), bytesF(2, fixed32F(1, 5)))))))
	add(one(ss(sp(kvRaw(bytesF(1, str("key")), []byte{0x12, 0x05, 0x0a}))))) // value overruns
	add(one(ss(sp(kvRaw([]byte{0x0a, 0x80})))))                              // truncated key length
	// Too deep, and just deep enough.
	deep := func(n int) []byte {
		v := anyStr("leaf")
		for range n {
			v = bytesF(5, msg(bytesF(1, v)))
		}
		return one(ss(sp(kvF(9, "deep", v))))
	}
	add(deep(48))
	add(deep(49))
	add(deep(60))
	// Unknown fields of every wire type, groups, and broken framing.
	unknown := msg(varintF(99, 1), fixed64F(98, 2), fixed32F(97, 3), bytesF(96, str("u")),
		protowire.AppendTag(nil, 95, protowire.StartGroupType), varintF(1, 5), protowire.AppendTag(nil, 95, protowire.EndGroupType))
	add(one(unknown, ss(unknown, sp(unknown))))
	add(protowire.AppendTag(nil, 5, protowire.EndGroupType))
	add(protowire.AppendTag(nil, 5, 7))
	add([]byte{0x0a, 0x05, 0x12})
	add([]byte{0x08, 0x01})
	add([]byte{0x00})
	add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	// Wrong wire type for a known field at every level.
	add(request(varintF(1, 1)))
	add(one(varintF(2, 1)))
	add(one(ss(varintF(2, 1))))
	add(one(ss(bytesF(2, varintF(5, 1)))))
	add(one(ss(sp(fixed32F(7, 1)))))
	add(one(ss(sp(kvF(9, "k", fixed32F(3, 1))))))
	add(one(bytesF(1, bytesF(3, varintF(2, 1)))))
	return seeds
}

func TestDecodeProtoMatchesPdataOnSeeds(t *testing.T) {
	for _, b := range wireSeeds(t) {
		for _, max := range []int{fuzzLimit, 0, -1} {
			sameAsPdata(t, b, max)
		}
	}
}

// TestDecodeProtoMatchesPdataOnMutations runs the differential check on
// 20,000 seeded random mutations of the seeds (byte flips, insertions,
// deletions, truncations), so the property is exercised on every test run
// and not only under go test -fuzz.
func TestDecodeProtoMatchesPdataOnMutations(t *testing.T) {
	seeds := wireSeeds(t)
	rng := rand.New(rand.NewPCG(17, 2026))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	accepted := 0
	for i := range n {
		b := append([]byte(nil), seeds[rng.IntN(len(seeds))]...)
		for range 1 + rng.IntN(4) {
			if len(b) == 0 {
				b = append(b, byte(rng.Uint32()))
				continue
			}
			p := rng.IntN(len(b))
			switch rng.IntN(4) {
			case 0:
				b[p] ^= byte(1 << rng.IntN(8))
			case 1:
				b[p] = byte(rng.Uint32())
			case 2:
				b = append(b[:p], append([]byte{byte(rng.Uint32())}, b[p:]...)...)
			case 3:
				b = append(b[:p], b[p+1:]...)
			}
		}
		if rng.IntN(10) == 0 {
			b = b[:rng.IntN(len(b)+1)]
		}
		sameAsPdata(t, b, []int{fuzzLimit, 0}[i%2])
		if _, _, err := DecodeProto(b, Options{}); err == nil {
			accepted++
		}
	}
	// Both verdicts must be exercised, or the test proves little.
	if accepted == 0 || accepted == n {
		t.Fatalf("%d of %d mutations accepted: the mutations do not reach both verdicts", accepted, n)
	}
	t.Logf("%d of %d mutated inputs accepted by both decoders, the rest refused by both", accepted, n)
}

func FuzzDecodeProtoMatchesPdata(f *testing.F) {
	for _, b := range wireSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sameAsPdata(t, b, fuzzLimit)
		sameAsPdata(t, b, -1)
	})
}

// The direct path keeps store.Span's contract too: the attributes of one
// resource are one shared map.
func TestDecodeProtoSharesResourceAttributes(t *testing.T) {
	doc, err := os.ReadFile("testdata/agent_trace.json")
	if err != nil {
		t.Fatal(err)
	}
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalJSON(doc); err != nil {
		t.Fatal(err)
	}
	b, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	spans, _, err := DecodeProto(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) < 2 {
		t.Fatalf("%d spans", len(spans))
	}
	first := reflect.ValueOf(spans[0].ResourceAttributes).Pointer()
	for _, s := range spans[1:] {
		if reflect.ValueOf(s.ResourceAttributes).Pointer() != first {
			t.Fatalf("span %s has its own resource attribute map", s.SpanID)
		}
	}
}

func TestDecodeProtoErrorsNameWhereTheRequestIsBroken(t *testing.T) {
	tid := make([]byte, 15)
	sp := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), tid)
	ss := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), sp)
	ss = append(protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), nil), ss...) // an empty span first
	rs := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), ss)
	req := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rs)
	_, _, err := DecodeProto(req, Options{})
	const want = "resource_spans[0]: scope_spans[0]: spans[1]: trace_id is 15 bytes, want 16"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}
