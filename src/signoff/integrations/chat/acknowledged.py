"""Acknowledged browser tools (seed 001's `change_bgm`): the server answers the call at once, and the browser
acts on the call as it sees it.

A browser tool whose result the model does not need (play a track, show a toast) need not hold the turn
open until the browser reports back: its function runs on the server and returns the acknowledgment, so one
stream carries the whole turn, on SSE and on the socket. The browser, which sees the call stream by, acts on
it. Nobody can be asked first, since the browser acts the moment it sees the call: the policy must allow it
outright, and a policy that could ask is refused when the chat is built.

A result the browser sends of its own later (it failed to play, say) is recorded in the audit as `acted`,
once, and never reaches the model: the model was told the acknowledgment. A client sends every part it
holds with each message, so the chat's state keeps the digest of each such call's result as the client was
last known to hold it; a result equal to it is an echo. The record is made where the chat's state is saved
after it: on the live socket while the turn runs, or with a request the chat takes. A request the chat
refuses (there is nothing to continue) changes nothing, the audit included.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, MutableMapping, Sequence

from signoff.core.call import canonical_json
from signoff.core.errors import PolicyError
from signoff.core.policy import Policy
from signoff.core.principal import Principal
from signoff.ledger.base import Ledger
from signoff.protocol import Chunk, ToolInputAvailable, ToolOutput, ToolOutputAvailable, ToolOutputError

MAX_SAID = 200
"""How much of a browser's error text the audit keeps: the client chose it, and the digest covers it all."""


def check(policy: Policy, tools: Collection[str]) -> None:
    """Refuse a policy that could ask about an acknowledged tool: its first rule must allow every call."""
    for tool in tools:
        rules = policy.rules.get(tool, ())
        first = rules[0] if rules else None
        if first is None or first.action != "allow" or first.when is not None:
            raise PolicyError(
                f"{tool} is an acknowledged browser tool: the browser acts on its call as soon as it sees "
                f"it, so nobody can be asked first; its first rule must be an unconditional allow "
                f'([[tools.{tool}]] action = "allow", with no "when")'
            )


def result_digest(output: ToolOutput) -> str:
    """The digest of a result as a client holds it: its output, or its error."""
    held = {"error": output.error_text} if output.error_text is not None else {"output": output.output}
    return hashlib.sha256(canonical_json(held)).hexdigest()


class Acknowledgments:
    """Watches a reply's chunks for the results of acknowledged calls, as the client will hold them."""

    def __init__(self, tools: Collection[str]) -> None:
        self.tools = frozenset(tools)
        self.calls: dict[str, str] = {}
        """Acknowledged calls streamed so far: call id to tool name."""
        self.results: dict[str, str] = {}
        """Their results as sent: call id to `result_digest`."""

    def note(self, chunk: Chunk) -> None:
        match chunk:
            case ToolInputAvailable(tool_call_id=call_id, tool_name=tool) if tool in self.tools:
                self.calls[call_id] = tool
                self.results.setdefault(call_id, "")  # announced: a browser may report before the answer
            case ToolOutputAvailable(tool_call_id=call_id, output=output) if call_id in self.calls:
                held = ToolOutput(call_id=call_id, tool=self.calls[call_id], output=output)
                self.results[call_id] = result_digest(held)
            case ToolOutputError(tool_call_id=call_id, error_text=error) if call_id in self.calls:
                held = ToolOutput(call_id=call_id, tool=self.calls[call_id], error_text=error)
                self.results[call_id] = result_digest(held)


async def record_acted(
    ledger: Ledger,
    chat_id: str,
    owner: Principal,
    known: MutableMapping[str, str],
    outputs: Sequence[ToolOutput],
) -> None:
    """Audit, once, each result the browser sent of its own for an acknowledged call (`known`: call id to
    the digest of the result the client was last known to hold, updated here). The audit keeps the
    result's digest, not the result: what a client sends is not the audit's to hold."""
    for output in outputs:
        held = known.get(output.call_id)
        if held is None or held == (now := result_digest(output)):
            continue
        known[output.call_id] = now
        failed = output.error_text
        said = f"it failed: {failed[:MAX_SAID]}" if failed is not None else "it returned"
        await ledger.audit.record(
            "acted", output.call_id, owner.id, chat=chat_id, tool=output.tool, result=now,
            why=f"the browser reported on an acknowledged call ({said}); the model is not told",
        )  # fmt: skip
