package gateway_test

import (
	"context"
	"testing"

	"github.com/loomwork/loomwork/agents/gateway"
)

// BenchmarkGatewayOverhead measures routing, budget reservation, accounting
// and span-less dispatch around an in-process model.
func BenchmarkGatewayOverhead(b *testing.B) {
	entry, _ := scriptedEntry("m", 0)
	entry.Prices = gateway.Prices{InputPerMTok: 1, OutputPerMTok: 1}
	gw, err := gateway.New(gateway.Config{Models: []gateway.ModelConfig{entry}, BudgetUSD: 1e9}, gateway.Options{})
	if err != nil {
		b.Fatal(err)
	}
	req := hello()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := gw.Complete(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
