package openai

import (
	"bytes"
	"testing"

	"github.com/loomwork/loomwork/agents/gateway/providertest"
)

func BenchmarkDecodeStream(b *testing.B) {
	body := []byte(providertest.OpenAIStream(seedAnswers()[1], 0).Body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeStream(bytes.NewReader(body)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeResponse(b *testing.B) {
	body := []byte(providertest.OpenAICompletion(seedAnswers()[1]).Body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeResponse(body); err != nil {
			b.Fatal(err)
		}
	}
}
