"""Rules over paths see where a file really is: relative paths against the call's `cwd`, `~` as the home,
and `..` and symlinks resolved on a real filesystem, so neither leads out of a directory a rule names."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from signoff.core.call import ToolCall
from signoff.core.paths import Place, inside
from signoff.core.policy import Policy
from signoff.core.values import EvalError
from tests.conftest import ROOT

EXAMPLE = (ROOT / "docs" / "examples" / "claude-code-policy.toml").read_text()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """home/.ssh, home/repo/{src,tests}, a symlink in src that leads to ~/.ssh, one to the repo's root."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "authorized_keys").write_text("")
    repo = home / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "src" / "app.py").write_text("")
    (repo / "src" / "keys").symlink_to(home / ".ssh")
    (repo / "src" / "up").symlink_to(repo)
    (repo / "srcs").mkdir()
    return home


def policy_for(home: Path) -> Policy:
    return Policy.from_toml(EXAMPLE, source="example", resolve=os.path.realpath, home=str(home))


def edit(path: str, cwd: Path | None, tool: str = "Edit") -> ToolCall:
    context = {} if cwd is None else {"cwd": str(cwd)}
    return ToolCall("c1", tool, {"file_path": path, "old_string": "a", "new_string": "b"}, context)


@pytest.mark.parametrize(
    ("path", "action"),
    [
        ("src/app.py", "allow"),
        ("src/new/module.py", "allow"),  # not there yet: resolved as far as it exists
        ("./tests/../src/app.py", "allow"),
        ("{repo}/src/app.py", "allow"),
        ("README.md", "ask"),
        ("srcs/x.py", "ask"),  # beside src, not under it
        ("src/../README.md", "ask"),
        ("src/../../.ssh/authorized_keys", "deny"),
        ("src/keys/authorized_keys", "deny"),  # a symlink out of src, into ~/.ssh
        ("src/keys/new_key", "deny"),
        ("src/up/README.md", "ask"),  # a symlink out of src, to the repo's root
        ("~/.ssh/authorized_keys", "deny"),
        ("~/repo/src/app.py", "allow"),
        ("~other/.ssh/authorized_keys", "ask"),
        ("", "ask"),
    ],
)
def test_edits_are_judged_where_the_file_really_is(tree: Path, path: str, action: str) -> None:
    repo = tree / "repo"
    call = edit(path.replace("{repo}", str(repo)), repo)
    assert policy_for(tree).evaluate(call).action == action
    assert policy_for(tree).evaluate(edit(call.args["file_path"], repo, "Write")).action == action


def test_a_shell_write_through_a_symlink_is_a_write_where_it_leads(tree: Path) -> None:
    policy = policy_for(tree)
    call = ToolCall(
        "c1", "Bash", {"command": "echo key >> src/keys/authorized_keys"}, {"cwd": str(tree / "repo")}
    )
    assert policy.evaluate(call).action == "deny"


def test_a_relative_path_without_a_cwd_asks(tree: Path) -> None:
    ruling = policy_for(tree).evaluate(edit("src/app.py", None))
    assert ruling.action == "ask" and "carries no context.cwd" in ruling.reason


def test_without_a_resolver_a_rule_over_paths_asks(tree: Path) -> None:
    """A symlink can lead anywhere: a policy that cannot resolve one never allows by a path."""
    blind = Policy.from_toml(EXAMPLE, home=str(tree))
    ruling = blind.evaluate(edit("src/app.py", tree / "repo"))
    assert ruling.action == "ask" and "resolve" in ruling.reason


def test_a_home_the_call_carries_wins_over_the_policys(tree: Path, tmp_path: Path) -> None:
    call = ToolCall("c1", "Write", {"file_path": "~/.ssh/x"}, {"cwd": "/", "home": str(tree)})
    assert Policy.from_toml(EXAMPLE, resolve=os.path.realpath).evaluate(call).action == "deny"
    homeless = ToolCall("c1", "Write", {"file_path": "~/.ssh/x"}, {"cwd": "/"})
    assert Policy.from_toml(EXAMPLE, resolve=os.path.realpath).evaluate(homeless).action == "ask"


@pytest.mark.parametrize("cwd", ["relative/dir", "", "/a\0b"])
def test_a_context_that_is_not_an_absolute_path_cannot_place_a_file(cwd: str) -> None:
    with pytest.raises(EvalError, match="absolute path"):
        Place({"cwd": cwd}, None, os.path.realpath).locate("x")


def test_inside_compares_whole_components() -> None:
    assert inside("/repo/src", "/repo/src") and inside("/repo/src/a", "/repo/src/")
    assert not inside("/repo/srcs/a", "/repo/src") and not inside("/repo", "/repo/src")
    assert inside("/anything", "/")


def test_a_file_tool_without_a_file_path_asks(tree: Path) -> None:
    call = ToolCall("c1", "Edit", {"path": "src/app.py"}, {"cwd": str(tree / "repo")})
    assert "file_path is missing" in policy_for(tree).evaluate(call).reason


def test_conditions_read_where_the_call_runs_as_context() -> None:
    policy = Policy.from_toml(
        '[[tools.Bash]]\naction = "allow"\nwhen = \'context.permission_mode == "plan"\'\n'
        '[[tools.Bash]]\naction = "ask"\n'
    )
    planning = ToolCall("c1", "Bash", {"command": "make"}, {"cwd": "/r", "permission_mode": "plan"})
    assert policy.evaluate(planning).action == "allow"
    assert policy.evaluate(planning.with_args({"command": "make"})).action == "allow"  # an edit keeps it
    other = ToolCall("c1", "Bash", {"command": "make"}, {"permission_mode": "acceptEdits"})
    assert policy.evaluate(other).action == "ask"
    clash = ToolCall("c1", "Bash", {"command": "make", "context": {"permission_mode": "plan"}}, {})
    ruling = policy.evaluate(clash)
    assert ruling.action == "ask" and "can't tell" in ruling.reason


def test_a_policy_file_the_cli_reads_sees_this_filesystem(tree: Path, tmp_path: Path) -> None:
    """Every command that loads a policy file (`serve`, `hook claude-code --ledger`, an edit in
    `approvals approve`) reads it with this machine's resolver, so a rule over `paths` decides instead of
    asking, and a symlink out of `src/` is still caught."""
    from signoff.cli.common import read_policy

    written = tmp_path / "policy.toml"
    written.write_text(EXAMPLE)
    policy = read_policy(written)
    repo = tree / "repo"
    assert policy.evaluate(edit("src/app.py", repo)).action == "allow"
    assert policy.evaluate(edit("src/up/README.md", repo)).action == "ask"
