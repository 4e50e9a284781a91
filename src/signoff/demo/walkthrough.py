"""The CLI walkthrough: a scripted agent asks to pay, a person decides from a second terminal, and the tool
runs exactly once. It shows the whole core path: policy, ledger, fan-out to approvers, cross-process wake-up
and the single-use claim.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Callable
from importlib import resources

import msgspec
from rich.console import Console

from signoff.approvers import Approver, TerminalApprover
from signoff.core.approval import Approval
from signoff.core.call import ToolCall
from signoff.core.policy import Policy
from signoff.demo.script import plan
from signoff.demo.tools import Wallets, get_weather
from signoff.gate import Gate, Refused
from signoff.ledger import open_ledger
from signoff.ledger.url import ledger_url

SCRIPT = ("weather in Tokyo", "pay 50 USD to Hanako")


def demo_policy(notify: tuple[str, ...] = ()) -> Policy:
    """The demo's policy; with `notify`, its payment rules tell those channels (`--mailbox`'s email)."""
    text = resources.files("signoff.demo").joinpath("policy.toml").read_text()
    policy = Policy.from_toml(text, source="signoff/demo/policy.toml")
    if not notify:
        return policy
    rules = dict(policy.rules)
    rules["process_payment"] = tuple(
        msgspec.structs.replace(r, notify=notify) for r in rules["process_payment"]
    )
    return Policy(rules, policy.mode)


def announcer(console: Console, url: str) -> Approver:
    """An approver that only tells the person how to decide, then abstains so other channels can."""

    def announce(approval: Approval) -> None:
        flag = "" if url == "sqlite:///signoff.db" else f" --ledger {url}"
        console.print(
            f"[yellow]approval {approval.id} is pending:[/] {approval.description}", highlight=False
        )
        console.print("decide it from a second terminal:", highlight=False)
        console.print(f"  signoff approvals approve {approval.id}{flag}", highlight=False, soft_wrap=True)
        console.print(
            f"  signoff approvals deny {approval.id}{flag} --reason '...'", highlight=False, soft_wrap=True
        )
        return

    return announce


async def walkthrough(url: str | None = None, interactive: bool | None = None) -> None:
    url = ledger_url(url)
    console = Console(highlight=False)
    wallets = Wallets()
    chat_id = "demo-" + secrets.token_hex(4)
    runs = {"process_payment": 0, "get_weather": 0}

    def process_payment(amount: float, currency: str, recipient: str) -> object:
        runs["process_payment"] += 1
        return wallets.pay(chat_id, amount, currency, recipient)

    def weather(city: str) -> object:
        runs["get_weather"] += 1
        return get_weather(city)

    tools: dict[str, Callable[..., object]] = {"process_payment": process_payment, "get_weather": weather}
    approvers: list[Approver] = [announcer(console, url)]
    if sys.stdin.isatty() if interactive is None else interactive:
        approvers.append(TerminalApprover(console=console))

    console.print(f"[dim]ledger {url}, chat {chat_id}[/]")
    async with open_ledger(url) as ledger:
        gate = Gate(ledger, demo_policy(), approvers)
        for step, text in enumerate(SCRIPT, 1):
            console.print(f"\n[bold]user:[/] {text}")
            for index, (tool, args) in enumerate(plan(text)):
                call = ToolCall(f"call_{step}_{index}", tool, args)
                console.print(f"[bold]agent calls[/] {tool}({args})")
                result = await gate.run(call, tools[tool], chat_id=chat_id)
                if isinstance(result, Refused):
                    console.print(f"[bold]agent:[/] I did not run {tool}: {result.message}")
                else:
                    console.print(f"[bold]agent:[/] {tool} returned {result}")
    console.print(
        f"\nprocess_payment ran {runs['process_payment']} time(s); get_weather ran {runs['get_weather']}"
    )
