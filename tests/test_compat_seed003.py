"""Seed 003: code written for pydantic-ai-blocking-approval 0.8.0 runs on `signoff.pydantic_ai` unchanged.

Every test drives a real `Agent` with a scripted `FunctionModel` around a real `FunctionToolset`, so what is
checked is what a 0.8.0 user sees: which prompts are shown, which tool bodies run, what the run raises.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Awaitable, Coroutine
from typing import Any

import pytest
from pydantic import ValidationError
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import AbstractToolset, DynamicToolset, FunctionToolset, WrapperToolset

from signoff.pydantic_ai import (
    ApprovalCallback,
    ApprovalController,
    ApprovalDecision,
    ApprovalMemory,
    ApprovalRequest,
    ApprovalResult,
    ApprovalToolset,
    SupportsApprovalDescription,
    SupportsNeedsApproval,
)

Call = tuple[str, dict[str, Any]]


def calling(*calls: Call) -> FunctionModel:
    """A model that makes `calls` in one step, then answers with the tool results joined by ` | `."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [part for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(" | ".join(str(part.content) for part in returns))])
        return ModelResponse(parts=[ToolCallPart(name, args) for name, args in calls])

    return FunctionModel(respond)


async def run(toolset: AbstractToolset[Any], *calls: Call) -> str:
    result = await Agent(calling(*calls), toolsets=[toolset]).run("go")
    return result.output


class Files:
    """A real toolset whose bodies record that they ran, so a refusal can be shown to run nothing."""

    def __init__(self, **kwargs: Any) -> None:
        self.ran: list[str] = []
        self.toolset: FunctionToolset[None] = FunctionToolset(**kwargs)
        self.toolset.add_function(self.delete_file)
        self.toolset.add_function(self.get_time)

    def delete_file(self, path: str) -> str:
        self.ran.append(f"delete_file {path}")
        return f"deleted {path}"

    def get_time(self) -> str:
        self.ran.append("get_time")
        return "noon"


class Prompts:
    """Approval callbacks, sync and async, that answer from a script and record what they were shown."""

    def __init__(self, *answers: ApprovalDecision) -> None:
        self.answers = list(answers)
        self.seen: list[ApprovalRequest] = []

    def answer(self, request: ApprovalRequest) -> ApprovalDecision:
        self.seen.append(request)
        return self.answers.pop(0) if self.answers else ApprovalDecision(approved=True)

    def sync(self, request: ApprovalRequest) -> ApprovalDecision:
        return self.answer(request)

    async def async_(self, request: ApprovalRequest) -> ApprovalDecision:
        await asyncio.sleep(0.01)
        return self.answer(request)

    def callback(self, kind: str) -> ApprovalCallback:
        return self.sync if kind == "sync" else self.async_

    @property
    def tools(self) -> list[str]:
        return [request.tool_name for request in self.seen]


KINDS = ["sync", "async"]
DELETE = ("delete_file", {"path": "/tmp/a"})


# --- sync and async callbacks, through a real agent run -------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_an_approved_call_runs_the_tool(kind: str) -> None:
    files, prompts = Files(), Prompts(ApprovalDecision(approved=True))
    toolset = ApprovalToolset(inner=files.toolset, approval_callback=prompts.callback(kind))
    assert await run(toolset, DELETE) == "deleted /tmp/a"
    assert files.ran == ["delete_file /tmp/a"]
    assert prompts.seen == [
        ApprovalRequest(
            tool_name="delete_file", tool_args={"path": "/tmp/a"}, description="delete_file(path='/tmp/a')"
        )
    ]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("note", "message"),
    [("too risky", "User denied delete_file: too risky"), (None, "User denied delete_file: no reason given")],
)
async def test_a_denied_call_raises_permission_error_out_of_the_run(
    kind: str, note: str | None, message: str
) -> None:
    files, prompts = Files(), Prompts(ApprovalDecision(approved=False, note=note))
    toolset = ApprovalToolset(inner=files.toolset, approval_callback=prompts.callback(kind))
    with pytest.raises(PermissionError) as raised:
        await run(toolset, DELETE)
    assert type(raised.value) is PermissionError and str(raised.value) == message
    assert files.ran == []


