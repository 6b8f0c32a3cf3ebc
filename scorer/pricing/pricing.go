// Package pricing holds model price tables and turns token usage into US
// dollars.
//
// A Table ships embedded (prices.json, dated, with the provider pages it was
// taken from) and can be overridden by a file in the same format. Lookups are
// deliberately strict: a model name matches an entry exactly, or after one
// recognised snapshot suffix is removed (gpt-4o-2024-08-06 → gpt-4o,
// claude-sonnet-4-5-20250929 → claude-sonnet-4-5, gemini-2.0-flash-001 →
// gemini-2.0-flash). There is no prefix matching, so gpt-4o-mini can never be
// priced as gpt-4o, and an unknown model is reported as unknown rather than
// priced at zero.
package pricing

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/store"
)

//go:embed prices.json
var embedded []byte

// Rates are US dollars per million tokens. CacheRead and CacheWrite are nil
// when the provider publishes no separate rate; such tokens are then billed
// at the Input rate (which is what a provider without a cache discount does).
type Rates struct {
	Input      float64  `json:"input"`
	CacheRead  *float64 `json:"cache_read,omitempty"`
	CacheWrite *float64 `json:"cache_write,omitempty"`
	Output     float64  `json:"output"`
}

// LongContext is a second price tier that applies to a whole request when
// its prompt (uncached + cache read + cache write tokens) exceeds
// ThresholdInputTokens, as Anthropic's 1M-context Sonnet and Gemini Pro bill.
type LongContext struct {
	ThresholdInputTokens int64 `json:"threshold_input_tokens"`
	Rates
}

// Model is one priced model.
type Model struct {
	Provider    string       `json:"provider"`
	Model       string       `json:"model"`
	Aliases     []string     `json:"aliases,omitempty"`
	LongContext *LongContext `json:"long_context,omitempty"`
	Rates
}

// File is the on-disk format of a price table.
type File struct {
	AsOf     string   `json:"as_of"`
	Currency string   `json:"currency,omitempty"`
	Unit     string   `json:"unit,omitempty"`
	Note     string   `json:"note,omitempty"`
	Sources  []string `json:"sources,omitempty"`
	// Replace, in an override file, drops the built-in table instead of
	// merging over it.
	Replace bool    `json:"replace,omitempty"`
	Models  []Model `json:"models"`
}

// Table is a validated price table. The zero value prices nothing.
type Table struct {
	AsOf    string
	Sources []string
	byName  map[string]*Model
}

// Usage is one provider call's token counts, split the way providers bill
// them: Input is UNCACHED input only (cache reads and writes are separate).
// Reasoning tokens are part of Output and are not listed again.
type Usage struct {
	Input         int64
	CacheRead     int64
	CacheCreation int64
	Output        int64
}

// Split turns usage in the GenAI convention (input counts cache reads and
// writes too) into the billed parts, by store.SplitUsage, the rule every
// view of a trace applies (raw: the sender used Anthropic's convention,
// input excluding the cache counts).
func Split(input, cacheRead, cacheCreation, output int64) (u Usage, raw bool) {
	su, raw := store.SplitUsage(input, cacheRead, cacheCreation, output)
	return Usage{Input: su.Uncached, CacheRead: su.CacheRead, CacheCreation: su.CacheCreation, Output: su.Output}, raw
}

// Default returns the embedded table.
func Default() *Table {
	t, err := Parse(bytes.NewReader(embedded), "embedded prices.json")
	if err != nil {
		// The embedded file is tested; failing here is a build defect.
		panic(fmt.Sprintf("pricing: embedded table is invalid: %v", err))
	}
	return t
}

// Parse reads and validates a price table. name labels errors.
func Parse(r io.Reader, name string) (*Table, error) {
	f, err := decodeFile(r, name)
	if err != nil {
		return nil, err
	}
	t := &Table{AsOf: f.AsOf, Sources: f.Sources, byName: map[string]*Model{}}
	if err := t.add(f.Models, name, false); err != nil {
		return nil, err
	}
	return t, nil
}

func decodeFile(r io.Reader, name string) (*File, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("decode price table %s: %w", name, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decode price table %s: trailing data after the table", name)
	}
	if len(f.Models) == 0 {
		return nil, fmt.Errorf("decode price table %s: field \"models\": no models", name)
	}
	return &f, nil
}

// ParseOverride reads a price file from r and returns base with it applied:
// entries replace built-in ones of the same model name (and their aliases),
// unless the file sets "replace": true, in which case it is the whole table.
// name (the file's path, as the user gave it) labels errors; the caller
// opens the file.
func ParseOverride(base *Table, r io.Reader, name string) (*Table, error) {
	f, err := decodeFile(r, name)
	if err != nil {
		return nil, err
	}
	t := &Table{AsOf: f.AsOf, Sources: f.Sources, byName: map[string]*Model{}}
	if !f.Replace && base != nil {
		for k, v := range base.byName {
			t.byName[k] = v
		}
		if t.AsOf == "" {
			t.AsOf = base.AsOf
		}
		t.Sources = append(append([]string(nil), base.Sources...), f.Sources...)
	}
	if err := t.add(f.Models, name, true); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Table) add(models []Model, name string, override bool) error {
	seen := map[string]bool{}
	for i := range models {
		m := models[i]
		field := fmt.Sprintf("models[%d]", i)
		if err := m.validate(); err != nil {
			return fmt.Errorf("price table %s: %s: %w", name, field, err)
		}
		names := append([]string{m.Model}, m.Aliases...)
		if override {
			// An override entry takes over its names, dropping any
			// built-in entry that was reachable under them.
			for _, n := range names {
				if old, ok := t.byName[key(n)]; ok {
					for k, v := range t.byName {
						if v == old {
							delete(t.byName, k)
						}
					}
				}
			}
		}
		for _, n := range names {
			k := key(n)
			if seen[k] {
				return fmt.Errorf("price table %s: %s: model name %q is listed twice", name, field, n)
			}
			seen[k] = true
			t.byName[k] = &m
		}
	}
	return nil
}

