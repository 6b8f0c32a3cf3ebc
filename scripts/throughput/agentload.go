package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"
)

// agentLoad is the default load: agent traffic whose content varies the
// way real traffic does. Twelve services (support bot, code assistant,
// finance analyst, …) in three instrumentation styles (the GenAI semantic
// conventions, OpenLLMetry's keys, OpenInference's keys) record agent runs
// of one to 25 model calls with their tool calls, HTTP and SQL children,
// retrievals and sub-agents; messages are prose of varied length, tool
// arguments and results are JSON with varied values, ids are random, a
// quarter of spans carry rare keys from a long tail of 600, failures carry
// exception events with stack traces. It is written for this harness and
// shares no code with Loomwork's own generators (collector/agenttrace,
// store/storetest) or with pdata.
//
// Generating and marshaling that per request would cost the client more
// CPU than the processes it measures, so a pool of traces is generated
// once (seeded, in parallel) and each request is composed from randomly
// chosen pool traces of one service replica, with fresh trace ids, span
// ids XORed with a fresh mask (parents and links follow) and times moved
// to just before the request: every span of every request is new, and
// the same pool trace seldom lands near a copy of itself in either
// store's sort order (see docs/throughput.md).
type agentLoad struct {
	seed         uint64
	requestSpans int
	services     []*service
	weights      []int // cumulative service weights
	scopeMsgs    [][][]byte
	pool         [][]poolTrace // by service
	poolSpans    int
	poolBytes    int
	poolTraces   int
}

// poolTrace is one generated trace, encoded by scope.
type poolTrace struct {
	parts []tracePart
	spans int
	dur   int64
}

// makeAgentLoad generates at least poolSpans spans of traces from seed.
// The pool depends on seed and poolSpans only (not on GOMAXPROCS).
func makeAgentLoad(seed uint64, poolSpans, requestSpans int) (*agentLoad, error) {
	if poolSpans < 1 || requestSpans < 1 {
		return nil, fmt.Errorf("agent load: pool of %d spans, requests of %d: want both ≥ 1", poolSpans, requestSpans)
	}
	l := &agentLoad{seed: seed, requestSpans: requestSpans, services: makeServices(seed)}
	tail := longTailKeys(seed)
	total := 0
	for _, s := range l.services {
		total += s.weight
		l.weights = append(l.weights, total)
		var msgs [][]byte
		for _, sc := range s.scopes {
			var m []byte
			m = appendStringField(m, 1, sc.name)
			m = appendStringField(m, 2, sc.version)
			m = appendAttributes(m, 3, sc.attrs)
			msgs = append(msgs, appendLenField(nil, 1, m))
		}
		l.scopeMsgs = append(l.scopeMsgs, msgs)
	}
	l.pool = make([][]poolTrace, len(l.services))
	const chunk = 512
	workers := runtime.GOMAXPROCS(0)
	for next := 0; l.poolSpans < poolSpans; next += chunk {
		type made struct {
			svc int
			t   poolTrace
		}
		out := make([]made, chunk)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := w; i < chunk; i += workers {
					idx := uint64(next + i)
					r := rand.New(rand.NewPCG(seed^0x5eed, idx))
					svc := l.pickService(r)
					spans := genTrace(r, l.services[svc], tail)
					out[i] = made{svc, encodeTrace(spans, len(l.services[svc].scopes))}
				}
			})
		}
		wg.Wait()
		for _, m := range out {
			l.pool[m.svc] = append(l.pool[m.svc], m.t)
			l.poolSpans += m.t.spans
			l.poolTraces++
			for _, p := range m.t.parts {
				l.poolBytes += len(p.data)
			}
		}
	}
	for i, p := range l.pool {
		if len(p) == 0 {
			return nil, fmt.Errorf("agent load: a pool of %d spans has no trace of service %s; use a larger pool", poolSpans, l.services[i].name)
		}
	}
	return l, nil
}

func (l *agentLoad) pickService(r *rand.Rand) int {
	x := r.IntN(l.weights[len(l.weights)-1])
	for i, w := range l.weights {
		if x < w {
			return i
		}
	}
	return len(l.weights) - 1
}

// encodeTrace encodes a trace's spans grouped by scope.
func encodeTrace(spans []genSpan, scopes int) poolTrace {
	parts := make([]tracePart, scopes)
	t := poolTrace{spans: len(spans)}
	for i := range spans {
		sp := &spans[i]
		parts[sp.scope].scope = sp.scope
		parts[sp.scope].encodeSpan(sp, 0)
		t.dur = max(t.dur, sp.end)
	}
	for i := range parts {
		if parts[i].spans > 0 {
			parts[i].scope = i
			t.parts = append(t.parts, parts[i])
		}
	}
	return t
}

// placement is one pool trace's place in a request: its fresh identity.
type placement struct {
	t     *poolTrace
	trace [16]byte
	mask  [8]byte
	delta uint64
}