def test_the_callback_type_takes_both_flavours() -> None:
    prompts = Prompts()
    callbacks: list[ApprovalCallback] = [prompts.sync, prompts.async_]
    assert [inspect.iscoroutinefunction(callback) for callback in callbacks] == [False, True]


# --- nested calls: a tool whose body makes another approved call -----------------------------------------


@pytest.mark.parametrize(("outer_kind", "inner_kind"), [("sync", "async"), ("async", "sync")])
async def test_mixed_nested_calls_ask_outer_then_inner(outer_kind: str, inner_kind: str) -> None:
    order: list[str] = []
    outer_prompts, inner_prompts = Prompts(), Prompts()

    def recording(prompts: Prompts, kind: str) -> ApprovalCallback:
        if kind == "sync":

            def sync(request: ApprovalRequest) -> ApprovalDecision:
                order.append(f"{kind} asks {request.tool_name}")
                return prompts.sync(request)

            return sync

        async def async_(request: ApprovalRequest) -> ApprovalDecision:
            order.append(f"{kind} asks {request.tool_name}")
            return await prompts.async_(request)

        return async_

    leaf: FunctionToolset[None] = FunctionToolset()

    @leaf.tool_plain
    def run_tests(suite: str) -> str:
        order.append(f"run_tests {suite}")
        return f"{suite} green"

    guarded_leaf = ApprovalToolset(inner=leaf, approval_callback=recording(inner_prompts, inner_kind))
    outer: FunctionToolset[None] = FunctionToolset()

    @outer.tool
    async def deploy(ctx: RunContext[None], env: str) -> str:
        tools = await guarded_leaf.get_tools(ctx)
        tested = await guarded_leaf.call_tool("run_tests", {"suite": env}, ctx, tools["run_tests"])
        order.append(f"deploy {env}")
        return f"deployed {env} after {tested}"

    toolset = ApprovalToolset(inner=outer, approval_callback=recording(outer_prompts, outer_kind))
    assert await run(toolset, ("deploy", {"env": "prod"})) == "deployed prod after prod green"
    assert order == [
        f"{outer_kind} asks deploy",
        f"{inner_kind} asks run_tests",
        "run_tests prod",
        "deploy prod",
    ]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_tool_calling_a_sibling_through_the_same_toolset_is_asked_twice(kind: str) -> None:
    prompts = Prompts(ApprovalDecision(approved=True), ApprovalDecision(approved=False, note="not now"))
    inner: FunctionToolset[None] = FunctionToolset()
    toolset = ApprovalToolset(inner=inner, approval_callback=prompts.callback(kind))
    ran: list[str] = []

    @inner.tool_plain
    def migrate(table: str) -> str:
        ran.append(table)
        return f"migrated {table}"

    @inner.tool
    async def release(ctx: RunContext[None], table: str) -> str:
        tools = await toolset.get_tools(ctx)
        return str(await toolset.call_tool("migrate", {"table": table}, ctx, tools["migrate"]))

    with pytest.raises(PermissionError, match=r"^User denied migrate: not now$"):
        await run(toolset, ("release", {"table": "users"}))
    assert prompts.tools == ["release", "migrate"]
    assert ran == []


# --- session memory --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_remember_session_skips_identical_calls_only(kind: str) -> None:
    files, prompts = Files(), Prompts(*[ApprovalDecision(approved=True, remember="session")] * 2)
    toolset = ApprovalToolset(inner=files.toolset, approval_callback=prompts.callback(kind))
    await run(toolset, DELETE)
    await run(toolset, DELETE)
    assert prompts.tools == ["delete_file"]
    await run(toolset, ("delete_file", {"path": "/tmp/b"}))
    assert [request.tool_args for request in prompts.seen] == [{"path": "/tmp/a"}, {"path": "/tmp/b"}]
    assert files.ran == ["delete_file /tmp/a", "delete_file /tmp/a", "delete_file /tmp/b"]
    assert len(toolset._memory) == 2


