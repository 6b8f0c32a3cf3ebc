package anthropic

import (
	"bytes"
	"testing"

	"github.com/loomwork/loomwork/agents/gateway/providertest"
)

func BenchmarkDecodeStream(b *testing.B) {
	body := []byte(providertest.AnthropicStream(seedAnswers()[1], 0, 0, "").Body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeStream(bytes.NewReader(body)); err != nil {
			b.Fatal(err)
		}
	}
}
