"""The demo's tools. `process_payment` keeps a wallet of 1000 per chat; `export_report` is long-running;
`change_bgm` is an acknowledged browser tool."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections import defaultdict
from typing import Any

from signoff.tasks import long_running, progress

REPORT_STEPS = ("collecting rows", "totalling", "charting", "laying out pages", "writing the PDF")
REPORT_TICK = 0.5
"""Seconds between progress reports: 20 of them, so a report takes about ten seconds."""

STARTING_BALANCE = 1000


class Wallets:
    def __init__(self) -> None:
        self.balances: defaultdict[str, float] = defaultdict(lambda: STARTING_BALANCE)
        self.payments: list[dict[str, Any]] = []

    def pay(self, chat_id: str, amount: float, currency: str, recipient: str) -> dict[str, Any]:
        amount = int(amount) if float(amount).is_integer() else amount  # 50, not 50.0, in replies
        balance = self.balances[chat_id]
        if amount <= 0:
            return {"success": False, "error": f"amount must be positive, not {amount}"}
        if amount > balance:
            return {"success": False, "error": f"insufficient funds: balance is {balance} {currency}"}
        self.balances[chat_id] = balance - amount
        payment = {
            "success": True,
            "transaction_id": "txn_" + secrets.token_hex(6),
            "amount": amount,
            "currency": currency,
            "recipient": recipient,
            "balance": self.balances[chat_id],
        }
        self.payments.append(payment)
        return payment


def get_weather(city: str) -> dict[str, Any]:
    """The weather in `city` now. (Deterministic, so the demo needs no network.)"""
    temperature = 12 + sum(map(ord, city.lower())) % 15
    return {
        "city": city,
        "temperature_c": temperature,
        "conditions": "clear" if temperature > 18 else "cloudy",
    }


@long_running
async def export_report(name: str) -> dict[str, Any]:
    """Export the report `name` as a PDF. It takes about ten seconds, so it runs in the background."""
    for done, step in enumerate(REPORT_STEPS):
        for tick in range(4):
            progress(done * 20 + tick * 5, step)
            await asyncio.sleep(REPORT_TICK)
    pages = 3 + int(hashlib.sha256(name.encode()).hexdigest(), 16) % 20
    return {"file": f"{name}.pdf", "pages": pages}


def change_bgm(track: str) -> dict[str, Any]:
    """Play a background music track in the user's browser."""
    # Acknowledged (seed 001's flow): the page plays the track as it sees the call; this tells the model so.
    return {"success": True, "track": track, "message": f"the browser plays {track}"}