async def test_without_remember_every_call_is_asked() -> None:
    files, prompts = Files(), Prompts()
    toolset = ApprovalToolset(inner=files.toolset, approval_callback=prompts.sync)
    await run(toolset, DELETE)
    await run(toolset, DELETE)
    assert prompts.tools == ["delete_file", "delete_file"]
    assert len(toolset._memory) == 0


async def test_a_remembered_refusal_asks_again() -> None:
    files = Files()
    prompts = Prompts(ApprovalDecision(approved=False, note="no", remember="session"))
    toolset = ApprovalToolset(inner=files.toolset, approval_callback=prompts.sync)
    with pytest.raises(PermissionError):
        await run(toolset, DELETE)
    assert await run(toolset, DELETE) == "deleted /tmp/a"
    assert prompts.tools == ["delete_file", "delete_file"]


async def test_the_toolset_shares_the_controllers_memory() -> None:
    """The documented `memory=controller.memory` pattern (0.8.0 silently replaced the empty memory)."""
    files, prompts = Files(), Prompts(ApprovalDecision(approved=True, remember="session"))
    controller = ApprovalController(mode="interactive", approval_callback=prompts.sync)
    toolset = ApprovalToolset(
        inner=files.toolset, approval_callback=controller.approval_callback, memory=controller.memory
    )
    assert toolset._memory is controller.memory
    await run(toolset, DELETE)
    request = ApprovalRequest(tool_name="delete_file", tool_args={"path": "/tmp/a"}, description="")
    assert controller.is_session_approved(request)
    controller.clear_session_approvals()
    await run(toolset, DELETE)
    assert prompts.tools == ["delete_file", "delete_file"]


def test_memory_keys_on_tool_and_sorted_args() -> None:
    memory = ApprovalMemory()
    remembered = ApprovalDecision(approved=True, remember="session")
    memory.store("write", {"b": 2, "a": 1}, remembered)
    memory.store("write", {"a": 9}, ApprovalDecision(approved=True))
    assert memory.lookup("write", {"a": 1, "b": 2}) == remembered
    assert memory.lookup("read", {"a": 1, "b": 2}) is None
    assert memory.lookup("write", {"a": 9}) is None
    assert len(memory) == 1
    assert memory.list_approvals() == [("write", {"a": 1, "b": 2}, remembered)]
    memory.clear()
    assert len(memory) == 0 and memory.list_approvals() == []


# --- policy: config, SupportsNeedsApproval, SupportsApprovalDescription ----------------------------------


async def test_config_pre_approves_listed_tools_and_asks_for_the_rest() -> None:
    files, prompts = Files(), Prompts()
    toolset = ApprovalToolset(
        inner=files.toolset, approval_callback=prompts.sync, config={"get_time": {"pre_approved": True}}
    )
    assert await run(toolset, ("get_time", {}), DELETE) == "noon | deleted /tmp/a"
    assert prompts.tools == ["delete_file"]


class GuardedFiles(FunctionToolset[None]):
    """A toolset that decides its own approvals from the arguments and phrases its own prompts."""

    def needs_approval(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any]) -> ApprovalResult:
        if tool_args.get("path", "").startswith("/etc"):
            return ApprovalResult.blocked("System files are off limits")
        if name == "get_time":
            return ApprovalResult.pre_approved()
        return ApprovalResult.needs_approval()

    def get_approval_description(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any]) -> str:
        return f"Execute: {name} on {tool_args['path']}"


def guarded_files(ran: list[str]) -> GuardedFiles:
    toolset = GuardedFiles()

    @toolset.tool_plain
    def delete_file(path: str) -> str:
        ran.append(path)
        return f"deleted {path}"

    @toolset.tool_plain
    def get_time() -> str:
        return "noon"

    return toolset


