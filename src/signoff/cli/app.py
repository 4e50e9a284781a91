"""`signoff`: serve agents, and decide and inspect approvals from a terminal, against any ledger URL.

Every failure is one line on stderr and a non-zero exit: a person at a terminal needs the reason, not a
traceback.
"""

from __future__ import annotations

import asyncio
import getpass
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import msgspec
import typer
from rich.console import Console
from rich.table import Table

from signoff.core.approval import State
from signoff.core.decision import Decision, Remember
from signoff.core.errors import LedgerUnavailable, SignoffError
from signoff.core.task import TaskState
from signoff.ledger import Ledger, MemoryLedger, open_ledger
from signoff.ledger.url import ENV_VAR
from signoff.tasks import Tasks

if TYPE_CHECKING:
    from signoff.cli.worker import Served

T = TypeVar("T")

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
approvals_app = typer.Typer(no_args_is_help=True, help="List, show and decide approvals.")
grants_app = typer.Typer(no_args_is_help=True, help="List and revoke remembered approvals.")
audit_app = typer.Typer(no_args_is_help=True, help="Inspect and verify the hash-chained audit log.")
db_app = typer.Typer(no_args_is_help=True, help="The ledger's database schema.")
tasks_app = typer.Typer(no_args_is_help=True, help="List, show and cancel long-running calls' tasks.")
app.add_typer(approvals_app, name="approvals")
app.add_typer(grants_app, name="grants")
app.add_typer(audit_app, name="audit")
app.add_typer(db_app, name="db")
app.add_typer(tasks_app, name="tasks")

out = Console()
err = Console(stderr=True, soft_wrap=True)

LedgerOption = Annotated[
    str | None, typer.Option("--ledger", envvar=ENV_VAR, help="Ledger URL (default sqlite:///signoff.db).")
]
ByOption = Annotated[str | None, typer.Option("--by", help="Who decides (default cli:$USER).")]


def _with_ledger(url: str | None, action: Callable[[Ledger], Awaitable[T]]) -> T:
    async def go() -> T:
        async with open_ledger(url) as ledger:
            return await action(ledger)

    try:
        return asyncio.run(go())
    except SignoffError as exc:
        err.print(f"[red]error:[/] {exc}", highlight=False)
        raise typer.Exit(1) from None


def _when(ts: float | None) -> str:
    return "" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _by(by: str | None) -> str:
    return by or f"cli:{getpass.getuser()}"


@approvals_app.command("list")
def approvals_list(
    ledger: LedgerOption = None,
    chat: Annotated[str | None, typer.Option(help="Only this chat.")] = None,
    state: Annotated[State | None, typer.Option(help="Only this state.")] = None,
) -> None:
    """List approvals, oldest first."""
    found = _with_ledger(ledger, lambda lg: lg.approvals(chat_id=chat, state=state))
    table = Table("id", "state", "chat", "tool", "description", "created", "deadline")
    for a in found:
        table.add_row(
            a.id, a.state, a.chat_id, a.call.tool, a.description, _when(a.created_at), _when(a.deadline)
        )
    out.print(table if found else "no approvals")


@approvals_app.command("show")
def approvals_show(approval_id: str, ledger: LedgerOption = None) -> None:
    """Show one approval in full, as JSON."""
    approval = _with_ledger(ledger, lambda lg: lg.get(approval_id))
    out.print_json(data=msgspec.to_builtins(approval))


def _decide(url: str | None, approval_id: str, decision: Decision) -> None:
    approval = _with_ledger(url, lambda lg: lg.decide(approval_id, decision))
    out.print(f"{approval.id} {approval.state} by {approval.by}", highlight=False)


@approvals_app.command("approve")
def approvals_approve(
    approval_id: str,
    ledger: LedgerOption = None,
    by: ByOption = None,
    reason: Annotated[str, typer.Option(help="Why.")] = "",
    remember: Annotated[str, typer.Option(help="once, session (this chat) or always.")] = "once",
    any_args: Annotated[bool, typer.Option("--any-args", help="Remember for any arguments.")] = False,
    args: Annotated[
        str | None, typer.Option("--args", help="Approve with these arguments instead (JSON).")
    ] = None,
) -> None:
    """Approve (or, with --args, edit and approve) a pending approval."""
    try:
        if args is None:
            decision = Decision.approve(_by(by), reason, _remember(remember), any_args)
        else:
            decision = Decision.edit(_json_object(args), _by(by), reason, _remember(remember))
    except SignoffError as exc:
        err.print(f"[red]error:[/] {exc}", highlight=False)
        raise typer.Exit(2) from None
    _decide(ledger, approval_id, decision)


