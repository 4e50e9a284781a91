#!/usr/bin/env bash
# Installs the pinned Claude Code CLI (tests/claude_code/package-lock.json) into tests/claude_code/node_modules, for
# tests/test_claude_code.py. The package is a native binary per platform (an optional dependency, which its
# postinstall script copies over bin/claude.exe), so `npm ci` runs with scripts enabled and needs no Node 22.
# Idempotent: runs `npm ci` only when node_modules is missing or the lock changed since the last install.
# Quiet on success; on failure prints npm's output and exits non-zero.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
stamp="$here/node_modules/.signoff-install-stamp"

command -v npm >/dev/null || { echo "install.sh: npm is not on PATH" >&2; exit 1; }

lock="${TMPDIR:-/tmp}/signoff-claude-code-install-$(printf '%s' "$here" | sha256sum | cut -c1-16).lock"
exec 9>"$lock"
flock 9

want="$(cat "$here/package-lock.json" "$here/package.json" | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && "$here/node_modules/.bin/claude" --version >/dev/null 2>&1; then
  exit 0
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# Claude Code declares engines.node >= 22 for its JavaScript wrapper, which the native binary does not use.
if ! (cd "$here" && npm ci --no-audit --no-fund --engine-strict=false --ignore-scripts=false --loglevel=error \
        >"$log" 2>&1); then
  echo "install.sh: npm ci failed in $here:" >&2
  cat "$log" >&2
  exit 1
fi
if ! "$here/node_modules/.bin/claude" --version >"$log" 2>&1; then
  echo "install.sh: the installed claude does not run:" >&2
  cat "$log" >&2
  exit 1
fi
printf '%s\n' "$want" >"$stamp"