async def test_a_blocked_call_raises_its_reason_without_asking() -> None:
    ran: list[str] = []
    prompts = Prompts()
    inner = guarded_files(ran)
    assert isinstance(inner, SupportsNeedsApproval) and isinstance(inner, SupportsApprovalDescription)
    # The inner toolset's own policy wins over config.
    toolset = ApprovalToolset(
        inner=inner, approval_callback=prompts.sync, config={"delete_file": {"pre_approved": True}}
    )
    with pytest.raises(PermissionError, match=r"^System files are off limits$"):
        await run(toolset, ("delete_file", {"path": "/etc/passwd"}))
    assert ran == [] and prompts.seen == []


async def test_the_inner_toolset_pre_approves_and_describes() -> None:
    ran: list[str] = []
    prompts = Prompts()
    toolset = ApprovalToolset(inner=guarded_files(ran), approval_callback=prompts.async_)
    assert await run(toolset, ("get_time", {}), DELETE) == "noon | deleted /tmp/a"
    assert [request.description for request in prompts.seen] == ["Execute: delete_file on /tmp/a"]


def test_plain_toolsets_do_not_satisfy_the_protocols() -> None:
    assert not isinstance(FunctionToolset(), SupportsNeedsApproval)
    assert not isinstance(FunctionToolset(), SupportsApprovalDescription)


# --- the controller --------------------------------------------------------------------------------------


def request_for(tool: str = "delete_file", **args: Any) -> ApprovalRequest:
    return ApprovalRequest(tool_name=tool, tool_args=args, description=tool)


@pytest.mark.parametrize("kind", KINDS)
async def test_approve_all_and_strict_bypass_the_callback(kind: str) -> None:
    prompts = Prompts()
    approving = ApprovalController(mode="approve_all", approval_callback=prompts.callback(kind))
    strict = ApprovalController(mode="strict", approval_callback=prompts.callback(kind))
    refusal = ApprovalDecision(approved=False, note="Strict mode: delete_file requires approval")
    assert await approving.request_approval(request_for()) == ApprovalDecision(approved=True)
    assert approving.request_approval_sync(request_for()) == ApprovalDecision(approved=True)
    assert await strict.request_approval(request_for()) == refusal
    assert strict.request_approval_sync(request_for()) == refusal
    assert prompts.seen == []


async def test_a_given_callback_wins_over_the_mode_as_the_toolset_callback() -> None:
    """0.8.0's `approval_callback` property returns the given callback whatever the mode."""
    prompts = Prompts()
    assert ApprovalController(mode="strict", approval_callback=prompts.sync).approval_callback == prompts.sync


async def test_the_modes_default_callbacks_drive_the_toolset() -> None:
    files = Files()
    approving = ApprovalController(mode="approve_all")
    toolset = ApprovalToolset(
        inner=files.toolset, approval_callback=approving.approval_callback, memory=approving.memory
    )
    assert await run(toolset, DELETE) == "deleted /tmp/a"
    strict = ApprovalController(mode="strict")
    toolset = ApprovalToolset(inner=files.toolset, approval_callback=strict.approval_callback)
    with pytest.raises(PermissionError, match=r"^User denied delete_file: Strict mode: delete_file requires"):
        await run(toolset, DELETE)
    assert files.ran == ["delete_file /tmp/a"]


def test_interactive_without_a_callback_has_none_to_give() -> None:
    with pytest.raises(RuntimeError, match="No approval_callback set for interactive mode"):
        _ = ApprovalController().approval_callback


@pytest.mark.parametrize("kind", KINDS)
async def test_request_approval_remembers_session_approvals(kind: str) -> None:
    prompts = Prompts(ApprovalDecision(approved=True, remember="session"))
    controller = ApprovalController(approval_callback=prompts.callback(kind))
    request = request_for(path="/tmp/a")
    assert not controller.is_session_approved(request)
    first = await controller.request_approval(request)
    assert await controller.request_approval(request) == first
    assert controller.is_session_approved(request) and len(prompts.seen) == 1
    await controller.request_approval(request_for(path="/tmp/b"))
    assert len(prompts.seen) == 2


