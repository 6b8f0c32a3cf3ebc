package rollup

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// Analyze over a trace's bones in any order is what Compute analysed: the
// windowed rollup (FromAnalysis over Analyze and the stored summary) is
// Compute's, field for field, however the bones arrive.
func TestAnalyzeOfShuffledBonesGivesComputesRollup(t *testing.T) {
	prices := pricing.Default()
	for seed := range uint64(6) {
		spans := storetest.AwkwardTrace(fmt.Sprintf("%031x1", seed+1), seed)
		spans = append(spans, spans[2], spans[5]) // copies, as a file may hold them
		want := Compute(spans, prices)
		bones := make([]store.Bone, len(spans))
		for i := range spans {
			bones[i] = store.BoneOf(&spans[i])
		}
		rand.New(rand.NewPCG(seed, 9)).Shuffle(len(bones), func(i, j int) { bones[i], bones[j] = bones[j], bones[i] })
		got := FromAnalysis(Analyze(bones), store.Summarize(spans), prices)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: FromAnalysis(Analyze(shuffled bones)) differs from Compute:\ngot  %+v\nwant %+v", seed, got, want)
		}
	}
}

// A bounded rollup keeps every figure of the full one and its lists' most
// telling entries, and says what it left out.
func TestBoundedKeepsTheFiguresAndTheLongestPathEntries(t *testing.T) {
	spans := storetest.AwkwardTrace("0000000000000000000000000000abc1", 3)
	full := Compute(spans, pricing.Default())
	if len(full.CriticalPath) < 4 || len(full.Calls) < 4 {
		t.Fatalf("fixture too small: %d path entries, %d calls", len(full.CriticalPath), len(full.Calls))
	}
	b := full.Bounded(3, 2)
	if b.CostUSD != full.CostUSD && (b.CostUSD == nil || *b.CostUSD != *full.CostUSD) || b.KnownCostUSD != full.KnownCostUSD ||
		b.TokensIn != full.TokensIn || b.CriticalPathMS != full.CriticalPathMS || !reflect.DeepEqual(b.Models, full.Models) {
		t.Fatalf("bounded rollup changed a figure:\n%+v\n%+v", b, full)
	}
	if len(b.CriticalPath) != 3 || b.CriticalPathEntries != len(full.CriticalPath) || len(b.Calls) != 2 || b.CallCount != len(full.Calls) {
		t.Fatalf("bounded lists: %d path entries (of %d), %d calls (of %d)", len(b.CriticalPath), b.CriticalPathEntries, len(b.Calls), b.CallCount)
	}
	min := b.CriticalPath[0].SelfMS
	for _, e := range b.CriticalPath {
		min = minF(min, e.SelfMS)
	}
	longer := 0
	for _, e := range full.CriticalPath {
		if e.SelfMS > min {
			longer++
		}
	}
	if longer > 3 {
		t.Errorf("the bounded path left out an entry longer than one it kept")
	}
	if b.CostUnknownText() != full.CostUnknownText() {
		t.Errorf("unknown-cost text %q, want the full rollup's %q", b.CostUnknownText(), full.CostUnknownText())
	}
	if len(b.Notes) != len(full.Notes)+2 {
		t.Errorf("notes %q: want the full rollup's and two saying what was cut", b.Notes)
	}
	if same := full.Bounded(len(full.CriticalPath), len(full.Calls)); !reflect.DeepEqual(same, full) {
		t.Errorf("a rollup within the bounds changed")
	}
}

func minF(a, b float64) float64 {
	if b < a {
		return b
	}
	return a
}
