"""`signoff principals` against real ledgers, and a revocation that two running workers honour at once."""

from __future__ import annotations

import os
import subprocess
from contextlib import ExitStack
from pathlib import Path

import httpx

from tests.conftest import SIGNOFF
from tests.servers import signoff_server

TOKEN = "bootstrap-" + "x" * 16


def signoff(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [SIGNOFF, *args, "--ledger", url], capture_output=True, text=True, timeout=60, env=env
    )


def added(url: str, name: str, *roles: str) -> str:
    """Add a principal; its token, which the command prints alone on the last line of stdout."""
    result = signoff(url, "principals", "add", name, *(f"--role={r}" for r in roles))
    assert result.returncode == 0, result.stderr
    token = result.stdout.splitlines()[-1]
    assert token.startswith("sop_") and token.strip() == token and " " not in token
    return token


def test_add_list_roles_revoke(shared: str) -> None:
    token = added(shared, "alice", "finance")
    assert token not in signoff(shared, "principals", "list").stdout
    listed = signoff(shared, "principals", "list").stdout
    assert "alice" in listed and "finance" in listed
    again = signoff(shared, "principals", "add", "alice")
    assert again.returncode == 1 and "exists already" in again.stderr and "Traceback" not in again.stderr
    bad = signoff(shared, "principals", "add", "Alice Smith")
    assert bad.returncode == 1 and "lower-case letters" in bad.stderr
    roles = signoff(shared, "principals", "roles", "alice", "--role", "finance", "--role", "ops")
    assert roles.returncode == 0 and "alice: finance, ops" in roles.stdout
    assert signoff(shared, "principals", "revoke", "alice").returncode == 0
    twice = signoff(shared, "principals", "revoke", "alice")
    assert twice.returncode == 1 and "already revoked" in twice.stderr
    assert "revoked" in signoff(shared, "principals", "list").stdout.lower()
    audit = signoff(shared, "audit", "list").stdout
    assert all(action in audit for action in ("register", "roles", "revoke"))


def test_a_revoked_token_is_refused_at_once_by_every_worker(shared: str, tmp_path: Path) -> None:
    """Two `signoff demo` processes on one ledger: the token works on both, and after `principals revoke`
    the very next request to either is a 401; nothing caches a token."""
    token = added(shared, "alice", "finance")
    args = ["demo", "--ledger", shared, "--redis-volatile"]  # the machine's Redis keeps nothing on disk
    with ExitStack() as stack:
        bases = [
            stack.enter_context(signoff_server(tmp_path, args, TOKEN, name=f"worker{i}", timeout=30))[0]
            for i in range(2)
        ]
        auth = {"authorization": f"Bearer {token}"}
        for base in bases:
            me = httpx.get(f"{base}/api/me", headers=auth, timeout=10)
            assert me.status_code == 200 and me.json()["roles"] == ["finance"]
        assert signoff(shared, "principals", "revoke", "alice").returncode == 0
        for base in bases:
            refused = httpx.get(f"{base}/api/approvals", headers=auth, timeout=10)
            assert refused.status_code == 401, refused.text
            assert refused.json()["error"]["message"] == "the token is unknown or revoked"


def test_link_and_unlink_a_principals_identities(shared: str) -> None:
    added(shared, "alice", "finance")
    added(shared, "bob")
    linked = signoff(
        shared, "principals", "link", "alice", "--email", "alice@example.com", "--slack", "U0ALICE"
    )
    assert linked.returncode == 0 and "alice: email alice@example.com, slack U0ALICE" in linked.stdout
    listed = signoff(shared, "principals", "list").stdout
    assert "alice@example.com" in listed and "U0ALICE" in listed
    taken = signoff(shared, "principals", "link", "bob", "--slack", "U0ALICE")
    assert (
        taken.returncode == 1
        and "linked to alice already" in taken.stderr
        and "Traceback" not in taken.stderr
    )
    bad = signoff(shared, "principals", "link", "bob", "--email", "bob")
    assert bad.returncode == 1 and "not an email address" in bad.stderr
    nothing = signoff(shared, "principals", "link", "bob")
    assert nothing.returncode == 2 and "--email" in nothing.stderr
    unlinked = signoff(shared, "principals", "unlink", "alice", "--slack")
    assert unlinked.returncode == 0 and "alice: email alice@example.com" in unlinked.stdout
    assert "U0ALICE" not in unlinked.stdout
    both = signoff(shared, "principals", "unlink", "alice")
    assert both.returncode == 0 and "alice: no linked identities" in both.stdout
    assert "link" in signoff(shared, "audit", "list").stdout
