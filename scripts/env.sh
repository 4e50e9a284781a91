# Sourced by scripts/demo and scripts/test: one idempotent set-up for a fresh machine.
# Creates .venv and installs the package with its dev extras; re-installs only when pyproject.toml changes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
venv="$root/.venv"
if [ ! -x "$venv/bin/python" ]; then
    echo "signoff: creating $venv" >&2
    python3 -m venv "$venv"
fi
stamp="$venv/.signoff-installed"
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "signoff: installing Python dependencies into $venv" >&2
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet -e ".[dev]"
    echo "$want" > "$stamp"
fi
if ! command -v node >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "signoff: installing Node.js from Debian's packages" >&2
    apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
fi
export PATH="$venv/bin:$PATH"
