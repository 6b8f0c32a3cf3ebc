package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// referenceMarshal is an independent, straightforward encoder of the
// Attributes JSON format (encoding/json for strings and keys): the oracle
// AppendJSON, the allocation-free encoder every writer uses, must match byte
// for byte.
func referenceMarshal(a Attributes) ([]byte, error) {
	if a == nil {
		return []byte("null"), nil
	}
	var buf bytes.Buffer
	if err := referenceWriteValue(&buf, map[string]any(a)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func referenceWriteValue(buf *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case nil:
		buf.WriteString("null")
	case string:
		b, _ := json.Marshal(t)
		buf.Write(b)
	case bool:
		buf.WriteString(strconv.FormatBool(t))
	case int:
		buf.WriteString(strconv.FormatInt(int64(t), 10))
	case int64:
		buf.WriteString(strconv.FormatInt(t, 10))
	case float64:
		switch {
		case math.IsNaN(t):
			buf.WriteString(`"NaN"`)
		case math.IsInf(t, 1):
			buf.WriteString(`"Inf"`)
		case math.IsInf(t, -1):
			buf.WriteString(`"-Inf"`)
		default:
			s := strconv.FormatFloat(t, 'g', -1, 64)
			if !bytes.ContainsAny([]byte(s), ".eE") {
				s += ".0"
			}
			buf.WriteString(s)
		}
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := referenceWriteValue(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case []string:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			b, _ := json.Marshal(e)
			buf.Write(b)
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			buf.Write(kb)
			buf.WriteByte(':')
			if err := referenceWriteValue(buf, t[k]); err != nil {
				return fmt.Errorf("attribute %q: %w", k, err)
			}
		}
		buf.WriteByte('}')
	case Attributes:
		return referenceWriteValue(buf, map[string]any(t))
	default:
		return fmt.Errorf("unsupported attribute value type %T", v)
	}
	return nil
}

func checkAppendJSONMatchesReference(t *testing.T, a Attributes) {
	t.Helper()
	want, werr := referenceMarshal(a)
	got, gerr := a.AppendJSON(nil)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("errors differ for %#v: reference %v, AppendJSON %v", a, werr, gerr)
	}
	if string(got) != string(want) {
		t.Errorf("AppendJSON(%#v)\n got %s\nwant %s", a, got, want)
	}
	if m, _ := a.MarshalJSON(); string(m) != string(got) {
		t.Errorf("MarshalJSON and AppendJSON differ: %s vs %s", m, got)
	}
}

func TestAppendJSONMatchesReferenceOnEdgeValues(t *testing.T) {
	for _, a := range []Attributes{
		nil,
		{},
		{"s": "plain", "html": "<a href=\"x\">&</a>", "ctl": "\x00\x01\b\f\n\r\t\x1f", "bad": "a\xffb", "sep": "\u2028\u2029", "uni": "résumé ✓"},
		{"i": int64(-9223372036854775808), "j": 42, "f": 3.0, "g": 1e21, "h": 1.5e-7, "z": math.Copysign(0, -1), "nan": math.NaN(), "inf": math.Inf(1), "ninf": math.Inf(-1)},
		{"b": true, "n": nil, "arr": []any{"x", int64(1), 2.5, false, nil, []any{}}, "ss": []string{"a", "\"b\""}, "nested": map[string]any{"k": Attributes{"deep": 1.0}}},
		{"bad\xffkey": 1, "a<b": "x", "\u2028": true, "é": 1.5, "": "empty key"},
	} {
		checkAppendJSONMatchesReference(t, a)
		checkStorableJSONAgrees(t, a)
	}
}

func TestAppendJSONRejectsUnsupportedTypes(t *testing.T) {
	if _, err := (Attributes{"ch": make(chan int)}).AppendJSON(nil); err == nil {
		t.Error("a channel value was encoded")
	}
}