def test_request_approval_sync_remembers_approvals_but_not_refusals() -> None:
    prompts = Prompts(
        ApprovalDecision(approved=False, remember="session"),
        ApprovalDecision(approved=True, remember="session"),
    )
    controller = ApprovalController(approval_callback=prompts.sync)
    assert not controller.request_approval_sync(request_for()).approved
    assert controller.request_approval_sync(request_for()).approved
    assert controller.request_approval_sync(request_for()).approved
    assert len(prompts.seen) == 2 and len(controller.memory) == 1


async def test_request_approval_without_a_callback() -> None:
    with pytest.raises(RuntimeError, match="No approval_callback provided for interactive mode"):
        await ApprovalController().request_approval(request_for())
    with pytest.raises(NotImplementedError, match="No approval_callback provided for interactive mode"):
        ApprovalController().request_approval_sync(request_for())


class AsyncCallable:
    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision(approved=True)


def test_request_approval_sync_refuses_async_callbacks() -> None:
    prompts = Prompts()
    for callback in (prompts.async_, AsyncCallable()):
        with pytest.raises(TypeError, match=r"Use request_approval\(\) for async callbacks"):
            ApprovalController(approval_callback=callback).request_approval_sync(request_for())
    assert prompts.seen == []


def test_request_approval_sync_refuses_a_plain_function_returning_a_coroutine() -> None:
    made: list[Coroutine[Any, Any, ApprovalDecision]] = []

    def sneaky(request: ApprovalRequest) -> Awaitable[ApprovalDecision]:
        made.append(Prompts().async_(request))
        return made[0]

    with pytest.raises(TypeError, match=r"requires a sync callback"):
        ApprovalController(approval_callback=sneaky).request_approval_sync(request_for())
    assert inspect.getcoroutinestate(made[0]) == inspect.CORO_CLOSED


async def test_request_approval_awaits_a_plain_function_returning_a_coroutine() -> None:
    def deferred(request: ApprovalRequest) -> Awaitable[ApprovalDecision]:
        return Prompts().async_(request)

    assert (await ApprovalController(approval_callback=deferred).request_approval(request_for())).approved


# --- cancellation and timeouts ---------------------------------------------------------------------------


