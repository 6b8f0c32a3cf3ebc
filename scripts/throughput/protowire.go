package main

import (
	"encoding/binary"
	"math"
)

// A minimal OTLP protobuf writer for the agent load, written for this
// harness and independent of the Collector's pdata and of Loomwork's
// decoder: the load must not share code with what it measures. Field
// numbers are those of opentelemetry/proto (trace/v1, common/v1,
// resource/v1, collector/trace/v1); the tests decode what it writes with
// pdata.

const (
	wtVarint = 0
	wtI64    = 1
	wtLen    = 2
	wtI32    = 5
)

func appendVarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func appendTag(b []byte, field, wt int) []byte { return appendVarint(b, uint64(field)<<3|uint64(wt)) }

func appendLenField(b []byte, field int, data []byte) []byte {
	b = appendTag(b, field, wtLen)
	b = appendVarint(b, uint64(len(data)))
	return append(b, data...)
}

func appendStringField(b []byte, field int, s string) []byte {
	b = appendTag(b, field, wtLen)
	b = appendVarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendVarintField(b []byte, field int, v uint64) []byte {
	b = appendTag(b, field, wtVarint)
	return appendVarint(b, v)
}

// appendFixed64Field appends the field and returns where its 8-byte value
// starts, for patching.
func appendFixed64Field(b []byte, field int, v uint64) ([]byte, int) {
	b = appendTag(b, field, wtI64)
	at := len(b)
	return binary.LittleEndian.AppendUint64(b, v), at
}

func appendFixed32Field(b []byte, field int, v uint32) []byte {
	b = appendTag(b, field, wtI32)
	return binary.LittleEndian.AppendUint32(b, v)
}

// appendBytesFieldAt appends a bytes field and returns where its value
// starts.
func appendBytesFieldAt(b []byte, field int, v []byte) ([]byte, int) {
	b = appendTag(b, field, wtLen)
	b = appendVarint(b, uint64(len(v)))
	at := len(b)
	return append(b, v...), at
}

// kv is one attribute: the value is a string, int64, int, float64, bool,
// []string, []int64 or []kv (a key-value list).
type kv struct {
	k string
	v any
}

// appendAnyValue appends an AnyValue message body.
func appendAnyValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case string:
		return appendStringField(b, 1, x)
	case bool:
		u := uint64(0)
		if x {
			u = 1
		}
		return appendVarintField(b, 2, u)
	case int:
		return appendVarintField(b, 3, uint64(int64(x)))
	case int64:
		return appendVarintField(b, 3, uint64(x))
	case float64:
		b, _ = appendFixed64Field(b, 4, math.Float64bits(x))
		return b
	case []string:
		var arr []byte
		for _, s := range x {
			arr = appendLenField(arr, 1, appendStringField(nil, 1, s))
		}
		return appendLenField(b, 5, arr)
	case []int64:
		var arr []byte
		for _, n := range x {
			arr = appendLenField(arr, 1, appendVarintField(nil, 3, uint64(n)))
		}
		return appendLenField(b, 5, arr)
	case []kv:
		var list []byte
		for _, e := range x {
			list = appendLenField(list, 1, appendKeyValue(nil, e))
		}
		return appendLenField(b, 6, list)
	default:
		panic("agent load: unsupported attribute value type") // a bug in this file, not input
	}
}

// appendKeyValue appends a KeyValue message body.
func appendKeyValue(b []byte, e kv) []byte {
	b = appendStringField(b, 1, e.k)
	return appendLenField(b, 2, appendAnyValue(nil, e.v))
}

func appendAttributes(b []byte, field int, attrs []kv) []byte {
	for _, e := range attrs {
		b = appendLenField(b, field, appendKeyValue(nil, e))
	}
	return b
}
