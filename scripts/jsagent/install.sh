#!/usr/bin/env bash
# scripts/jsagent/install.sh — install the OpenTelemetry JS SDK packages that
# send.js needs (package-lock.json, exactly) into a cache outside the
# repository, and print the node_modules directory on stdout.
#
# The agreement test (cmd/loom-eval/agreement_test.go) runs this, then
#   NODE_PATH=<printed dir> node scripts/jsagent/send.js ...
# so CI, which has node and npm, sends traces through the real JS SDK.
#
# The cache is $LOOMWORK_CACHE/jsagent/<sha256 of package-lock.json>
# (LOOMWORK_CACHE defaults to $HOME/.cache/loomwork): a changed lock file
# installs afresh, an unchanged one costs nothing. The install goes to a
# temporary directory renamed into place, so concurrent runs never see a
# half-installed tree. Progress goes to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${LOOMWORK_CACHE:-$HOME/.cache/loomwork}"

log() { printf 'jsagent/install.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v node >/dev/null || die "node is needed (apt-get install nodejs npm)"
command -v npm >/dev/null || die "npm is needed (apt-get install npm)"

sum="$(sha256sum "$HERE/package-lock.json" | cut -c1-16)"
dir="$CACHE/jsagent/$sum"
if [ -f "$dir/.installed" ]; then
	printf '%s\n' "$dir/node_modules"
	exit 0
fi
mkdir -p "$CACHE/jsagent"
tmp="$(mktemp -d "$CACHE/jsagent/.install.XXXXXX")"
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
