#!/usr/bin/env bash
# scripts/jsagent/install.sh — install the OpenTelemetry JS SDK packages that
# send.js needs (package-lock.json, exactly) into a cache outside the
# repository ($LOOMWORK_CACHE/jsagent, see scripts/npm-ci-cached.sh), and
# print the node_modules directory on stdout.
#
# The agreement test (cmd/loom-eval/agreement_test.go) runs this, then
#   NODE_PATH=<printed dir> node scripts/jsagent/send.js ...
# so CI, which has node and npm, sends traces through the real JS SDK.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bash "$HERE/../npm-ci-cached.sh" jsagent "$HERE"
