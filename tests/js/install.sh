#!/usr/bin/env bash
# Installs the pinned `ai` clients, playwright-core and the MCP TypeScript SDK (tests/js/package-lock.json) into
# tests/js/node_modules.
# Idempotent: runs `npm ci` only when node_modules is missing or package-lock.json changed since the last install.
# Quiet on success; on failure prints npm's output and exits non-zero.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
stamp="$here/node_modules/.signoff-install-stamp"

command -v node >/dev/null || { echo "install.sh: node is not on PATH" >&2; exit 1; }
command -v npm >/dev/null || { echo "install.sh: npm is not on PATH" >&2; exit 1; }

# Serialise concurrent installs (e.g. parallel pytest workers); the lock lives outside the repo.
lock="${TMPDIR:-/tmp}/signoff-js-install-$(printf '%s' "$here" | sha256sum | cut -c1-16).lock"
exec 9>"$lock"
flock 9

# The stamp holds a hash of the lock file and the node version, so a new lock or a new node re-installs.
want="$(cat "$here/package-lock.json" "$here/package.json" | sha256sum | cut -d' ' -f1) node-$(node --version)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# ai 7.x declares engines.node >=22 but runs on Node 20 for what we use; npm only warns unless engine-strict.
if ! (cd "$here" && npm ci --no-audit --no-fund --engine-strict=false --loglevel=error >"$log" 2>&1); then
  echo "install.sh: npm ci failed in $here:" >&2
  cat "$log" >&2
  exit 1
fi
printf '%s\n' "$want" >"$stamp"
