#!/usr/bin/env bash
# scripts/protoclients/install.sh — install the MCP TypeScript SDK and the A2A
# JS SDK that mcp.mjs and a2a.mjs need (package-lock.json, exactly) into a
# cache outside the repository ($LOOMWORK_CACHE/protoclients, see
# scripts/npm-ci-cached.sh), and print the node_modules directory on stdout.
#
# The protocol wire tests (cmd/loom-eval/protocols_test.go) run this, then
#   node mcp.mjs / a2a.mjs from a folder whose node_modules is the printed dir
# so CI, which has node and npm, proves the wire with independent clients.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bash "$HERE/../npm-ci-cached.sh" protoclients "$HERE"
