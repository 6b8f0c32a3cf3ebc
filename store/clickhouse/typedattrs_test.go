package clickhouse

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// roundTrip is what a write and a read do to sp's attributes: encode,
// leave out what typed columns hold, decode, put back. It returns the
// attributes as read and as the whole JSON decodes them (what every
// version before 5 returned).
func roundTrip(t testing.TB, sp *store.Span) (got, want store.Attributes, mask uint32, short []byte) {
	t.Helper()
	full, err := sp.Attributes.AppendJSON(nil)
	if err != nil {
		t.Skip("attributes the encoder rejects are rejected before eliding")
	}
	if err := json.Unmarshal(full, &want); err != nil {
		t.Fatalf("decode whole JSON %s: %v", full, err)
	}
	js := append([]byte(nil), full...)
	short, mask, _ = elideTypedAttrs(js, sp, nil)
	read := *sp
	read.Attributes = nil
	if err := json.Unmarshal(short, &read.Attributes); err != nil {
		t.Fatalf("decode elided JSON %s (from %s): %v", short, full, err)
	}
	restoreTypedAttrs(&read, mask)
	return read.Attributes, want, mask, short
}

func TestTypedAttributesAreLeftOutAndPutBackExactly(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sp       store.Span
		wantMask uint32
		wantJSON string
	}{
		{
			name: "every typed attribute equal to its column",
			sp: store.Span{
				Operation: "chat", Provider: "openai", RequestModel: "gpt-4o", ResponseModel: "gpt-4o-2024",
				AgentName: "researcher", ConversationID: "conv-1", ToolName: "search", ToolCallID: "call_1",
				InputTokens: 10, OutputTokens: 20, CacheReadTokens: 3, CacheCreationTokens: 4, ReasoningTokens: 5,
				RetrievedDocs: []string{"a", "b"}, CitedDocs: []string{"a"},
				Attributes: store.Attributes{
					semconv.AttrOperationName: "chat", semconv.AttrProviderName: "openai",
					semconv.AttrRequestModel: "gpt-4o", semconv.AttrResponseModel: "gpt-4o-2024",
					semconv.AttrAgentName: "researcher", semconv.AttrConversationID: "conv-1",
					semconv.AttrToolName: "search", semconv.AttrToolCallID: "call_1",
					semconv.AttrUsageInputTokens: int64(10), semconv.AttrUsageOutputTokens: int64(20),
					semconv.AttrUsageCacheReadInputTokens: int64(3), semconv.AttrUsageCacheCreationInputTokens: int64(4),
					semconv.AttrUsageReasoningOutputTokens: int64(5),
					semconv.AttrRetrievalDocuments:         []any{"a", "b"}, semconv.AttrCitations: []any{"a"},
					"server.port": int64(443),
				},
			},
			wantMask: 1<<len(typedAttrs) - 1,
			wantJSON: `{"server.port":443}`,
		},
		{
			name: "values that differ from the column, or by type, stay in the JSON",
			sp: store.Span{
				Operation: "chat", Provider: "openai", InputTokens: 10, OutputTokens: 7, RetrievedDocs: []string{"a"},
				Attributes: store.Attributes{
					semconv.AttrOperationName:      "Chat",   // normalised by the mapper
					semconv.AttrProviderName:       "openai", // equal: left out
					semconv.AttrUsageInputTokens:   10.0,     // a double, the column an int
					semconv.AttrUsageOutputTokens:  "7",      // a string
					semconv.AttrRetrievalDocuments: []any{"a", int64(1)},
					semconv.AttrToolName:           "", // equal to the empty column: left out
					"z":                            map[string]any{semconv.AttrProviderName: "openai"},
				},
			},
			wantMask: 1<<1 | 1<<6,
			wantJSON: `{"gen_ai.operation.name":"Chat","gen_ai.retrieval.documents":["a",1],"gen_ai.usage.input_tokens":10.0,"gen_ai.usage.output_tokens":"7","z":{"gen_ai.provider.name":"openai"}}`,
		},
		{
			name:     "an empty array is not the empty column",
			sp:       store.Span{Attributes: store.Attributes{semconv.AttrCitations: []any{}}},
			wantJSON: `{"loomwork.citations":[]}`,
		},
		{
			name:     "only typed attributes",
			sp:       store.Span{Operation: "chat", Attributes: store.Attributes{semconv.AttrOperationName: "chat"}},
			wantMask: 1,
			wantJSON: `{}`,
		},
		{
			name:     "none",
			sp:       store.Span{Attributes: store.Attributes{}},
			wantJSON: `{}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, want, mask, short := roundTrip(t, &tc.sp)
			if mask != tc.wantMask {
				t.Errorf("attributes_in_columns = %b, want %b", mask, tc.wantMask)
			}
			if string(short) != tc.wantJSON {
				t.Errorf("stored JSON %s, want %s", short, tc.wantJSON)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("read back %#v\nwant      %#v", got, want)
			}
		})
	}
}

// FuzzElideTypedAttrsRoundTrip: whatever the attributes and typed fields,
// the attributes read back (elided JSON decoded, then restored from the
// columns) equal the whole JSON decoded, and nothing is left out that the
// mask does not name.
func FuzzElideTypedAttrsRoundTrip(f *testing.F) {
	f.Add("chat", "chat", int64(3), int64(3), "a", "a", "k", "v\"\\,}{", 2.5)
	f.Add("x", "y", int64(-1), int64(0), "", "b", semconv.AttrToolName, "", 0.0)
	f.Fuzz(func(t *testing.T, col, attr string, colN, attrN int64, doc, attrDoc, k, v string, d float64) {
		sp := store.Span{
			Operation: col, ToolCallID: attr, InputTokens: colN, OutputTokens: attrN,
			RetrievedDocs: []string{doc},
			Attributes: store.Attributes{
				semconv.AttrOperationName:      attr,
				semconv.AttrToolCallID:         attr,
				semconv.AttrUsageInputTokens:   attrN,
				semconv.AttrUsageOutputTokens:  attrN,
				semconv.AttrRetrievalDocuments: []any{attrDoc},
				semconv.AttrRequestModel:       d,
				k:                              v,
			},
		}
		got, want, mask, short := roundTrip(t, &sp)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("read back %#v\nwant      %#v\n(stored %s, mask %b)", got, want, short, mask)
		}
		var left store.Attributes
		if err := json.Unmarshal(short, &left); err != nil {
			t.Fatal(err)
		}
		for key := range want {
			_, kept := left[key]
			bit, typed := typedAttrKey(key)
			if inMask := typed && mask&(1<<bit) != 0; kept == inMask {
				t.Fatalf("attribute %q: kept in JSON %v, in attributes_in_columns %v", key, kept, inMask)
			}
		}
	})
}

// TestEncodeLeavesOutWhatFillWould: encode leaves typed attributes out as
// it writes the JSON; what it stores is, byte for byte and bit for bit,
// what cutting them out of the whole JSON gives (elideTypedAttrs in fill,
// the path of spool records older than format 3); filling twice stores
// the same; and every span reads back whole.
func TestEncodeLeavesOutWhatFillWould(t *testing.T) {
	spans := storetest.GenerateTraces(20, 6, 5)
	// Values a column holds only nearly: a double where the column has
	// the integer, a model that differs, an empty document list.
	spans[1].Attributes = maps.Clone(spans[1].Attributes)
	spans[1].Attributes[semconv.AttrUsageInputTokens] = float64(spans[1].InputTokens)
	spans[2].Attributes = maps.Clone(spans[2].Attributes)
	spans[2].Attributes[semconv.AttrRequestModel] = spans[2].RequestModel + "x"
	p, whole := new(PreparedSpans), new(PreparedSpans)
	if err := p.encode(spans); err != nil {
		t.Fatal(err)
	}
	if err := whole.encodeWith(spans, false); err != nil {
		t.Fatal(err)
	}
	fill := func(q *PreparedSpans) ([]string, []uint32) {
		b := new(spanBatch)
		b.fill(q)
		return append([]string(nil), b.attrs...), append([]uint32(nil), b.attrsInColumns...)
	}
	first, firstMask := fill(p)
	if again, againMask := fill(p); !reflect.DeepEqual(again, first) || !reflect.DeepEqual(againMask, firstMask) {
		t.Fatal("a second fill of the same prepared batch stores different attributes")
	}
	cut, cutMask := fill(whole)
	for i := range spans {
		if first[i] != cut[i] || firstMask[i] != cutMask[i] {
			t.Errorf("span %d: encode stores %s (mask %b), cutting the whole JSON stores %s (mask %b)", i, first[i], firstMask[i], cut[i], cutMask[i])
		}
	}
	elided := 0
	for i, m := range firstMask {
		if m != 0 {
			elided++
		}
		read := spans[i]
		read.Attributes = nil
		if first[i] != "" {
			if err := json.Unmarshal([]byte(first[i]), &read.Attributes); err != nil {
				t.Fatal(err)
			}
		}
		restoreTypedAttrs(&read, m)
		whole, _ := spans[i].Attributes.MarshalJSON()
		got, _ := read.Attributes.MarshalJSON()
		if string(got) != string(whole) {
			t.Errorf("span %d reads back as %s, want %s", i, got, whole)
		}
	}
	if elided == 0 {
		t.Fatal("no generated span has an attribute a typed column holds; the test proves nothing")
	}
	inputBit, _ := typedAttrKey(semconv.AttrUsageInputTokens)
	modelBit, _ := typedAttrKey(semconv.AttrRequestModel)
	if firstMask[1]&(1<<inputBit) != 0 || firstMask[2]&(1<<modelBit) != 0 {
		t.Error("an attribute the column does not hold exactly was left out")
	}
}

// memberEndByteByByte is memberEnd without its jump over strings, the
// reference FuzzMemberEnd holds it to.
func memberEndByteByByte(js []byte, i int) int {
	depth := 0
	inStr := false
	for ; i < len(js); i++ {
		c := js[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
		case ',':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// FuzzMemberEnd: on JSON AppendJSON writes (keys and values with quotes,
// backslashes, brackets and invalid UTF-8), memberEnd finds the member
// boundaries the byte-by-byte scan finds.
func FuzzMemberEnd(f *testing.F) {
	f.Add("k", "v", "a\"b", "\\\"],{")
	f.Add("", "\xff\"", "}", "[")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		js, err := store.Attributes{k1: v1, k2: []any{v2, map[string]any{v1: k2}}, "n": int64(1)}.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(js) && js[i] != '}'; {
			got, want := memberEnd(js, i), memberEndByteByByte(js, i)
			if got != want {
				t.Fatalf("memberEnd(%s, %d) = %d, want %d", js, i, got, want)
			}
			i = got + 1
		}
	})
}

// BenchmarkTypedAttrKey looks up every typed key and six common attribute
// keys that are not typed, as appendElidedJSON does for each attribute of
// each span written.
func BenchmarkTypedAttrKey(b *testing.B) {
	keys := []string{"gen_ai.request.temperature", "service.name", "gen_ai.response.id",
		"gen_ai.response.finish_reasons", "loomwork.step", "gen_ai.request.max_tokens"}
	for i := range typedAttrs {
		keys = append(keys, typedAttrs[i].key)
	}
	found, rounds := 0, 0
	for b.Loop() {
		rounds++
		for _, k := range keys {
			if _, ok := typedAttrKey(k); ok {
				found++
			}
		}
	}
	if found != rounds*len(typedAttrs) {
		b.Fatalf("found %d typed keys in %d rounds, want %d a round", found, rounds, len(typedAttrs))
	}
}

// TestTraceAttrsListTheTypedAttributes: migration 12's view names the
// typed attributes by their bits in attributes_in_columns; it must name
// them in typedAttrs' order, and fold in every column search.go asks
// trace_attrs about (attrsValueColumns, attrsIntColumns).
func TestTraceAttrsListTheTypedAttributes(t *testing.T) {
	b, err := migrationFiles.ReadFile("migrations/0012_trace_attrs.sql")
	if err != nil {
		t.Fatal(err)
	}
	sql := string(b)
	var keys []string
	for _, a := range typedAttrs {
		keys = append(keys, "'"+a.key+"'")
	}
	list := "[\n        " + strings.Join(keys, ",\n        ") + "], range(" + strconv.Itoa(len(typedAttrs)) + ")"
	if n := strings.Count(sql, list); n != 1 {
		t.Errorf("the typed keys are listed in typedAttrs' order %d times, want once (the SELECT the view and the backfill share); want:\n%s", n, list)
	}
	for bit, a := range typedAttrs {
		switch {
		case attrsValueColumns[a.column]:
			want := fmt.Sprintf("if(bitTest(attributes_in_columns, %d), concat('%s=', toString(%s)), '')", bit, a.key, a.column)
			if strings.Count(sql, want) != 1 || a.kind != attrString {
				t.Errorf("%s: want %s once, of a string column", a.key, want)
			}
		case attrsIntColumns[a.column]:
			for _, f := range []string{"max", "min"} {
				want := fmt.Sprintf("%sIfOrNull(%s, bitTest(attributes_in_columns, %d)) AS %s_%s", f, a.column, bit, a.column, f)
				if strings.Count(sql, want) != 1 || a.kind != attrInt {
					t.Errorf("%s: want %s once, of an integer column", a.key, want)
				}
			}
		}
	}
}