@approvals_app.command("deny")
def approvals_deny(
    approval_id: str,
    ledger: LedgerOption = None,
    by: ByOption = None,
    reason: Annotated[str, typer.Option(help="Why; the model is told.")] = "",
) -> None:
    """Deny a pending approval."""
    _decide(ledger, approval_id, Decision.deny(_by(by), reason))


@approvals_app.command("cancel")
def approvals_cancel(
    approval_id: str,
    ledger: LedgerOption = None,
    by: ByOption = None,
    reason: Annotated[str, typer.Option(help="Why.")] = "",
) -> None:
    """Withdraw a pending approval without deciding it."""
    approval = _with_ledger(ledger, lambda lg: lg.cancel(approval_id, _by(by), reason))
    out.print(f"{approval.id} {approval.state} by {approval.by}", highlight=False)


@approvals_app.command("expire")
def approvals_expire(ledger: LedgerOption = None) -> None:
    """Expire every pending approval whose deadline has passed."""
    expired = _with_ledger(ledger, lambda lg: lg.expire_due())
    for approval in expired:
        out.print(f"{approval.id} {approval.state}", highlight=False)
    out.print(f"{len(expired)} expired")


@tasks_app.command("list")
def tasks_list(
    ledger: LedgerOption = None,
    chat: Annotated[str | None, typer.Option(help="Only this chat.")] = None,
    state: Annotated[TaskState | None, typer.Option(help="Only this state.")] = None,
) -> None:
    """List tasks, oldest first, with how far each got."""
    found = _with_ledger(ledger, lambda lg: lg.tasks(chat_id=chat, state=state))
    table = Table("id", "state", "progress", "chat", "tool", "message", "created", "ended")
    for t in found:
        table.add_row(
            t.id, t.state, f"{t.progress}%", t.chat_id, t.call.tool, t.error or t.message,
            _when(t.created_at), _when(t.finished_at),
        )  # fmt: skip
    out.print(table if found else "no tasks")


@tasks_app.command("show")
def tasks_show(task_id: str, ledger: LedgerOption = None) -> None:
    """Show one task in full, as JSON."""
    task = _with_ledger(ledger, lambda lg: lg.get_task(task_id))
    out.print_json(data=msgspec.to_builtins(task))


@tasks_app.command("cancel")
def tasks_cancel(
    task_id: str,
    ledger: LedgerOption = None,
    by: ByOption = None,
    reason: Annotated[str, typer.Option(help="Why.")] = "",
) -> None:
    """Ask a task to stop. Its worker stops the body at its next chance and records it cancelled."""
    task = _with_ledger(ledger, lambda lg: Tasks(lg).cancel(task_id, _by(by), reason))
    asked = "cancelled" if task.state is TaskState.CANCELLED else "asked to cancel"
    out.print(f"{task.id} {asked} by {task.cancel_by}", highlight=False)


@grants_app.command("list")
def grants_list(
    ledger: LedgerOption = None,
    chat: Annotated[str | None, typer.Option(help="Only grants that apply in this chat.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Include revoked grants.")] = False,
) -> None:
    """List grants."""
    found = _with_ledger(ledger, lambda lg: lg.grants(chat_id=chat, active=not all_))
    table = Table("id", "tool", "args", "scope", "chat", "by", "created", "revoked")
    for g in found:
        table.add_row(
            g.id,
            g.tool,
            "any" if g.digest is None else g.digest[:12],
            g.scope,
            g.chat_id or "*",
            g.created_by,
            _when(g.created_at),
            _when(g.revoked_at),
        )
    out.print(table if found else "no grants")


@grants_app.command("revoke")
def grants_revoke(grant_id: str, ledger: LedgerOption = None, by: ByOption = None) -> None:
    """Revoke a grant: the next matching call is asked again."""
    grant = _with_ledger(ledger, lambda lg: lg.revoke_grant(grant_id, _by(by)))
    out.print(f"{grant.id} revoked by {grant.revoked_by}", highlight=False)


