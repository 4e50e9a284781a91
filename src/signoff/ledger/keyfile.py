"""The audit key file: the secret that keys the audit chain and proves decisions, kept outside the database.

`SIGNOFF_AUDIT_KEY_FILE` names it. Without it, every process of this user shares one in the user's data
directory (`$XDG_DATA_HOME/signoff/audit.key`, else `~/.local/share/signoff/audit.key`), made on first use
with mode 0600. Every process that writes or checks one ledger needs the same file: give the workers of a
shared ledger, and the machine that verifies it, a copy.

The file holds one key per line (hex, 32 bytes), `#` comments allowed. The first line is the key new
entries and decisions are made with; the lines after it are older keys, kept so that what they made still
verifies. To rotate: put a new key on the first line, keep the old ones below it.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from signoff.core.audit import AuditKey, Keyring
from signoff.core.errors import LedgerUnavailable

ENV_VAR = "SIGNOFF_AUDIT_KEY_FILE"


@dataclass(frozen=True)
class KeyFile:
    keyring: Keyring
    path: Path
    created: bool
    """Whether this call made the file (a new key): the caller says where it is."""


def default_path() -> Path:
    if named := os.environ.get(ENV_VAR):
        return Path(named)
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "signoff" / "audit.key"


def checkpoints_folder() -> Path:
    """Where servers append each ledger's signed audit checkpoints unless told otherwise (see
    `ledger.evidence.default_checkpoints`): beside the key, whose folder is already kept apart from the
    database, and where `audit verify` on the machine that holds the key finds them."""
    return default_path().with_name("checkpoints")


def load_keyring(path: Path | None = None) -> KeyFile:
    """The keyring in `path` (default: see the module), made with a new key if there is no such file.
    Raises `LedgerUnavailable` naming the file for one that can't be read or holds no key."""
    path = path or default_path()
    keys, created = load_keys(path, "audit key", "keep it apart from the ledger's database")
    audit = [AuditKey(key) for key in keys]
    return KeyFile(Keyring(audit[0], tuple(audit[1:])), path, created)


def load_keys(path: Path, what: str, advice: str, *, shortest: int = 0) -> tuple[list[bytes], bool]:
    """The keys of a key file in this module's format, newest first, and whether this call made the file
    (with one new key, and `advice` in its comment). Raises `LedgerUnavailable` naming the file for one
    that can't be read, holds no key, or a key shorter than `shortest` bytes."""
    created = False
    if not path.exists():
        created = _create(path, f"# signoff {what}: {advice}\n{secrets.token_hex(32)}\n")
    try:
        lines = [line.strip() for line in path.read_text().splitlines()]
        keys = [bytes.fromhex(line) for line in lines if line and not line.startswith("#")]
    except (OSError, ValueError) as exc:
        raise LedgerUnavailable(f"cannot use the {what} file {path}: {exc}") from exc
    if not keys:
        raise LedgerUnavailable(f"the {what} file {path} holds no key")
    if any(len(key) < shortest for key in keys):
        raise LedgerUnavailable(f"the {what} file {path} holds a key shorter than {shortest} bytes")
    return keys, created


def _create(path: Path, text: str) -> bool:
    """Write a new key file, readable by its owner only, all at once: it appears complete or not at all,
    and of two processes making it at the same moment, one's file stands and both use it."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        draft = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(text)
        try:
            os.link(draft, path)
        except FileExistsError:
            return False
        finally:
            draft.unlink()
    except OSError as exc:
        raise LedgerUnavailable(f"cannot create the {path.name} key file {path}: {exc}") from exc
    return True
