#!/usr/bin/env bash
# scripts/protoclients/install.sh — install the MCP TypeScript SDK and the A2A JS SDK that
# mcp.mjs and a2a.mjs need (package-lock.json, exactly) into a cache outside the
# repository, and print the node_modules directory on stdout.
#
# The protocol wire tests (cmd/loom-eval/protocols_test.go) run this, then
#   node mcp.mjs / a2a.mjs from a folder whose node_modules is the printed dir
# so CI, which has node and npm, proves the wire with independent clients.
#
# The cache is $LOOMWORK_CACHE/protoclients/<sha256 of package-lock.json>
# (LOOMWORK_CACHE defaults to $HOME/.cache/loomwork): a changed lock file
# installs afresh, an unchanged one costs nothing. The install goes to a
# temporary directory renamed into place, so concurrent runs never see a
# half-installed tree. Progress goes to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${LOOMWORK_CACHE:-$HOME/.cache/loomwork}"

log() { printf 'protoclients/install.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v node >/dev/null || die "node is needed (apt-get install nodejs npm)"
command -v npm >/dev/null || die "npm is needed (apt-get install npm)"

sum="$(sha256sum "$HERE/package-lock.json" | cut -c1-16)"
dir="$CACHE/protoclients/$sum"
if [ -f "$dir/.installed" ]; then
	printf '%s\n' "$dir/node_modules"
	exit 0
fi
mkdir -p "$CACHE/protoclients"
tmp="$(mktemp -d "$CACHE/protoclients/.install.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cp "$HERE/package.json" "$HERE/package-lock.json" "$tmp/"
log "npm ci into $dir ($(node --version), npm $(npm --version))"
(cd "$tmp" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error) >&2 ||
	die "npm ci in $tmp failed"
touch "$tmp/.installed"
# Another run may have finished first: keep its tree, drop ours.
if ! mv -T "$tmp" "$dir" 2>/dev/null; then
	[ -f "$dir/.installed" ] || die "could not move $tmp to $dir"
fi
printf '%s\n' "$dir/node_modules"
