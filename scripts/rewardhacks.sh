#!/usr/bin/env bash
# Regenerates the reward-hacking table in docs/reward-hacking.md: every
# cheat in baselines/rewardhacks/ graded against every coding case through
# the real code grader (two sandboxes; needs root), beside the reference
# solutions. The same test runs in `make test` on a subset of the cases that
# covers every kind of check, without writing the table; here (and in the
# long tier, LOOMWORK_LONG=1) it grades all 24.
set -euo pipefail
cd "$(dirname "$0")/.."
LOOMWORK_LONG=1 LOOMWORK_REWARDHACKS_TABLE=docs/reward-hacking.md go test -count=1 -run '^TestRewardHacksFailEveryCodingCase$' -v ./baselines/ | tail -n 30
