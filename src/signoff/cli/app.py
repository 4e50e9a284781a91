"""`signoff`: serve agents, and decide and inspect approvals from a terminal, against any ledger URL.

Every failure is one line on stderr and a non-zero exit: a person at a terminal needs the reason, not a
traceback.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from signoff.cli.approvals import approvals_app, grants_app
from signoff.cli.audit import audit_app
from signoff.cli.common import LedgerOption, err, fail, out
from signoff.cli.gateway import mcp_gateway
from signoff.cli.outbox import outbox_app
from signoff.cli.principals import principals_app
from signoff.cli.serving import Serving, with_serving
from signoff.cli.tasks import tasks_app
from signoff.core.errors import SignoffError
from signoff.ledger import open_ledger

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
db_app = typer.Typer(no_args_is_help=True, help="The ledger's database schema.")
app.add_typer(approvals_app, name="approvals")
app.add_typer(grants_app, name="grants")
app.add_typer(audit_app, name="audit")
app.add_typer(db_app, name="db")
app.add_typer(tasks_app, name="tasks")
app.add_typer(principals_app, name="principals")
app.add_typer(outbox_app, name="outbox")
app.command("mcp-gateway")(mcp_gateway)


@db_app.command("upgrade")
def db_upgrade(ledger: LedgerOption = None) -> None:
    """Create or migrate the ledger's schema to this signoff's version; safe to run twice, or at once
    from several machines."""

    async def go() -> tuple[int, int]:
        return await open_ledger(ledger).upgrade()

    try:
        before, after = asyncio.run(go())
    except SignoffError as exc:
        fail(str(exc))
    change = f"migrated from version {before} to {after}" if before != after else f"already at {after}"
    out.print(f"ledger schema {change}", highlight=False)


@app.command("walkthrough")
def walkthrough_command(ledger: LedgerOption = None) -> None:
    """Walk through one approval in the terminal: the agent asks, you decide from another terminal."""
    from signoff.demo.walkthrough import walkthrough

    try:
        asyncio.run(walkthrough(ledger))
    except SignoffError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        err.print("interrupted: the approval stays pending; resume with `signoff walkthrough`")
        raise typer.Exit(130) from None


@app.command("demo")
@with_serving
def demo(
    runtime: Annotated[
        str,
        typer.Option(
            "--runtime", help="The agent framework: pydantic-ai, or adk (Google ADK, needs signoff\\[adk])."
        ),
    ] = "pydantic-ai",
    mailbox: Annotated[
        bool,
        typer.Option(
            "--mailbox",
            help="Send the payment rules' approval emails to a local SMTP server, and show them at /mailbox.",
        ),
    ] = False,
    *,
    serving: Serving,
) -> None:
    """Serve the demo chat offline: a scripted model, payments that need approval, and the approvals API.
    Chats need no login: each browser gets an anonymous session, and credential-less clients share one."""
    from signoff.demo.runtime import RUNTIMES

    if runtime not in RUNTIMES:
        raise typer.BadParameter(f"must be one of {', '.join(RUNTIMES)}", param_hint="--runtime")
    if runtime == "adk" and serving.workers > 1:  # its sessions live in each worker's memory
        raise typer.BadParameter(
            "the ADK demo keeps its sessions in memory: one worker", param_hint="--workers"
        )
    if not mailbox:
        serving.start("demo", runtime=runtime, anonymous=True)
        return
    from signoff.demo.mailbox import Mailbox

    sink = Mailbox.start()
    try:
        serving.start("demo", runtime=runtime, anonymous=True, mailbox=sink.directory, smtp_port=sink.port)
    finally:
        sink.stop()


@app.command("serve")
@with_serving
def serve_command(
    agent: Annotated[
        str,
        typer.Option(
            "--agent", help="The pydantic-ai Agent or Google ADK agent to serve, as module:attribute."
        ),
    ],
    policy: Annotated[
        str | None, typer.Option("--policy", help="A policy TOML file (default: ask for every tool).")
    ] = None,
    anonymous_chats: Annotated[
        bool,
        typer.Option(
            "--anonymous-chats",
            help="Take chats without a credential: each browser gets an anonymous session, and"
            " credential-less clients share one chat owner. Off: every chat needs a credential.",
        ),
    ] = False,
    *,
    serving: Serving,
) -> None:
    """Serve an agent as an AI SDK chat with every tool call gated."""
    serving.start("serve", agent=agent, policy=policy, anonymous=anonymous_chats)


def main() -> None:
    """Run the CLI; anything unexpected still ends as one line, never a traceback."""
    try:
        app()
    except Exception as exc:
        err.print(f"[red]error:[/] {type(exc).__name__}: {exc}", highlight=False)
        raise SystemExit(1) from None