async def test_cancelling_the_run_cancels_the_async_callback() -> None:
    files, asked, cancelled = Files(), asyncio.Event(), asyncio.Event()

    async def waits_for_a_person(request: ApprovalRequest) -> ApprovalDecision:
        asked.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    toolset = ApprovalToolset(inner=files.toolset, approval_callback=waits_for_a_person)
    task = asyncio.create_task(run(toolset, DELETE))
    await asyncio.wait_for(asked.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set() and files.ran == []


async def test_a_timeout_is_the_callbacks_own_and_propagates() -> None:
    files = Files()

    async def slow_person(request: ApprovalRequest) -> ApprovalDecision:
        async with asyncio.timeout(0.01):
            await asyncio.sleep(10)
        return ApprovalDecision(approved=True)

    toolset = ApprovalToolset(inner=files.toolset, approval_callback=slow_person)
    with pytest.raises(TimeoutError):
        await run(toolset, DELETE)
    assert files.ran == []


# --- the types -------------------------------------------------------------------------------------------


def test_approval_result_constructors_and_predicates() -> None:
    blocked, pre, needs = (
        ApprovalResult.blocked("no"),
        ApprovalResult.pre_approved(),
        ApprovalResult.needs_approval(),
    )
    assert (blocked.status, blocked.block_reason) == ("blocked", "no")
    assert [(r.is_blocked, r.is_pre_approved, r.is_needs_approval) for r in (blocked, pre, needs)] == [
        (True, False, False),
        (False, True, False),
        (False, False, True),
    ]
    assert pre.block_reason is None and needs == ApprovalResult(status="needs_approval")
    with pytest.raises(dataclasses.FrozenInstanceError):
        blocked.status = "pre_approved"  # type: ignore[misc]


def test_decision_and_request_models() -> None:
    decision = ApprovalDecision(approved=True)
    assert (decision.note, decision.remember) == (None, "none")
    with pytest.raises(ValidationError):
        ApprovalDecision(approved=True, remember="forever")  # type: ignore[arg-type]
    request = ApprovalRequest(tool_name="t", tool_args={"a": 1}, description="t(a=1)")
    assert request.model_dump() == {"tool_name": "t", "tool_args": {"a": 1}, "description": "t(a=1)"}


# --- the toolset is a pydantic-ai WrapperToolset -------------------------------------------------------


def test_the_toolset_wraps_and_forwards_to_its_inner_toolset() -> None:
    files = Files(id="files")
    toolset = ApprovalToolset(files.toolset, Prompts().sync)
    assert isinstance(toolset, WrapperToolset)
    assert toolset.wrapped is toolset.inner is toolset._inner is files.toolset
    assert toolset.id == "files"
    assert toolset.tools is files.toolset.tools  # forwarded to the FunctionToolset
    with pytest.raises(AttributeError):
        _ = toolset.no_such_attribute
    assert toolset != ApprovalToolset(files.toolset, Prompts().sync)
    assert {toolset: 1}[toolset] == 1


async def test_visit_and_replace_keeps_callback_memory_and_config() -> None:
    files, prompts = Files(), Prompts()
    toolset = ApprovalToolset(files.toolset, prompts.sync, config={"get_time": {"pre_approved": True}})
    replaced = toolset.visit_and_replace(lambda leaf: leaf.prefixed("fs"))
    assert isinstance(replaced, ApprovalToolset) and replaced is not toolset
    assert (replaced._approval_callback, replaced._memory, replaced.config) == (
        toolset._approval_callback,
        toolset._memory,
        toolset.config,
    )
    assert await run(replaced, ("fs_get_time", {}), ("fs_delete_file", {"path": "/x"})) == "noon | deleted /x"
    # The approval layer sits above the prefix, so it sees (and is configured by) the prefixed names.
    assert prompts.tools == ["fs_get_time", "fs_delete_file"]


async def test_per_run_copies_of_the_inner_toolset_share_the_session_memory() -> None:
    files, prompts = Files(), Prompts(ApprovalDecision(approved=True, remember="session"))
    toolset = ApprovalToolset(DynamicToolset(lambda ctx: files.toolset), prompts.sync)
    await run(toolset, DELETE)
    await run(toolset, DELETE)
    assert prompts.tools == ["delete_file"] and files.ran == ["delete_file /tmp/a"] * 2


async def test_instructions_and_prefixing_reach_through_the_toolset() -> None:
    files, prompts = Files(instructions="Paths are absolute."), Prompts()
    seen: list[str | None] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info.instructions)
        return ModelResponse(parts=[TextPart("ok")])

    toolset = ApprovalToolset(files.toolset, prompts.sync).prefixed("fs")
    await Agent(FunctionModel(respond), toolsets=[toolset]).run("hi")
    assert seen == ["Paths are absolute."]


# --- the original library's documented usage, adapted only by its import -------------------------------


