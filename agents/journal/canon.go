package journal

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"unicode/utf8"
)

// Canonical returns the canonical form of a JSON value: no insignificant
// whitespace, object keys sorted by their UTF-8 bytes, strings escaped
// minimally (only '"', '\\' and control characters; no HTML escaping),
// numbers exactly as written. Two documents that differ only in spacing or
// key order have the same canonical form, so hashes over it are stable
// across encoders. Duplicate object keys are rejected: which one wins is
// encoder-dependent, and a hash must not depend on that.
func Canonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var buf bytes.Buffer
	if err := canonValue(dec, &buf); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			return nil, errors.New("canonicalize json: trailing data after the value")
		}
		return nil, fmt.Errorf("canonicalize json: %w", err)
	}
	return buf.Bytes(), nil
}

func canonValue(dec *json.Decoder, buf *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return errors.New("canonicalize json: empty input")
		}
		return fmt.Errorf("canonicalize json: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			type member struct {
				key string
				val []byte
			}
			var members []member
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return fmt.Errorf("canonicalize json: %w", err)
				}
				key, ok := kt.(string)
				if !ok {
					return fmt.Errorf("canonicalize json: object key is %T", kt)
				}
				if seen[key] {
					return fmt.Errorf("canonicalize json: duplicate object key %q", key)
				}
				seen[key] = true
				var vb bytes.Buffer
				if err := canonValue(dec, &vb); err != nil {
					return err
				}
				members = append(members, member{key, vb.Bytes()})
			}
			if _, err := dec.Token(); err != nil { // '}'
				return fmt.Errorf("canonicalize json: %w", err)
			}
			sort.Slice(members, func(i, j int) bool { return members[i].key < members[j].key })
			buf.WriteByte('{')
			for i, m := range members {
				if i > 0 {
					buf.WriteByte(',')
				}
				writeString(buf, m.key)
				buf.WriteByte(':')
				buf.Write(m.val)
			}
			buf.WriteByte('}')
		case '[':
			buf.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					buf.WriteByte(',')
				}
				if err := canonValue(dec, buf); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil { // ']'
				return fmt.Errorf("canonicalize json: %w", err)
			}
			buf.WriteByte(']')
		default:
			return fmt.Errorf("canonicalize json: unexpected %q", t)
		}
	case string:
		writeString(buf, t)
	case json.Number:
		buf.WriteString(t.String())
	case bool:
		buf.WriteString(strconv.FormatBool(t))
	case nil:
		buf.WriteString("null")
	default:
		return fmt.Errorf("canonicalize json: unexpected token %T", tok)
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// writeString writes s as a JSON string with the minimal escapes the
// canonical form allows. Invalid UTF-8 cannot reach here: the decoder has
// already replaced it with U+FFFD.
func writeString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x80 {
			r, size := utf8.DecodeRuneInString(s[i:])
			buf.WriteRune(r)
			i += size
			continue
		}
		switch {
		case c == '"':
			buf.WriteString(`\"`)
		case c == '\\':
			buf.WriteString(`\\`)
		case c == '\n':
			buf.WriteString(`\n`)
		case c == '\r':
			buf.WriteString(`\r`)
		case c == '\t':
			buf.WriteString(`\t`)
		case c == '\b':
			buf.WriteString(`\b`)
		case c == '\f':
			buf.WriteString(`\f`)
		case c < 0x20:
			buf.WriteString(`\u00`)
			buf.WriteByte(hexDigits[c>>4])
			buf.WriteByte(hexDigits[c&0xf])
		default:
			buf.WriteByte(c)
		}
		i++
	}
	buf.WriteByte('"')
}

// HashJSON returns "sha256:" and the hex SHA-256 of raw's canonical form.
// It is the argument hash recorded on tool calls and effects.
func HashJSON(raw []byte) (string, error) {
	c, err := Canonical(raw)
	if err != nil {
		return "", err
	}
	return sumHex(c), nil
}

// HashValue marshals v and returns HashJSON of it.
func HashValue(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("hash value: %w", err)
	}
	return HashJSON(raw)
}

func sumHex(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// IdempotencyKey derives the key a side-effecting tool call is known by. It
// depends only on durable data — the run id, the step, the model-assigned
// call id and the canonical JSON of the arguments — so the process that
// resumes a run after a crash derives the same key as the one that crashed,
// and a receiver that has seen the key can recognise the call as a repeat.
// It is never derived from a clock or a random source.
func IdempotencyKey(runID string, step int, callID string, args json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	ca, err := Canonical(args)
	if err != nil {
		return "", fmt.Errorf("derive idempotency key: arguments: %w", err)
	}
	var buf bytes.Buffer
	buf.WriteString(`["loomwork.idempotency/1",`)
	writeString(&buf, runID)
	buf.WriteByte(',')
	buf.WriteString(strconv.Itoa(step))
	buf.WriteByte(',')
	writeString(&buf, callID)
	buf.WriteByte(',')
	buf.Write(ca)
	buf.WriteByte(']')
	sum := sha256.Sum256(buf.Bytes())
	return "lwk1-" + hex.EncodeToString(sum[:]), nil
}