@audit_app.command("verify")
def audit_verify(ledger: LedgerOption = None) -> None:
    """Check the hash chain; exit 1 naming the first broken entry."""
    count, broken = _with_ledger(ledger, lambda lg: lg.verify_audit())
    if broken is not None:
        err.print(
            f"[red]audit broken at entry {broken.seq}:[/] {broken.problem} ({count} entries hold before it)"
        )
        raise typer.Exit(1)
    out.print(f"audit ok: {count} entries")


@audit_app.command("list")
def audit_list(
    ledger: LedgerOption = None,
    after: Annotated[int, typer.Option(help="Only entries after this sequence number.")] = 0,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 50,
) -> None:
    """Show audit entries in order."""
    entries = _with_ledger(ledger, lambda lg: lg.audit(after, limit))
    table = Table("seq", "at", "actor", "action", "subject", "change", "detail")
    for e in entries:
        change = f"{e.before or ''} → {e.after or ''}" if e.before or e.after else ""
        table.add_row(str(e.seq), _when(e.at), e.actor, e.action, e.subject, change, json.dumps(e.detail))
    out.print(table if entries else "no audit entries")


@db_app.command("upgrade")
def db_upgrade(ledger: LedgerOption = None) -> None:
    """Create or migrate the ledger's schema to this signoff's version; safe to run twice, or at once
    from several machines."""

    async def go() -> tuple[int, int]:
        return await open_ledger(ledger).upgrade()

    try:
        before, after = asyncio.run(go())
    except SignoffError as exc:
        err.print(f"[red]error:[/] {exc}", highlight=False)
        raise typer.Exit(1) from None
    change = f"migrated from version {before} to {after}" if before != after else f"already at {after}"
    out.print(f"ledger schema {change}", highlight=False)


@app.command("walkthrough")
def walkthrough_command(ledger: LedgerOption = None) -> None:
    """Walk through one approval in the terminal: the agent asks, you decide from another terminal."""
    from signoff.demo.walkthrough import walkthrough

    try:
        asyncio.run(walkthrough(ledger))
    except SignoffError as exc:
        err.print(f"[red]error:[/] {exc}", highlight=False)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        err.print("interrupted: the approval stays pending; resume with `signoff walkthrough`")
        raise typer.Exit(130) from None


HostOption = Annotated[str, typer.Option("--host", help="Interface to listen on.")]
PortOption = Annotated[int, typer.Option("--port", help="Port to listen on (0 picks a free one).")]
WaitOption = Annotated[
    str,
    typer.Option("--wait", help="How tools wait for a person, unless a request says: deferred or blocking."),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="A model string: openai:gpt-5.2 for pydantic-ai, gemini-2.5-flash for ADK (needs its key).",
    ),
]
KeepaliveOption = Annotated[
    float, typer.Option("--keepalive", help="Seconds between SSE keep-alive comments.")
]
BrowserTimeoutOption = Annotated[
    float,
    typer.Option(
        "--browser-timeout",
        min=0.1,
        help="Seconds the page has to return a browser tool's result before the model is told it failed.",
    ),
]

TaskSilenceOption = Annotated[
    float,
    typer.Option(
        "--task-silence",
        min=0.5,
        help="Seconds without a heartbeat after which a long-running task's worker is taken for dead, and"
        " the task failed.",
    ),
]


WorkersOption = Annotated[
    int,
    typer.Option(
        "--workers",
        min=1,
        help="Worker processes on the one port. More than one needs a ledger they share:"
        " sqlite://, postgresql:// or redis://.",
    ),
]


