# Loomwork — the two set-up commands are `make demo` and `make test`.
GO ?= go
BIN := bin/loom-eval

.PHONY: demo stop test check soak build install vet fmt-check templ-check fuzz bench bigdata throughput clickhouse-fetch cluster-test

build:
	$(GO) build -o $(BIN) ./cmd/loom-eval

# Put loom-eval on the PATH: $(go env GOPATH)/bin, or $GOBIN when set.
install:
	$(GO) install ./cmd/loom-eval

# Start `loom-eval serve` on the embedded store, send a realistic agent trace
# through OTLP, and print where to look. `make stop` stops the server.
demo: build
	./scripts/demo.sh

stop:
	./scripts/demo.sh stop

# The whole test suite: vet, gofmt, generated-code check, and `go test`
# (-race on every package whose own code is concurrent: scripts/racesplit)
# against the embedded store AND a real local ClickHouse 26.7 (fetched once
# into ~/.cache/loomwork and started on loopback for the run). CI runs this.
test:
	./scripts/test.sh

# The developer loop (about two minutes): gofmt and `go test -short ./...`,
# the pure and in-process tests; slow ones are left to make test.
check:
	./scripts/test.sh fast

# The long tier: every long scenario at full length (LOOMWORK_LONG=1: all
# outages, kills and cases), the sandbox suite three times, the ClickHouse
# cluster at full length. An hour or more; run it before a release.
soak:
	./scripts/test.sh soak

vet:
	$(GO) vet ./...

fuzz:
	./scripts/fuzz.sh

bench:
	./scripts/bench.sh

# Side by side: the OTel Collector + contrib clickhouseexporter (the peer)
# against `loom-eval serve --store clickhouse://…`, fresh ClickHouse per run
# (docs/throughput.md). The final comparison, on an idle machine:
#   make throughput THROUGHPUT_FLAGS="-lock /work/bench.lock -doc ../../docs/throughput.md"
# A quick check: THROUGHPUT_FLAGS="-duration 10s -rounds 2".
throughput:
	cd scripts/throughput && $(GO) run . $(THROUGHPUT_FLAGS)

# The big-data benchmark of issue 36 (docs/bench-bigdata.md), e.g.
# BIGDATA_FLAGS="-stores sqlite -runs 3".
bigdata:
	scripts/bigdata.sh $(BIGDATA_FLAGS)

clickhouse-fetch:
	./scripts/clickhouse.sh fetch

# The ClickHouse cluster tests at full length (docs/clickhouse.md, "A cluster
# on one machine"): 2 shards × 2 replicas of the local engine, the store's
# conformance suite on them, and two serve under load with a replica killed.
# `make test` runs the short variant (no conformance suite, half-length ingest).
cluster-test:
	./scripts/clickhouse.sh fetch
	LOOMWORK_CLUSTER_TEST=full $(GO) test -count=1 -timeout 30m -v -run 'TestCluster' ./store/clickhouse ./internal/reliability
