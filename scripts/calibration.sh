#!/usr/bin/env bash
# Regenerate the calibration table in docs/scoring.md: the committed gate
# policy and the old one, gated side by side on seeded random agents
# (loom-eval calibrate; 200 pairs per design, seed 1, independent and correlated
# designs (ICC, grouped shocks); about 4 min on 2 shared cores with --bootstrap).
# Exit non-zero when the committed policy violates a requirement.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/loom-eval" ./cmd/loom-eval
status=0
"$tmp/loom-eval" calibrate --policy baselines/policy.json --against scorer/calibration/testdata/old-policy.json \
  --reps "${REPS:-200}" --seed 1 --bootstrap --format markdown >"$tmp/table.md" 2>"$tmp/progress.txt" || status=$?
if [ "$status" -gt 1 ]; then
  cat "$tmp/progress.txt" >&2
  exit "$status"
fi
python3 - "$tmp/table.md" <<'PY'
import re, sys
table = open(sys.argv[1]).read().strip()
doc = open("docs/scoring.md").read()
new, n = re.subn(r"(<!-- calibration:begin -->\n).*?(<!-- calibration:end -->)",
                 lambda m: m.group(1) + table + "\n" + m.group(2), doc, flags=re.S)
if n != 1:
    sys.exit("docs/scoring.md: calibration markers not found")
open("docs/scoring.md", "w").write(new)
PY
echo "docs/scoring.md: calibration table regenerated (loom-eval calibrate exit $status)"
exit "$status"
