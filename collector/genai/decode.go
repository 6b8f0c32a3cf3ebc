package genai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loomwork/loomwork/store"
)

// DecodeJSON decodes one OTLP/JSON document (an ExportTraceServiceRequest or
// TracesData object, which share a shape) and maps it.
func DecodeJSON(b []byte, opts Options) ([]store.Span, []Rejection, error) {
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalJSON(b); err != nil {
		return nil, nil, fmt.Errorf("decode OTLP/JSON: %w", err)
	}
	spans, rej := MapTraces(req.Traces(), opts)
	return spans, rej, nil
}

// ReadJSON reads OTLP/JSON from r: one document, or a sequence of documents
// (JSON Lines, as the Collector's file exporter writes one TracesData object
// per line). name is used in errors, which give the line of the document
// that failed.
func ReadJSON(r io.Reader, name string, opts Options) ([]store.Span, []Rejection, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, fmt.Errorf("read %s: file is empty", name)
	}
	var (
		spans []store.Span
		rej   []Rejection
	)
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		start := skipSpace(data, int(dec.InputOffset()))
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			off := start
			var se *json.SyntaxError
			if errors.As(err, &se) {
				off = int(se.Offset)
			}
			return nil, nil, fmt.Errorf("%s:%d: invalid JSON: %w", name, lineAt(data, off), err)
		}
		s, rj, err := DecodeJSON(raw, opts)
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%d: %w", name, lineAt(data, start), err)
		}
		spans = append(spans, s...)
		rej = append(rej, rj...)
	}
	return spans, rej, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// lineAt returns the 1-based line of byte offset off.
func lineAt(b []byte, off int) int {
	if off > len(b) {
		off = len(b)
	}
	return bytes.Count(b[:off], []byte("\n")) + 1
}
