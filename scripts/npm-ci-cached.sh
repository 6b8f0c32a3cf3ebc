#!/usr/bin/env bash
# scripts/npm-ci-cached.sh NAME DIR — install DIR/package-lock.json, exactly,
# into a cache outside the repository and print its node_modules directory
# on stdout. Used by scripts/jsagent/install.sh and
# scripts/protoclients/install.sh, whose tests then run node with it.
#
# The cache is $LOOMWORK_CACHE/NAME/<sha256 of package-lock.json>
# (LOOMWORK_CACHE defaults to $HOME/.cache/loomwork): a changed lock file
# installs afresh, an unchanged one costs nothing. The install goes to a
# temporary directory renamed into place, so concurrent runs never see a
# half-installed tree. Progress goes to stderr.
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: npm-ci-cached.sh NAME DIR" >&2; exit 2; }
NAME="$1"
HERE="$(cd "$2" && pwd)"
CACHE="${LOOMWORK_CACHE:-$HOME/.cache/loomwork}"

log() { printf '%s/install.sh: %s\n' "$NAME" "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v node >/dev/null || die "node is needed (apt-get install nodejs npm)"
command -v npm >/dev/null || die "npm is needed (apt-get install npm)"

sum="$(sha256sum "$HERE/package-lock.json" | cut -c1-16)"
dir="$CACHE/$NAME/$sum"
if [ -f "$dir/.installed" ]; then
	printf '%s\n' "$dir/node_modules"
	exit 0
fi
mkdir -p "$CACHE/$NAME"
tmp="$(mktemp -d "$CACHE/$NAME/.install.XXXXXX")"
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
