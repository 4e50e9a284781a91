"""Proof of a decision: a MAC, made with the audit key when the decision is recorded, over what it decided.

The ledger's rows say an approval is approved; someone who can write the database can make them say so. A
decision's MAC covers the approval id, the digest of the call it lets run, the verdict, the principal (id,
roles, how it was authenticated), the time, and who asked and the rule's authority, so it can't be made
without the key, moved to another approval or call, or kept after the rule is loosened in the table. The
single-use claim (`approval.consume`) lets a call run only when its approving decision, and every approval
counted toward its quorum, verifies (`approval.unproven`). Grants carry a MAC the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from signoff.core.audit import AuditKey, Keyring

if TYPE_CHECKING:
    from signoff.core.approval import Approval
    from signoff.core.decision import Decision
    from signoff.core.grant import Grant


def _decision_body(approval: Approval, decision: Decision, digest: str, at: float) -> bytes:
    body = {
        "approval": approval.id,
        "digest": digest,
        "verdict": decision.verdict,
        "by": decision.by,
        "roles": list(decision.roles),
        "via": decision.via,
        "at": at,
        "requester": approval.requester,
        "authority": msgspec.to_builtins(approval.authority),
    }
    return msgspec.json.encode(body, order="sorted")


def prove_decision(key: AuditKey, approval: Approval, decision: Decision, digest: str, at: float) -> Decision:
    """`decision` with its MAC, for `approval` as it stands, letting the call with `digest` run."""
    mac = key.mac(_decision_body(approval, decision, digest, at))
    return msgspec.structs.replace(decision, mac=mac)


def decision_holds(keyring: Keyring, approval: Approval, decision: Decision, at: float) -> bool:
    body = _decision_body(approval, decision, approval.approved_call.digest, at)
    return bool(decision.mac) and keyring.verifies(body, decision.mac)


def _grant_body(grant: Grant) -> bytes:
    body = {
        "id": grant.id,
        "tool": grant.tool,
        "digest": grant.digest,
        "chat": grant.chat_id,
        "scope": grant.scope,
        "by": grant.created_by,
        "at": grant.created_at,
        "approval": grant.approval_id,
    }
    return msgspec.json.encode(body, order="sorted")


def prove_grant(key: AuditKey, grant: Grant) -> Grant:
    return msgspec.structs.replace(grant, mac=key.mac(_grant_body(grant)))


def grant_holds(keyring: Keyring, grant: Grant) -> bool:
    return bool(grant.mac) and keyring.verifies(_grant_body(grant), grant.mac)
