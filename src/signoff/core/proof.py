"""Proofs: MACs made with the audit key, so that what the database holds can't carry more authority than
the key signed.

Someone who can write the database can make its rows say anything. The key lives outside it, so each
record that grants authority carries a MAC over exactly what it grants, and every use checks it:

- **An approval's seal**, made when it opens and again when an edit changes what it asks: its id, chat and
  call, the digest of the call it lets run, its description, the rule that asked, who asked, who may decide
  and how many (`Authority`), whom it escalates to and when, its deadline and what the deadline means. A
  rule loosened in the table, a deadline moved, an escalation brought forward, a description reworded,
  fails the seal, and a decision, a vote or the single-use claim on it is refused (`Unproven`).
- **A decision's MAC**, one per vote: the approval's seal (so a vote counts only under the authority it was
  given under), the digest of the call it lets run, the verdict, who decided with their roles, and the
  credential it was made with (a bearer link's id among them). A deny moved among the votes is still a
  deny.
- **A principal's MAC**: every field of its record, roles, token hash and revocation included, so a row
  minted, promoted, un-revoked or given another token refuses its token.
- **A grant's MAC**: every field of its record, its maker's roles and its revocation included.

What no MAC prevents is someone who holds the key as well: see the README's threat model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from signoff.core.audit import TIMEOUT_ACTOR, AuditKey, Keyring

if TYPE_CHECKING:
    from signoff.core.approval import Approval
    from signoff.core.decision import Decision
    from signoff.core.grant import Grant
    from signoff.core.principal import Authority, Registered


def _encoded(body: dict[str, Any]) -> bytes:
    return msgspec.json.encode(body, order="sorted")


def authority_body(authority: Authority) -> dict[str, Any]:
    """Named field by field, so a field added later with its default leaves older MACs verifying."""
    body: dict[str, Any] = {
        "approvers": None if authority.approvers is None else list(authority.approvers),
        "quorum": authority.quorum,
        "requester_may_approve": authority.requester_may_approve,
    }
    if authority.remember_always:
        body["remember_always"] = list(authority.remember_always)
    if authority.escalate_to:
        body["escalate_to"] = list(authority.escalate_to)
    return body


# -- approvals ---------------------------------------------------------------------------------------------


def seal_body(approval: Approval) -> bytes:
    """Named field by field, as `authority_body` is; when it escalates is sealed too, when it does, and where
    the call was made (its `context`, which people see and a rule may test), when its client said."""
    call = approval.call
    escalation = {} if approval.escalate_at is None else {"escalate_at": approval.escalate_at}
    context = {"context": call.context} if call.context else {}
    return _encoded(
        {
            **escalation,
            **context,
            "approval": approval.id,
            "chat": approval.chat_id,
            "call": call.call_id,
            "tool": call.tool,
            "digest": approval.approved_digest,
            "description": approval.description,
            "rule": approval.rule,
            "requester": approval.requester,
            "authority": authority_body(approval.authority),
            "deadline": approval.deadline,
            "on_timeout": approval.on_timeout,
        }
    )


def sealed(key: AuditKey, approval: Approval) -> Approval:
    """`approval` with its seal over its authority as it stands."""
    return msgspec.structs.replace(approval, seal=key.mac(seal_body(approval)))


def seal_holds(keyring: Keyring, approval: Approval) -> bool:
    return bool(approval.seal) and keyring.verifies(seal_body(approval), approval.seal)


def _decision_body(approval: Approval, decision: Decision, digest: str, at: float) -> bytes:
    """Named field by field; what a decision proved itself with only where it is not a program's, so the
    MACs of decisions recorded before it was kept still verify."""
    spent: dict[str, str] = {} if decision.credential == "code" else {"credential": decision.credential}
    if decision.spends:
        spent["spends"] = decision.spends
    return _encoded(
        {
            **spent,
            "approval": approval.id,
            "seal": approval.seal,
            "digest": digest,
            "verdict": decision.verdict,
            "by": decision.by,
            "name": decision.name,
            "roles": list(decision.roles),
            "via": decision.via,
            "reason": decision.reason,
            "at": at,
        }
    )


def prove_decision(key: AuditKey, approval: Approval, decision: Decision, digest: str, at: float) -> Decision:
    """`decision` with its MAC, for `approval` under its current seal, letting the call with `digest` run."""
    mac = key.mac(_decision_body(approval, decision, digest, at))
    return msgspec.structs.replace(decision, mac=mac)


def decision_holds(keyring: Keyring, approval: Approval, decision: Decision, at: float) -> bool:
    body = _decision_body(approval, decision, approval.approved_digest, at)
    return bool(decision.mac) and keyring.verifies(body, decision.mac)


# -- principals and grants: every field but the MAC --------------------------------------------------------


def _fields(record: msgspec.Struct) -> bytes:
    body = msgspec.to_builtins(record)
    body.pop("mac", None)  # left out already when empty (omit_defaults)
    return _encoded(body)


def prove_principal(key: AuditKey, record: Registered) -> Registered:
    return msgspec.structs.replace(record, mac=key.mac(_fields(record)))


def principal_holds(keyring: Keyring, record: Registered) -> bool:
    return bool(record.mac) and keyring.verifies(_fields(record), record.mac)


def prove_grant(key: AuditKey, grant: Grant) -> Grant:
    return msgspec.structs.replace(grant, mac=key.mac(_fields(grant)))


def grant_holds(keyring: Keyring, grant: Grant) -> bool:
    return bool(grant.mac) and keyring.verifies(_fields(grant), grant.mac)


def unproven(keyring: Keyring, approval: Approval) -> str | None:
    """Why the approval's approving decision, or its quorum, is not proven under `keyring`; None if it is.

    Only approving votes whose proofs hold, from distinct principals the sealed authority admits, count; a
    deny anywhere among them means the approval was denied, whatever its state says."""
    if not seal_holds(keyring, approval):
        return "its authority is not the one it was sealed with"
    decision, at = approval.decision, approval.decided_at
    if decision is None or at is None or not decision.approved:
        return "it records no approving decision"
    if not decision_holds(keyring, approval, decision, at):
        return f"the decision by {decision.by} carries no valid proof"
    if decision.by == TIMEOUT_ACTOR:
        return None if approval.on_timeout == "allow" else "its rule does not allow on timeout"
    counted = set()
    for vote in approval.votes:
        if not decision_holds(keyring, approval, vote.decision, vote.at):
            return f"the approval by {vote.decision.by} carries no valid proof"
        if not vote.decision.approved:
            return f"{vote.decision.by} denied it"
        if not approval.admits(vote.decision.principal, vote.at):
            return f"{vote.decision.by} may not decide it"
        counted.add(vote.decision.by)
    if decision.mac not in {vote.decision.mac for vote in approval.votes}:
        return f"the decision by {decision.by} is not among its counted approvals"
    if len(counted) < approval.authority.quorum:
        return f"{len(counted)} distinct approvers are proven, and it needs {approval.authority.quorum}"
    return None
