#!/usr/bin/env bash
# Committed evaluation baselines of the two reference agents.
#
#   scripts/baselines.sh record   regenerate baselines/ from source: cases from the
#                                 judged set's gold queries and the coding suite's
#                                 tasks (hidden tests in baselines/graders), journals
#                                 recorded with the scripted policies (3 trials per
#                                 case, logical journal clock: byte-identical on every
#                                 machine), the baseline trials with their graders'
#                                 verdicts (loom-eval grade), the score reports, and the
#                                 CI recipe's rollups.jsonl, rerank.json and judge.jsonl
#                                 (loom-eval ci --record).
#   scripts/baselines.sh check    what CI runs: `loom-eval ci` (docs/scoring.md, "The CI
#                                 recipe"): strict replay of every committed journal (tools
#                                 re-executed: retrieval and the sandbox; no model key),
#                                 a fresh run of both scripted agents on the current code,
#                                 the gate of that run against the committed baseline, its
#                                 verdicts trial by trial, the committed baseline regraded,
#                                 the fresh traces' rollups and the reranker check.
#                                 Exit 1 on a divergence, a differing tool result, a
#                                 changed verdict, rollup or reranker number, or a
#                                 regression (the report names the cases), 2 on bad input.
#                                 Extra arguments go to loom-eval ci (e.g. --format markdown).
#
# Needs: Go and root (the coding agent's sandbox). The research agent reads
# the judged set at $LOOMWORK_DATASET, by default the one shipped in
# datasets/mkdocs-material (embedded in loom-eval).
set -euo pipefail

mode=${1:-}
cd "$(dirname "$0")/.."
TRIALS=${TRIALS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=$tmp/loom-eval
go build -o "$bin" ./cmd/loom-eval

case "$mode" in
record)
  go run ./baselines/gencases --dataset "${LOOMWORK_DATASET:-datasets/mkdocs-material}" --out baselines/cases.jsonl
  rm -f baselines/journals/*.jsonl
  for agent in research coding; do
    "$bin" run --agent "$agent" --case baselines/cases.jsonl --tag "$agent" --trials "$TRIALS" \
      --deterministic --journal "$tmp/$agent.journal.db" --workspaces "$tmp/workspaces" \
      --journal-out "baselines/journals/$agent.jsonl" >"$tmp/$agent.run.txt"
    tail -n 1 "$tmp/$agent.run.txt"
  done
  "$bin" replay --strict --trials-out "$tmp/replayed.trials.jsonl" baselines/journals/*.jsonl | tail -n 1
  # The graders' verdicts are recorded on the baseline trials: the coding
  # cases' hidden tests run once here, in the sandbox, and score, gate and
  # the CI recipe reuse them (the recipe grades its fresh run itself).
  "$bin" grade "$tmp/replayed.trials.jsonl" --cases baselines/cases.jsonl --out baselines/baseline.trials.jsonl
  "$bin" score baselines/baseline.trials.jsonl --cases baselines/cases.jsonl --format json >baselines/report.json
  "$bin" score baselines/baseline.trials.jsonl --cases baselines/cases.jsonl --format markdown >baselines/report.md
  # The CI recipe's derived baselines, from the files above and the current
  # code: rollups.jsonl (a fresh run's traces through the collector and the
  # rollup, and baselines/traces/*.otlp.jsonl), rerank.json (the committed
  # reranker on the gold queries) and judge.jsonl (the judge graders'
  # verdicts on the baseline trials, scripted judge).
  "$bin" ci --record --baselines baselines
  du -sh baselines
  ;;
check)
  shift
  "$bin" ci --baselines baselines --policy baselines/policy.json "$@"
  ;;
*)
  echo "usage: scripts/baselines.sh record|check" >&2
  exit 2
  ;;
esac
