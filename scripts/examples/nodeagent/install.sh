#!/usr/bin/env bash
# scripts/examples/nodeagent/install.sh — install the OpenTelemetry JS SDK
# packages agent.js needs (package-lock.json, exactly) into a cache outside
# the repository ($LOOMWORK_CACHE/nodeagent, see scripts/npm-ci-cached.sh)
# and print the node_modules directory on stdout:
#   NODE_PATH=$(scripts/examples/nodeagent/install.sh) node scripts/examples/nodeagent/agent.js
# cmd/loom-eval's experiment example tests run it.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bash "$HERE/../../npm-ci-cached.sh" nodeagent "$HERE"
