"""The keys that seal an MCP round's `requestState`: a file every gateway worker and every restart reads,
so a round begun on one worker is answered on another, and one begun before a restart after it.

The file is the audit key file's format (`signoff.ledger.keyfile`): one key per line, hex of at least 32
random bytes, the newest first, which seals; the older ones still open what they sealed. Made with mode
0600 and one new key when missing.
"""

from __future__ import annotations

from pathlib import Path

from signoff.ledger.keyfile import default_path, load_keys


def default_state_keys() -> Path:
    """Beside the audit key file."""
    return default_path().with_name("mcp-state.keys")


def state_keys(path: Path | None = None) -> tuple[list[bytes], bool]:
    """The keys, newest first, and whether this call made the file. Raises `LedgerUnavailable` naming the
    file for one that can't be read, holds no key, or a key shorter than 32 bytes."""
    advice = "every worker of this MCP gateway needs the same file; newest key first"
    return load_keys(path or default_state_keys(), "MCP state key", advice, shortest=32)