func (m *Model) validate() error {
	if strings.TrimSpace(m.Model) == "" {
		return errors.New("field \"model\": empty")
	}
	if err := m.Rates.validate(""); err != nil {
		return err
	}
	if lc := m.LongContext; lc != nil {
		if lc.ThresholdInputTokens <= 0 {
			return errors.New("field \"long_context.threshold_input_tokens\": must be positive")
		}
		if err := lc.Rates.validate("long_context."); err != nil {
			return err
		}
	}
	return nil
}

func (r Rates) validate(prefix string) error {
	check := func(field string, v float64) error {
		if v < 0 || v != v {
			return fmt.Errorf("field %q: price must be a non-negative number, got %v", prefix+field, v)
		}
		return nil
	}
	if err := check("input", r.Input); err != nil {
		return err
	}
	if err := check("output", r.Output); err != nil {
		return err
	}
	if r.CacheRead != nil {
		if err := check("cache_read", *r.CacheRead); err != nil {
			return err
		}
	}
	if r.CacheWrite != nil {
		if err := check("cache_write", *r.CacheWrite); err != nil {
			return err
		}
	}
	return nil
}

func key(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

// Snapshot suffixes a model id may carry on top of its family name. Only
// one is removed, and only at the end of the name.
var snapshotSuffixes = []*regexp.Regexp{
	regexp.MustCompile(`-\d{4}-\d{2}-\d{2}$`), // OpenAI: gpt-4o-2024-08-06
	regexp.MustCompile(`-\d{8}$`),             // Anthropic: claude-sonnet-4-5-20250929
	regexp.MustCompile(`@\d{8}$`),             // Vertex AI Anthropic: claude-3-5-haiku@20241022
	regexp.MustCompile(`-\d{3}$`),             // Gemini stable versions: gemini-2.0-flash-001
	regexp.MustCompile(`-latest$`),            // moving aliases: claude-3-5-sonnet-latest
}

// Lookup finds the price entry for a model id as a provider reports it. It
// returns the entry and its canonical table name.
//
// Matching is exact (case-insensitive) on the id, after removing a router
// prefix such as "openai/" or Gemini's "models/"; failing that, exact on the
// id with one snapshot suffix removed. An entry for a specific snapshot (e.g.
// gpt-4o-2024-05-13, priced differently from gpt-4o) therefore wins over
// its family.
func (t *Table) Lookup(model string) (*Model, string, bool) {
	if t == nil || t.byName == nil {
		return nil, "", false
	}
	k := key(model)
	if m, ok := t.byName[k]; ok {
		return m, m.Model, true
	}
	if i := strings.LastIndexByte(k, '/'); i >= 0 {
		k = k[i+1:]
	}
	if k == "" {
		return nil, "", false
	}
	if m, ok := t.byName[k]; ok {
		return m, m.Model, true
	}
	for _, re := range snapshotSuffixes {
		if loc := re.FindStringIndex(k); loc != nil && loc[0] > 0 {
			base := k[:loc[0]]
			if m, ok := t.byName[base]; ok {
				return m, m.Model, true
			}
		}
	}
	return nil, "", false
}

// Fingerprint identifies the table's prices: equal tables give equal
// fingerprints, and a change to any name or rate gives another (a view
// keeping what it priced checks it before reusing it).
func (t *Table) Fingerprint() string {
	h := sha256.New()
	if t != nil {
		names := make([]string, 0, len(t.byName))
		for n := range t.byName {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			b, _ := json.Marshal(t.byName[n])
			h.Write([]byte(n))
			h.Write([]byte{0})
			h.Write(b)
			h.Write([]byte{0})
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// Models lists the table's canonical model names, sorted.
func (t *Table) Models() []string {
	seen := map[*Model]bool{}
	var out []string
	for _, m := range t.byName {
		if !seen[m] {
			seen[m] = true
			out = append(out, m.Model)
		}
	}
	sort.Strings(out)
	return out
}

// Cost prices one call. The long-context tier applies when the call's whole
// prompt exceeds its threshold.
func (m *Model) Cost(u Usage) float64 {
	return m.CostAt(u, m.LongContextApplies(u.Input+u.CacheRead+u.CacheCreation))
}

// LongContextApplies reports whether a call whose prompt (uncached, cache
// read and cache write tokens) is prompt tokens is billed at the
// long-context tier.
func (m *Model) LongContextApplies(prompt int64) bool {
	return m.LongContext != nil && prompt > m.LongContext.ThresholdInputTokens
}

// CostAt prices usage at one tier: the long-context rates when long (and
// the model has them), else the base rates. u may be the sum of several
// calls billed at that tier: the price is linear in each token count.
func (m *Model) CostAt(u Usage, long bool) float64 {
	r := m.Rates
	if lc := m.LongContext; lc != nil && long {
		r = lc.Rates
	}
	read, write := r.Input, r.Input
	if r.CacheRead != nil {
		read = *r.CacheRead
	}
	if r.CacheWrite != nil {
		write = *r.CacheWrite
	}
	// Sum per-million products; dividing once keeps small counts exact
	// enough for golden files.
	micro := float64(u.Input)*r.Input + float64(u.CacheRead)*read +
		float64(u.CacheCreation)*write + float64(u.Output)*r.Output
	return micro / 1e6
}
