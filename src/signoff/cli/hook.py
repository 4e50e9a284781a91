"""`signoff hook claude-code`: Claude Code's `command` hook. It reads one event on stdin, asks the signoff
server (`--server` or `SIGNOFF_URL`, as the principal `SIGNOFF_TOKEN` proves), and writes Claude Code's
answer on stdout.

Any failure (the server down, slow or refusing, an event that is not JSON or not one signoff rules on) is
one line on stderr and exit 2, which makes Claude Code block the call: this hook fails closed, where an
`http` hook fails open on every error. With `--ledger URL --policy FILE` instead it decides against a
ledger on this machine, for one person at their own: the inbox and `signoff approvals approve` decide,
and the hook waits on the ledger. With `--mcp` it is the stdio MCP server of `--permission-prompt-tool
mcp__signoff__approve` (see `signoff.hooks.prompt`).

It runs once per tool call, and its start is part of each call's latency: `signoff` dispatches here before
loading anything else, and the server path imports the standard library and `signoff.hooks.client` alone.
Its options are parsed here, once, with argparse; the Typer app lists the command and hands its arguments
over untouched.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, NoReturn

from signoff.hooks.client import DEFAULT_TIMEOUT, TOKEN_ENV, URL_ENV, HookFailed, send

EXIT_BLOCK = 2
"""What makes Claude Code block the call, with our stderr as the reason."""
MAX_EVENT = 1024 * 1024
"""Bytes of an event read from stdin: the server's own bound on one."""
EVENTS = ("PreToolUse", "PermissionRequest", "PostToolUse")
HELP = __doc__.split("\n\n")[0]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise HookFailed(f"signoff hook claude-code: {message}")


def parser() -> argparse.ArgumentParser:
    found = _Parser(prog="signoff hook claude-code", description=HELP)
    found.add_argument("--server", default=None, help=f"The signoff server's URL (default: ${URL_ENV}).")
    found.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT,
        help="The hook's timeout in seconds, as its settings give it (default 600, Claude Code's own):"
        " signoff answers deny a margin before it.",
    )  # fmt: skip
    found.add_argument("--mcp", action="store_true", help="Serve the permission-prompt tool over stdio.")
    found.add_argument("--ledger", default=None, help="Decide against this ledger instead of a server.")
    found.add_argument("--policy", default=None, help="The policy TOML file, with --ledger.")
    return found


def main(argv: list[str]) -> NoReturn:
    """Run the hook with `argv` (what follows `signoff hook claude-code`), and exit."""
    try:
        options = parser().parse_args(argv)
        if not 1 <= options.timeout <= 86_400:
            raise HookFailed("signoff hook claude-code: --timeout must be from 1 to 86400 seconds")
        if options.ledger is not None:
            if options.policy is None or options.server is not None or options.mcp:
                raise HookFailed(
                    "signoff hook claude-code: --ledger needs --policy, and no --server or --mcp"
                )
            said = _local(options.ledger, options.policy, _event(), options.timeout)
        else:
            server, token = options.server or os.environ.get(URL_ENV, ""), os.environ.get(TOKEN_ENV, "")
            if not server:
                raise HookFailed(f"signoff hook claude-code: no server: pass --server or set {URL_ENV}")
            if options.mcp:
                _serve_prompt(server, token, options.timeout)
            said = send(server, token, _event(), timeout=options.timeout)
    except HookFailed as exc:
        _block(str(exc))
    except Exception as exc:  # a hook that crashes must still block, in one line
        _block(f"signoff hook claude-code: {type(exc).__name__}: {exc}")
    sys.stdout.write(json.dumps(said))
    sys.stdout.flush()
    raise SystemExit(0)


def _block(why: str) -> NoReturn:
    sys.stderr.write(" ".join(why.split()) + "\n")
    raise SystemExit(EXIT_BLOCK)


def _event() -> dict[str, Any]:
    text = sys.stdin.buffer.read(MAX_EVENT + 1)
    if len(text) > MAX_EVENT:
        raise HookFailed(f"signoff hook claude-code: the event on stdin is over {MAX_EVENT} bytes")
    try:
        event = json.loads(text)
    except ValueError:
        raise HookFailed("signoff hook claude-code: the event on stdin is not JSON") from None
    if not isinstance(event, dict) or event.get("hook_event_name") not in EVENTS:
        name = event.get("hook_event_name") if isinstance(event, dict) else None
        raise HookFailed(
            f"signoff hook claude-code: not an event signoff rules on: {name!r} ({', '.join(EVENTS)})"
        )
    return event


def _serve_prompt(server: str, token: str, timeout: float) -> NoReturn:
    from signoff.hooks.prompt import prompt_server

    prompt_server(server, token, timeout=timeout, cwd=os.getcwd()).run("stdio")
    raise SystemExit(0)


def _local(ledger_url: str, policy_file: str, event: dict[str, Any], timeout: float) -> dict[str, Any]:
    """The answer from a ledger on this machine, for its OS user as the requester."""
    import asyncio

    import msgspec

    from signoff.cli.common import audit_key, operator, read_policy
    from signoff.gate import Gate
    from signoff.hooks.events import POST, HookEvent, answer
    from signoff.hooks.ruling import ClaudeCode
    from signoff.ledger import open_ledger

    policy = read_policy(policy_file)
    try:
        read = msgspec.convert(event, HookEvent)
    except msgspec.ValidationError as exc:
        raise HookFailed(f"signoff hook claude-code: not an event signoff rules on: {exc}") from None
    requester = operator().id

    async def go() -> dict[str, Any]:
        async with open_ledger(ledger_url, keyring=audit_key().keyring) as ledger:
            claude = ClaudeCode(Gate(ledger, policy, actor="signoff:hook"))
            if read.hook_event_name == POST:
                if read.tool_use_id is None:
                    raise HookFailed("signoff hook claude-code: a PostToolUse event needs its tool_use_id")
                await claude.ran(read, requester)
                return {}
            return answer(read.hook_event_name, await claude.ask(read, requester, hook_timeout=timeout))

    return asyncio.run(go())
