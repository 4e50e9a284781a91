"""`signoff`: serve agents, and decide and inspect approvals from a terminal, against any ledger URL.

Every failure is one line on stderr and a non-zero exit: a person at a terminal needs the reason, not a
traceback.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated, Any

import typer

from signoff.cli.approvals import approvals_app, grants_app
from signoff.cli.audit import audit_app
from signoff.cli.common import LedgerOption, err, fail, out, say_error
from signoff.cli.gateway import mcp_gateway
from signoff.cli.hook import HELP as hook_help
from signoff.cli.hook import main as hook_main
from signoff.cli.outbox import outbox_app
from signoff.cli.principals import principals_app
from signoff.cli.serving import Serving, with_serving
from signoff.cli.tasks import tasks_app
from signoff.core.errors import SignoffError
from signoff.ledger import open_ledger
from signoff.ledger.url import command_hint

_clicks = sys.modules[typer.BadParameter.__module__]
"""The exceptions of the click that Typer runs on: its own copy since Typer 0.2x, click itself before."""

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__, rich_markup_mode="markdown")
"""Help is Markdown, so that Rich wraps every paragraph to the terminal: in Typer's `rich` mode the line
breaks of a docstring stay where its source broke them."""
db_app = typer.Typer(no_args_is_help=True, help="The ledger's database schema.")
app.add_typer(approvals_app, name="approvals")
app.add_typer(grants_app, name="grants")
app.add_typer(audit_app, name="audit")
app.add_typer(db_app, name="db")
app.add_typer(tasks_app, name="tasks")
app.add_typer(principals_app, name="principals")
app.add_typer(outbox_app, name="outbox")
app.command("mcp-gateway")(mcp_gateway)
hook_app = typer.Typer(no_args_is_help=True, help="Hooks that put other agents' tool calls behind signoff.")
app.add_typer(hook_app, name="hook")


@hook_app.command(
    "claude-code",
    help=hook_help,
    add_help_option=False,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def hook_claude_code(ctx: typer.Context) -> None:
    """Its options are `cli.hook`'s own, parsed there: `signoff hook claude-code --help` lists them."""
    hook_main(ctx.args)


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
        resume = command_hint("walkthrough", ledger)
        err.print(f"interrupted: the approval stays pending; resume with `{resume}`", highlight=False)
        raise typer.Exit(130) from None


@app.command("demo")
@with_serving
def demo(
    runtime: Annotated[
        str,
        typer.Option(
            "--runtime",
            help="The agent framework: pydantic-ai, adk (Google ADK, needs signoff\\[adk]), openai-agents"
            " (the OpenAI Agents SDK, needs signoff\\[openai-agents]) or langgraph (LangChain v1, needs"
            " signoff\\[langchain]).",
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
    if runtime in ("adk", "langgraph") and serving.workers > 1:  # its threads live in each worker's memory
        raise typer.BadParameter(
            f"the {runtime} demo keeps its conversations in memory: one worker", param_hint="--workers"
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
        str | None,
        typer.Option(
            "--agent",
            help="The pydantic-ai Agent or Google ADK agent to serve, as module:attribute. Without it: no"
            " chat, only the approvals inbox, the API, the channels and the Claude Code hooks.",
        ),
    ] = None,
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
    deps: Annotated[
        str | None,
        typer.Option(
            "--deps",
            help="What makes a pydantic-ai agent's deps for each run, as module:function (a class counts);"
            " without it, the agent's deps_type() does, where it can.",
        ),
    ] = None,
    *,
    serving: Serving,
) -> None:
    """Serve an agent as an AI SDK chat with every tool call gated; or, without `--agent`, the approvals
    of agents that run elsewhere (Claude Code's hooks, `signoff.claude`)."""
    if agent is None:
        for given, option in ((deps, "--deps"), (anonymous_chats or None, "--anonymous-chats")):
            if given is not None:
                raise typer.BadParameter("is for a chat, and needs --agent", param_hint=option)
        serving.start("serve", policy=policy, inbox=True)
        return
    serving.start("serve", agent=agent, policy=policy, anonymous=anonymous_chats, deps=deps)


def main() -> None:
    """Run the CLI; every failure ends as one line, never a box or a traceback. Typer runs outside its
    standalone mode, which draws usage errors in a box: they come back here, to be said as the rest."""
    try:
        code = app(standalone_mode=False)
    except _clicks.NoArgsIsHelpError as exc:  # a group alone: Typer printed its help while raising this
        raise SystemExit(exc.exit_code) from None
    except _clicks.UsageError as exc:
        say_error(_usage(exc))
        raise SystemExit(exc.exit_code) from None
    except _clicks.ClickException as exc:
        say_error(exc.format_message())
        raise SystemExit(exc.exit_code) from None
    except typer.Abort:
        say_error("aborted")
        raise SystemExit(1) from None
    except Exception as exc:
        say_error(f"{type(exc).__name__}: {exc}")
        raise SystemExit(1) from None
    raise SystemExit(code if isinstance(code, int) else 0)


def _usage(exc: Any) -> str:
    """A usage error (a `_clicks.UsageError`, which no type names for every Typer) as `<what>: <why>`: a bad
    value is named by its option, and its message says what it must be; anything else (a missing argument,
    an unknown option) points at the command's help."""
    command = exc.ctx.command_path if exc.ctx is not None else "signoff"
    if isinstance(exc, _clicks.BadParameter) and not isinstance(exc, _clicks.MissingParameter):
        named = exc.param_hint if isinstance(exc.param_hint, str) else None
        if named is None and exc.param is not None:
            named = "/".join(exc.param.opts)
        return f"{named or command}: {exc.message.removeprefix('Value error, ')}"  # pydantic's label
    said = exc.format_message().removesuffix(".")
    return f"{command}: {said[:1].lower()}{said[1:]}; see {command} --help"