@app.command("demo")
def demo(
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    ledger: LedgerOption = None,
    wait: WaitOption = "deferred",
    model: ModelOption = None,
    keepalive: KeepaliveOption = 15.0,
    browser_timeout: BrowserTimeoutOption = 120.0,
    task_silence: TaskSilenceOption = 15.0,
    workers: WorkersOption = 1,
    runtime: Annotated[
        str,
        typer.Option(
            "--runtime", help="The agent framework: pydantic-ai, or adk (Google ADK, needs signoff[adk])."
        ),
    ] = "pydantic-ai",
) -> None:
    """Serve the demo chat offline: a scripted model, payments that need approval, and the approvals API."""
    from signoff.demo.runtime import RUNTIMES

    if runtime not in RUNTIMES:
        raise typer.BadParameter(f"must be one of {', '.join(RUNTIMES)}", param_hint="--runtime")
    if runtime == "adk" and workers > 1:  # its sessions live in each worker's memory
        raise typer.BadParameter(
            "the ADK demo keeps its sessions in memory: one worker", param_hint="--workers"
        )
    served = _served(
        ledger, wait, keepalive, browser_timeout, model=model, runtime=runtime, task_silence=task_silence
    )
    _serve("demo", served, host, port, workers)


@app.command("serve")
def serve_command(
    agent: Annotated[
        str,
        typer.Option(
            "--agent", help="The pydantic-ai Agent or Google ADK agent to serve, as module:attribute."
        ),
    ],
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    ledger: LedgerOption = None,
    wait: WaitOption = "deferred",
    policy: Annotated[
        str | None, typer.Option("--policy", help="A policy TOML file (default: ask for every tool).")
    ] = None,
    model: ModelOption = None,
    keepalive: KeepaliveOption = 15.0,
    browser_timeout: BrowserTimeoutOption = 120.0,
    task_silence: TaskSilenceOption = 15.0,
    workers: WorkersOption = 1,
) -> None:
    """Serve an agent as an AI SDK chat with every tool call gated."""
    served = _served(
        ledger, wait, keepalive, browser_timeout, model=model, agent=agent, policy=policy,
        task_silence=task_silence,
    )  # fmt: skip
    _serve("serve", served, host, port, workers)


def _served(ledger: str | None, wait: str, keepalive: float, browser_timeout: float, **what: Any) -> Served:
    import os

    from signoff.cli.worker import Served
    from signoff.server.auth import new_token

    if wait not in ("deferred", "blocking"):
        raise typer.BadParameter("must be deferred or blocking", param_hint="--wait")
    return Served(
        ledger=ledger,
        token=os.environ.get("SIGNOFF_API_TOKEN") or new_token(),
        wait=wait,  # type: ignore[arg-type]
        keepalive=keepalive,
        frontend_timeout=browser_timeout,
        **what,
    )


def _serve(name: str, served: Served, host: str, port: int, workers: int) -> None:
    import os

    from signoff.cli.worker import ENV
    from signoff.server.run import serve, serve_workers

    def ready(url: str) -> None:
        out.print(f"signoff {name}: {url}", highlight=False, soft_wrap=True)
        out.print(f"approvals inbox: {url}/approvals", highlight=False, soft_wrap=True)
        out.print(f"approvals API token: {served.token}", highlight=False, soft_wrap=True)
        out.print("Ctrl-C to stop", highlight=False)

    async def run() -> None:
        async with open_ledger(served.ledger) as opened:
            if workers == 1:
                await serve(served.app(opened), host, port, ready)
            elif isinstance(opened, MemoryLedger):
                raise LedgerUnavailable("--workers needs a ledger they can share, not memory://")
            else:
                served.build()  # a bad --agent or --policy fails here, once, not in every worker

    try:
        asyncio.run(run())
        if workers > 1:
            os.environ[ENV] = msgspec.json.encode(served).decode()
            serve_workers("signoff.cli.worker:app", host, port, workers, ready)
    except (SignoffError, OSError) as exc:
        err.print(f"[red]error:[/] {exc}", highlight=False)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        err.print("stopped: pending approvals stay in the ledger")


def _remember(value: str) -> Remember:
    if value not in ("once", "session", "always"):
        raise typer.BadParameter("must be once, session or always", param_hint="--remember")
    return value  # type: ignore[return-value]


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not JSON: {exc}", param_hint="--args") from None
    if not isinstance(value, dict):
        raise typer.BadParameter("must be a JSON object", param_hint="--args")
    return value


def main() -> None:
    """Run the CLI; anything unexpected still ends as one line, never a traceback."""
    try:
        app()
    except Exception as exc:
        err.print(f"[red]error:[/] {type(exc).__name__}: {exc}", highlight=False)
        raise SystemExit(1) from None
