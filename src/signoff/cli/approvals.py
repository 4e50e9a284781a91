"""`signoff approvals` and `signoff grants`: list, show and decide approvals, list and revoke grants.

Decisions are the operator's (`cli:<os user>`, role admin): an admin may decide any approval, and counts as
one principal toward a quorum like anyone else.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

import typer

from signoff.cli.common import (
    ChatFilter,
    JsonOption,
    LedgerOption,
    ReasonOption,
    fail,
    operator,
    operator_proven,
    out,
    print_json,
    print_record,
    print_table,
    read_policy,
    shown,
    uncut,
    when,
    with_ledger,
)
from signoff.cli.ids import APPROVAL, GRANT
from signoff.core.approval import Approval, State
from signoff.core.decision import Decision, Remember
from signoff.core.errors import SignoffError
from signoff.core.grant import Grant
from signoff.core.policy import Policy
from signoff.core.views import approval_json, notice_json
from signoff.ledger.base import Ledger
from signoff.server.approvals import grant_json

approvals_app = typer.Typer(no_args_is_help=True, help="List, show and decide approvals.")
grants_app = typer.Typer(no_args_is_help=True, help="List and revoke remembered approvals.")


@approvals_app.command("list")
def approvals_list(
    ledger: LedgerOption = None,
    chat: ChatFilter = None,
    state: Annotated[State | None, typer.Option(help="Only this state.")] = None,
    as_json: JsonOption = False,
) -> None:
    """List approvals, oldest first, with who they wait for and how far their quorum got."""

    async def read(lg: Ledger) -> tuple[list[Approval], Callable[[str], str]]:
        found = await lg.approvals.query(chat_id=chat, state=state)
        return found, str if as_json else await APPROVAL.shown(lg)

    found, short = with_ledger(ledger, read, create=False)
    if as_json:
        print_json({"approvals": [approval_json(a) for a in found]})
        return
    columns = (uncut("id"), "state", "chat", "tool", "description", "approvals", "created", "deadline")
    print_table(found, columns, lambda a: _approval_row(a, short), empty="no approvals")


def _approval_row(a: Approval, short: Callable[[str], str]) -> tuple[str, ...]:
    tally = f"{a.tally} (waiting for {a.authority.awaited()})" if a.state is State.PENDING else a.tally
    return (
        short(a.id), a.state, shown(a.chat_id), shown(a.call.tool), shown(a.description), shown(tally),
        when(a.created_at), when(a.deadline),
    )  # fmt: skip


@approvals_app.command("show")
def approvals_show(approval_id: str, ledger: LedgerOption = None, as_json: JsonOption = False) -> None:
    """Show one approval as the approvals API shows it, with where it was announced (`notices`)."""

    async def read(lg: Ledger) -> dict[str, Any]:
        approval = await lg.approvals.get(await APPROVAL.resolve(lg, approval_id))
        record = approval_json(approval)
        record["notices"] = [notice_json(n) for n in await lg.outbox.query(approval_id=approval.id)]
        return record

    record = with_ledger(ledger, read, create=False)
    if as_json:
        print_json(record)
    else:
        print_record(record)


def _decide(url: str | None, approval_id: str, decision: Decision, policy: Policy | None = None) -> None:
    async def decide(lg: Ledger) -> Approval:
        return await lg.approvals.decide(await APPROVAL.resolve(lg, approval_id), decision, policy=policy)

    approval = with_ledger(url, decide)
    if approval.state is State.PENDING:
        out.print(f"{approval.id} pending: {shown(approval.tally)}", highlight=False)
    else:
        out.print(f"{approval.id} {approval.state} by {shown(approval.by)}", highlight=False)


@approvals_app.command("approve")
def approvals_approve(
    approval_id: str,
    ledger: LedgerOption = None,
    reason: ReasonOption = "",
    remember: Annotated[str, typer.Option(help="once, session (this chat) or always.")] = "once",
    any_args: Annotated[bool, typer.Option("--any-args", help="Remember for any arguments.")] = False,
    args: Annotated[
        str | None, typer.Option("--args", help="Approve with these arguments instead (JSON).")
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy",
            envvar="SIGNOFF_POLICY",
            help="The policy TOML file the server runs, which rules on an edited call (--args).",
        ),
    ] = None,
) -> None:
    """Approve (or, with --args, edit and approve) a pending approval. An edit is a new call: the policy
    rules on it as if the agent had made it, so --args needs --policy."""
    rules = None
    try:
        if args is None:
            decision = Decision.approve(operator_proven(), reason, _remember(remember), any_args)
        else:
            decision = Decision.edit(_json_object(args), operator_proven(), reason, _remember(remember))
            if policy is None:
                fail("an edit is a new call that the policy rules on: give --policy FILE, the server's", 2)
            rules = read_policy(policy)
    except SignoffError as exc:
        fail(str(exc), 2)
    _decide(ledger, approval_id, decision, rules)


@approvals_app.command("deny")
def approvals_deny(
    approval_id: str,
    ledger: LedgerOption = None,
    reason: Annotated[str, typer.Option(help="Why; the model is told.")] = "",
) -> None:
    """Deny a pending approval."""
    _decide(ledger, approval_id, Decision.deny(operator_proven(), reason))


@approvals_app.command("cancel")
def approvals_cancel(
    approval_id: str,
    ledger: LedgerOption = None,
    reason: ReasonOption = "",
) -> None:
    """Withdraw a pending approval without deciding it."""

    async def cancel(lg: Ledger) -> Approval:
        return await lg.approvals.cancel(await APPROVAL.resolve(lg, approval_id), operator().id, reason)

    approval = with_ledger(ledger, cancel)
    out.print(f"{approval.id} {approval.state} by {shown(approval.by)}", highlight=False)


@approvals_app.command("expire")
def approvals_expire(ledger: LedgerOption = None) -> None:
    """Expire every pending approval whose deadline has passed."""
    expired = with_ledger(ledger, lambda lg: lg.approvals.expire_due())
    for approval in expired:
        out.print(f"{approval.id} {approval.state}", highlight=False)
    out.print(f"{len(expired)} expired")


@grants_app.command("list")
def grants_list(
    ledger: LedgerOption = None,
    chat: Annotated[str | None, typer.Option(help="Only grants that apply in this chat.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Include revoked grants.")] = False,
    as_json: JsonOption = False,
) -> None:
    """List grants."""

    async def read(lg: Ledger) -> tuple[list[Grant], Callable[[str], str]]:
        found = await lg.grants.query(chat_id=chat, active=not all_)
        return found, str if as_json else await GRANT.shown(lg)

    found, short = with_ledger(ledger, read, create=False)
    if as_json:  # the grants API's view, which lives with its routes (layer 5, below the CLI)
        print_json({"grants": [grant_json(g) for g in found]})
        return
    columns = (uncut("id"), "tool", "args", "scope", "chat", "by", "created", "revoked")
    print_table(found, columns, lambda g: _grant_row(g, short), empty="no grants")


def _grant_row(g: Grant, short: Callable[[str], str]) -> tuple[str, ...]:
    args = "any" if g.digest is None else g.digest[:12]
    return (
        short(g.id), shown(g.tool), args, g.scope, shown(g.chat_id or "*"), shown(g.created_by),
        when(g.created_at), when(g.revoked_at),
    )  # fmt: skip


@grants_app.command("revoke")
def grants_revoke(grant_id: str, ledger: LedgerOption = None) -> None:
    """Revoke a grant: the next matching call is asked again."""

    async def revoke(lg: Ledger) -> Grant:
        return await lg.grants.revoke(await GRANT.resolve(lg, grant_id), operator().id)

    grant = with_ledger(ledger, revoke)
    out.print(f"{grant.id} revoked by {shown(grant.revoked_by)}", highlight=False)


def _remember(value: str) -> Remember:
    if value not in ("once", "session", "always"):
        raise typer.BadParameter("must be once, session or always", param_hint="--remember")
    return value  # type: ignore[return-value]


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise typer.BadParameter(f"not JSON: {exc}", param_hint="--args") from None
    if not isinstance(value, dict):
        raise typer.BadParameter("must be a JSON object", param_hint="--args")
    return value
