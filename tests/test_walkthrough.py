"""The demo walkthrough as a person runs it: one terminal waits, a second one decides, the tool runs once."""

from __future__ import annotations

import os
import pwd
import re
import subprocess
from pathlib import Path

import pytest

from signoff.core.opening import open_approval
from tests.conftest import SIGNOFF


def run_walkthrough(env: dict[str, str], decide: list[str]) -> str:
    demo = subprocess.Popen(
        [SIGNOFF, "walkthrough"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert demo.stdout is not None
    seen = []
    for line in demo.stdout:
        seen.append(line)
        if match := re.search(r"signoff approvals approve (apr_[\w-]+)", line):
            break
    else:
        raise AssertionError("".join(seen))
    second_terminal = subprocess.run(
        [SIGNOFF, "approvals", *decide, match.group(1)], env=env, capture_output=True, text=True, timeout=30
    )
    assert second_terminal.returncode == 0, second_terminal.stderr
    rest, _ = demo.communicate(timeout=30)
    assert demo.returncode == 0
    return "".join(seen) + rest


def test_approve_from_a_second_terminal_runs_the_tool_once(cli_env: dict[str, str]) -> None:
    output = run_walkthrough(cli_env, ["approve"])
    assert "'success': True" in output and "'balance': 950" in output
    assert "process_payment ran 1 time(s)" in output


def test_deny_from_a_second_terminal_tells_the_agent_why(cli_env: dict[str, str]) -> None:
    output = " ".join(run_walkthrough(cli_env, ["deny", "--reason", "not this month"]).split())
    operator = pwd.getpwuid(os.getuid()).pw_name  # the CLI's: the process's user, whatever $USER says
    assert f"denied by {operator} (admin): not this month" in output
    assert "process_payment ran 0 time(s)" in output


def test_the_readme_demo_command_serves_the_demo() -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    assert "scripts/demo" in readme and "scripts/test" in readme
    script = (Path(__file__).parent.parent / "scripts" / "demo").read_text()
    assert "signoff demo" in script


@pytest.mark.parametrize("answer", ["d\nnot today\n", "a\n", "s\n", "i\n"])
async def test_terminal_approver_reads_answers_from_its_stream(answer: str, tmp_path: Path) -> None:
    import io
    import os

    from rich.console import Console

    from signoff.approvers import TerminalApprover
    from signoff.core.audit import AuditKey
    from signoff.core.call import ToolCall

    read, write = os.pipe()
    os.write(write, answer.encode())
    os.close(write)
    approval, _ = open_approval(
        ToolCall("c", "process_payment", {"amount": 5}), chat_id="chat", description="Pay 5", rule="r", now=0,
        key=AuditKey.generate(),
    )  # fmt: skip
    screen = io.StringIO()
    with os.fdopen(read) as stream:
        terminal = TerminalApprover(
            console=Console(file=screen, width=100), stream=stream, by="terminal:test"
        )
        decision = await terminal(approval)
    assert "process_payment" in screen.getvalue() and "amount" in screen.getvalue()
    if answer.startswith("d"):
        assert decision is not None and decision.verdict == "deny" and decision.reason == "not today"
    elif answer.startswith("a"):
        assert decision is not None and decision.verdict == "approve" and decision.remember == "once"
    elif answer.startswith("s"):
        assert decision is not None and decision.remember == "session"
    else:
        assert decision is None