// request composes request k into buf (one ResourceSpans of a service
// replica, one ScopeSpans per scope used) and returns it with its span
// count. The choice of traces and the new ids depend on k and the seed
// only; the times on now.
func (l *agentLoad) request(buf []byte, k uint64, now time.Time, scratch []placement) ([]byte, int, []placement) {
	r := rand.New(rand.NewPCG(l.seed^0x4e9, k))
	svc := l.pickService(r)
	s := l.services[svc]
	res := s.resources[r.IntN(len(s.resources))]
	pool := l.pool[svc]
	chosen := scratch[:0]
	spans := 0
	for spans < l.requestSpans {
		t := &pool[r.IntN(len(pool))]
		pl := placement{t: t}
		for pl.trace == ([16]byte{}) {
			binary.LittleEndian.PutUint64(pl.trace[:8], r.Uint64())
			binary.LittleEndian.PutUint64(pl.trace[8:], r.Uint64())
		}
		binary.LittleEndian.PutUint64(pl.mask[:], r.Uint64())
		// Exported up to 2 s after the trace ended.
		end := now.Add(-time.Duration(r.Int64N(int64(2 * time.Second)))).UnixNano()
		pl.delta = uint64(end - t.dur)
		chosen = append(chosen, pl)
		spans += t.spans
	}
	scopes := l.scopeMsgs[svc]
	sizes := make([]int, len(scopes))
	for _, pl := range chosen {
		for _, p := range pl.t.parts {
			sizes[p.scope] += len(p.data)
		}
	}
	rs := 0
	rs += 1 + varintLen(len(res)) + len(res)
	for sc, n := range sizes {
		if n > 0 {
			body := len(scopes[sc]) + n
			rs += 1 + varintLen(body) + body
		}
	}
	buf = buf[:0]
	buf = appendTag(buf, 1, wtLen)
	buf = appendVarint(buf, uint64(rs))
	buf = appendLenField(buf, 1, res)
	for sc, n := range sizes {
		if n == 0 {
			continue
		}
		buf = appendTag(buf, 2, wtLen)
		buf = appendVarint(buf, uint64(len(scopes[sc])+n))
		buf = append(buf, scopes[sc]...)
		for i := range chosen {
			pl := &chosen[i]
			for _, p := range pl.t.parts {
				if p.scope != sc {
					continue
				}
				at := len(buf)
				buf = append(buf, p.data...)
				pl.patch(buf[at:], &p)
			}
		}
	}
	return buf, spans, chosen
}

// patch gives the copied part its placement's trace id, span ids and
// times.
func (pl *placement) patch(b []byte, p *tracePart) {
	for _, at := range p.traceAt {
		copy(b[at:at+16], pl.trace[:])
	}
	for _, at := range p.spanAt {
		for i := range 8 {
			b[int(at)+i] ^= pl.mask[i]
		}
		if [8]byte(b[at:at+8]) == ([8]byte{}) { // 2⁻⁶⁴: keep the id valid
			b[at] = 1
		}
	}
	for _, at := range p.timeAt {
		v := binary.LittleEndian.Uint64(b[at:])
		binary.LittleEndian.PutUint64(b[at:], v+pl.delta)
	}
}

func varintLen(n int) int { return len(binary.AppendUvarint(nil, uint64(n))) }

// loadInfo describes a run's load in the report.
type loadInfo struct {
	Name         string  `json:"name"`
	RequestSpans int     `json:"request_spans"` // asked for; agent requests hold whole traces, so a little more
	Requests     int     `json:"distinct_requests,omitempty"`
	RequestBytes int     `json:"request_bytes"` // templated: each; agent: mean of a sample
	MeanSpans    float64 `json:"mean_request_spans,omitempty"`
	PoolTraces   int     `json:"pool_traces,omitempty"`
	PoolSpans    int     `json:"pool_spans,omitempty"`
	PoolBytes    int     `json:"pool_bytes,omitempty"`
	// Spans per trace in the pool: median, 90th percentile, maximum.
	TraceSpansP50 int `json:"trace_spans_p50,omitempty"`
	TraceSpansP90 int `json:"trace_spans_p90,omitempty"`
	TraceSpansMax int `json:"trace_spans_max,omitempty"`
}

func (l *agentLoad) info() loadInfo {
	in := loadInfo{Name: "agent", RequestSpans: l.requestSpans, PoolTraces: l.poolTraces, PoolSpans: l.poolSpans, PoolBytes: l.poolBytes}
	var sizes []int
	for _, p := range l.pool {
		for _, t := range p {
			sizes = append(sizes, t.spans)
		}
	}
	slices.Sort(sizes)
	in.TraceSpansP50, in.TraceSpansP90, in.TraceSpansMax = sizes[len(sizes)/2], sizes[len(sizes)*9/10], sizes[len(sizes)-1]
	const sample = 64
	var buf []byte
	var scratch []placement
	bytes, spans := 0, 0
	now := time.Now()
	for k := range uint64(sample) {
		var n int
		buf, n, scratch = l.request(buf, k, now, scratch)
		bytes += len(buf)
		spans += n
	}
	in.RequestBytes = bytes / sample
	in.MeanSpans = float64(spans) / sample
	return in
}