// FuzzAppendJSONMatchesReference: for any attributes a JSON document can
// describe, AppendJSON writes exactly what the reference encoder writes.
func FuzzAppendJSONMatchesReference(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"a":"b","n":1,"f":1.5,"l":[1,"x",true,null],"m":{"k":"<&>"}}`,
		`{"s":"\u2028\ud800","e":1e300,"z":-0.0}`,
		`{"arr":[1,2.5,"s",false,[],{}],"nested":{"k":{"k2":[1e300,-0.0]}}}`,
		`{"html":"<script>&amp;</script>","ctl":"\u0000\u001f\t\n\r\"\\","sep":"\u2028\u2029","emoji":"🚀 日本"}`,
		`{"big":9223372036854775807,"tiny":1e-320}`,
		"{\"bad utf8\":\"\xff\xfe\"}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		var a Attributes
		if err := json.Unmarshal([]byte(doc), &a); err != nil {
			return
		}
		want, werr := referenceMarshal(a)
		got, gerr := a.AppendJSON(nil)
		if (werr != nil) != (gerr != nil) || string(got) != string(want) {
			t.Fatalf("input %q:\n got %s (%v)\nwant %s (%v)", doc, got, gerr, want, werr)
		}
		checkStorableJSONAgrees(t, a)
	})
}

// checkStorableJSONAgrees: AppendStorableJSON fails, wrapping ErrTooDeep,
// exactly when CheckStorable's depth rule refuses a as a span's attributes,
// and otherwise writes what AppendJSON writes.
func checkStorableJSONAgrees(t *testing.T, a Attributes) {
	t.Helper()
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	sp := Span{TraceID: "0123456789abcdef0123456789abcdef", SpanID: "0123456789abcdef", StartTime: at, EndTime: at, Attributes: a}
	deep := errors.Is(CheckStorable(&sp), ErrTooDeep)
	got, err := a.AppendStorableJSON(nil, nil)
	if deep != errors.Is(err, ErrTooDeep) {
		t.Fatalf("%#v: CheckStorable finds it too deep: %v; AppendStorableJSON: %v", a, deep, err)
	}
	if want, werr := a.AppendJSON(nil); !deep && (string(got) != string(want) || (err != nil) != (werr != nil)) {
		t.Fatalf("%#v: AppendStorableJSON %s (%v), AppendJSON %s (%v)", a, got, err, want, werr)
	}
	// The keys it says it wrote are those a JSON reader finds, in order.
	js, keys, kerr := a.AppendStorableJSONKeys(nil, []string{"before"}, nil)
	if string(js) != string(got) || (kerr != nil) != (err != nil) {
		t.Fatalf("%#v: AppendStorableJSONKeys %s (%v), AppendStorableJSON %s (%v)", a, js, kerr, got, err)
	}
	if err != nil || a == nil {
		return
	}
	want := []string{"before"}
	dec := json.NewDecoder(bytes.NewReader(js))
	if _, err := dec.Token(); err != nil { // {
		t.Fatalf("%s: %v", js, err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		want = append(want, k.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", js, err)
		}
	}
	if !slices.Equal(keys, want) {
		t.Fatalf("%s: keys %q, a reader finds %q", js, keys, want)
	}
}

// Values at and beyond the depth limit, of every kind that nests (and
// []string, which does not count as a level): AppendStorableJSON and
// CheckStorable draw the line in the same place.
func TestAppendStorableJSONDrawsCheckStorablesLine(t *testing.T) {
	for n := MaxAttributeDepth - 2; n <= MaxAttributeDepth+2; n++ {
		for _, leaf := range []any{1.5, []string{"a"}, []any{}, map[string]any{}, Attributes{"x": "y"}} {
			for _, wrap := range []string{"array", "map", "attributes", "mixed"} {
				v := leaf
				for i := range n {
					switch {
					case wrap == "array" || wrap == "mixed" && i%2 == 0:
						v = []any{"s", v}
					case wrap == "map":
						v = map[string]any{"k": v}
					default:
						v = Attributes{"k": v}
					}
				}
				checkStorableJSONAgrees(t, Attributes{"a": "plain", "deep": v})
			}
		}
	}
}

// BenchmarkAppendJSON encodes the attributes of an agent's chat span (15
// entries shaped like the GenAI ones, as MapTraces gives them).
func BenchmarkAppendJSON(b *testing.B) {
	a := Attributes{
		"genai.operation.name": "chat", "genai.provider.name": "openai",
		"genai.request.model": "gpt-4o", "genai.response.model": "gpt-4o-2024-08-06",
		"genai.usage.input_tokens": int64(1234), "genai.usage.output_tokens": int64(321),
		"genai.usage.cache_read.input_tokens": int64(512), "genai.request.temperature": 0.2,
		"genai.response.id": "chatcmpl-8x9y", "genai.response.finish_reasons": []any{"stop"},
		"genai.conversation.id": "conv-0042", "genai.agent.name": "support",
		"server.address": "api.example.com", "server.port": int64(443), "lw.run.id": "run-7",
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = a.AppendJSON(buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendJSONString quotes the strings of an agent span: keys,
// names, an id and a longer passage of text, all plain ASCII as most of
// what ingest quotes is (short); and a message of the agent load's kind
// (message), a JSON list of chat messages whose prose has newlines, quotes,
// a few names outside ASCII and an emoji, as gen_ai.input.messages holds.
func BenchmarkAppendJSONString(b *testing.B) {
	short := []string{
		"gen_ai.request.model", "claude-sonnet-4-5", "chat", "call_8f3a9b2c1d", "gen_ai.usage.input_tokens",
		"The quick brown fox jumps over the lazy dog; a retrieved passage of documentation text that is moderately long, as agent spans carry.",
	}
	para := "Thanks for the details. I checked the order history for account 4471-Q and the refund of $24.99 was issued on 2025-03-14; " +
		"it usually takes 3-5 business days to show up. If it doesn't, José from billing can reopen the case \u2014 just reply to this thread. 🙂\n\n" +
		"- Step 1: open **Settings** → Billing\n- Step 2: select \"Refunds\" and confirm the amount\n```sql\nSELECT id, amount FROM refunds WHERE account = '4471-Q';\n```\n"
	msg := `[{"role":"system","parts":[{"type":"text","content":"You are a helpful support agent."}]},{"role":"user","parts":[{"type":"text","content":` +
		strconv.Quote(strings.Repeat(para, 6)) + `}]}]`
	for _, bc := range []struct {
		name string
		ss   []string
	}{{"short", short}, {"message", []string{msg}}} {
		b.Run(bc.name, func(b *testing.B) {
			n := 0
			for _, s := range bc.ss {
				n += len(s)
			}
			b.SetBytes(int64(n))
			buf := make([]byte, 0, 4*n)
			for b.Loop() {
				buf = buf[:0]
				for _, s := range bc.ss {
					buf = AppendJSONString(buf, s)
				}
			}
		})
	}
}

// AppendJSONString tests eight bytes at a time while they are plain: every
// byte value, at every position of strings around that width, is still
// quoted as encoding/json quotes it.
func TestAppendJSONStringQuotesEveryByteAtEveryPosition(t *testing.T) {
	for n := 1; n <= 19; n++ {
		for pos := range n {
			for b := range 256 {
				s := []byte(strings.Repeat("a", n))
				s[pos] = byte(b)
				want, _ := json.Marshal(string(s))
				if got := AppendJSONString(nil, string(s)); string(got) != string(want) {
					t.Fatalf("%q: got %s, want %s", s, got, want)
				}
			}
		}
	}
	// A multi-byte rune and U+2028 across a word boundary.
	for _, s := range []string{"aaaaaaa日本語aaaaaaaa", "aaaaaa\u2028aaaaaaaa", "aaaaaaa\xe6\x97aaaaaaa"} {
		want, _ := json.Marshal(s)
		if got := AppendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	}
}

// FuzzAppendJSONStringMatchesEncodingJSON: AppendJSONString quotes any
// string, valid UTF-8 or not, byte for byte as encoding/json does (HTML
// escaping on), and so what any JSON reader decodes to the string
// encoding/json would give; it appends to dst without touching what dst
// held.
func FuzzAppendJSONStringMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "plain ascii text", "a\"b\\c<d>e&f", "\x00\x1f\x7f", "日本語", "\u2028\u2029",
		"\xe6\x97", "\xff\xfe", "aaaaaaa\xe6\x97\xa5aaaaaaaa", "line\nbreak\ttab\rcr", "🙂 emoji and ✓ marks"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		prefix := []byte("prefix")
		got := AppendJSONString(prefix, s)
		if string(got[:len(prefix)]) != "prefix" {
			t.Fatalf("%q: dst's bytes changed: %q", s, got[:len(prefix)])
		}
		if string(got[len(prefix):]) != string(want) {
			t.Fatalf("%q: got %s, want %s", s, got[len(prefix):], want)
		}
	})
}