async def test_the_0_8_0_package_docstring_example(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = iter(["s"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    files = Files()
    my_toolset = files.toolset.renamed({"safe_tool": "get_time", "write_file": "delete_file"})

    # --- from the 0.8.0 `__init__` docstring, with `pydantic_ai_blocking_approval` -> `signoff.pydantic_ai`
    from pydantic_ai import Agent

    from signoff.pydantic_ai import (
        ApprovalController,
        ApprovalDecision,
        ApprovalRequest,
        ApprovalToolset,
    )

    # Create a callback for interactive approval
    def my_approval_callback(request: ApprovalRequest) -> ApprovalDecision:
        print(f"Approve {request.tool_name}? {request.description}")
        response = input("[y/n/s(ession)]: ")
        if response == "s":
            return ApprovalDecision(approved=True, remember="session")
        return ApprovalDecision(approved=response.lower() == "y")

    # Wrap your toolset with config-based approval
    controller = ApprovalController(mode="interactive", approval_callback=my_approval_callback)
    approved_toolset = ApprovalToolset(
        inner=my_toolset,
        approval_callback=controller.approval_callback,
        memory=controller.memory,
        config={
            "safe_tool": {"pre_approved": True},
            # All other tools require approval (secure by default)
        },
    )

    # Use with PydanticAI agent
    agent = Agent(calling(("safe_tool", {}), ("write_file", {"path": "/tmp/a"})), toolsets=[approved_toolset])
    # --- end of the example

    for _ in range(2):
        assert (await agent.run("go")).output == "noon | deleted /tmp/a"
    assert capsys.readouterr().out == "Approve write_file? write_file(path='/tmp/a')\n"
    assert controller.is_session_approved(
        ApprovalRequest(tool_name="write_file", tool_args={"path": "/tmp/a"}, description="")
    )

    # "For testing, use approve_all or strict modes"
    assert ApprovalController(mode="approve_all").request_approval_sync(request_for()).approved
    assert not ApprovalController(mode="strict").request_approval_sync(request_for()).approved


async def test_the_seed_example_test_case() -> None:
    """The spec's own example, with its `# ... test toolset with controller` filled in."""
    approvals = []

    async def async_callback(request: ApprovalRequest) -> ApprovalDecision:
        await asyncio.sleep(0.01)  # Simulate network delay
        approvals.append(request.tool_name)
        return ApprovalDecision(approved=True)

    controller = ApprovalController(mode="interactive", approval_callback=async_callback)
    inner: FunctionToolset[None] = FunctionToolset()

    @inner.tool_plain
    def my_tool() -> str:
        return "done"

    toolset = ApprovalToolset(
        inner=inner, approval_callback=controller.approval_callback, memory=controller.memory
    )
    assert await run(toolset, ("my_tool", {})) == "done"
    assert "my_tool" in approvals


# --- the gate underneath: 0.8.0 code gets signoff's records ----------------------------------------------


async def test_a_ledger_records_every_asked_call_as_an_approval_with_its_audit(tmp_path: Any) -> None:
    """`ledger=` is the one addition: each asked call becomes an approval in a real SQLite ledger, its
    decision audited and proven, a remembered one a session grant, and `clear()` revokes that grant."""
    from signoff.ledger import evidence
    from signoff.ledger.sqlite import SqliteLedger

    async with SqliteLedger(tmp_path / "compat.db") as ledger:
        files = Files()
        prompts = Prompts(
            ApprovalDecision(approved=True, remember="session"),
            ApprovalDecision(approved=False, note="not that one"),
        )
        controller = ApprovalController(approval_callback=prompts.sync, ledger=ledger)
        toolset = ApprovalToolset(
            inner=files.toolset, approval_callback=controller.approval_callback, memory=controller.memory
        )
        await run(toolset, DELETE)
        await run(toolset, DELETE)
        with pytest.raises(PermissionError, match="not that one"):
            await run(toolset, ("delete_file", {"path": "/etc/passwd"}))

        approvals = await ledger.approvals.query()
        assert [(a.call.tool, a.call.args, str(a.state)) for a in approvals] == [
            ("delete_file", {"path": "/tmp/a"}, "consumed"),
            ("delete_file", {"path": "/etc/passwd"}, "denied"),
        ]
        assert approvals[0].description == "delete_file(path='/tmp/a')"
        session = controller.memory.session
        assert {a.chat_id for a in approvals} == {session}
        [grant] = await ledger.grants.query(chat_id=session)
        assert grant.tool == "delete_file"

        controller.clear_session_approvals()
        await run(toolset, DELETE)
        assert prompts.tools == ["delete_file", "delete_file", "delete_file"]
        assert await ledger.grants.query(chat_id=session) == []
        proof = await evidence.verify(ledger)
        assert proof.ok, proof.problems
        assert proof.count >= 6
