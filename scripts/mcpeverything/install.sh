#!/usr/bin/env bash
# scripts/mcpeverything/install.sh — install the reference MCP server
# @modelcontextprotocol/server-everything (package-lock.json, exactly) into a
# cache outside the repository ($LOOMWORK_CACHE/mcpeverything, see
# scripts/npm-ci-cached.sh), and print the node_modules directory on stdout.
#
# cmd/loom-eval TestRunMCPServerEverythingSeesNoSecrets runs this, then
#   loom-eval run --mcp "everything=node <dir>/@modelcontextprotocol/server-everything/dist/index.js stdio"
# and has the model call its get-env tool: no secret of loom-eval's
# environment may appear in the output or the journal.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bash "$HERE/../npm-ci-cached.sh" mcpeverything "$HERE"
