"""A Bash call is judged by its worst simple command, as tree-sitter's Bash grammar reads it: quoting,
escapes, heredocs, wrappers, nested shells and comments neither hide a denied part nor invent one, and a
command the policy cannot read is asked about, never allowed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from signoff.core.call import ToolCall
from signoff.core.errors import PolicyError
from signoff.core.policy import Policy, rule
from signoff.core.shell import read
from tests.conftest import ROOT

EXAMPLE = ROOT / "docs" / "examples" / "claude-code-policy.toml"
HOME = "/home/agent"
CWD = "/home/agent/repo"


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy.from_toml(EXAMPLE.read_text(), source=EXAMPLE.name, resolve=os.path.realpath, home=HOME)


def bash(command: str) -> ToolCall:
    return ToolCall("c1", "Bash", {"command": command}, {"cwd": CWD})


TABLE = [
    # plain parts
    ("git status", "allow"),
    ("git diff --stat HEAD~1", "allow"),
    ("ls -la src", "allow"),
    ("git push", "ask"),
    ("rm -rf /", "deny"),
    ("rm -rf /*", "deny"),
    ("rm -rf /tmp/build", "ask"),
    # compounds: the worst part decides
    ("git status && rm -rf /", "deny"),
    ("git status; rm -rf /", "deny"),
    ("ls | rm -rf /", "deny"),
    ("false || rm -fr /", "deny"),
    ("git status && git diff", "allow"),
    ("git status && git push", "ask"),
    ("(cd / && rm -rf /)", "deny"),
    ("{ ls; rm -rf /; }", "deny"),
    ("if true; then rm -rf /; fi", "deny"),
    ("for f in a; do rm -rf /; done", "deny"),
    ("ls & rm -rf / &", "deny"),
    ("! rm -rf /", "deny"),
    ("f() { rm -rf /; }; f", "deny"),
    # substitutions
    ("ls $(rm -rf /)", "deny"),
    ("ls `rm -rf /`", "deny"),
    ('ls "$(rm -rf /)"', "deny"),
    ("diff <(ls) >(rm -rf /)", "deny"),
    ("export X=$(rm -rf /)", "deny"),
    ("ls $(git status)", "allow"),
    # quoting and escapes
    ('"rm" -rf "/"', "deny"),
    ("'r'm -rf '/'", "deny"),
    (r"r\m -rf /", "deny"),
    ("$'\\x72m' -rf /", "deny"),
    ("$'\\162m' -rf /", "deny"),
    ("git status 'a; rm -rf /'", "allow"),  # one argument, not a second command
    ('ls "; rm -rf /"', "allow"),
    (r"ls \; rm -rf /", "allow"),  # `ls` with the arguments `;`, `rm`, `-rf`, `/`
    ("echo 'unterminated", "ask"),
    # comments and line continuations
    ("git status # && rm -rf /", "allow"),
    ("git status \\\n  --short", "allow"),
    ("rm \\\n -rf /", "deny"),
    ("r\\\nm -rf /", "ask"),  # a continuation inside a word: the reader will not guess it
    ("git status &&\nrm -rf /", "deny"),
    # heredocs
    ("cat <<'EOF'\n$(rm -rf /)\nEOF", "ask"),  # quoted: the body is text; `cat` asks on its own
    ("git diff <<EOF\n$(rm -rf /)\nEOF", "deny"),  # unquoted: the substitution runs
    ("cat <<EOF | sh\nrm -rf /\nEOF", "ask"),  # sh reads a script the policy cannot read
    ("git diff <<< 'rm -rf /'", "allow"),
    # wrappers
    ("env X=1 rm -rf /", "deny"),
    ("X=1 rm -rf /", "deny"),
    ("env -i PATH=/bin rm -rf /", "deny"),
    ("env X=1 git status", "allow"),
    ("sudo rm -rf /", "deny"),
    ("sudo -u root -E rm -rf /", "deny"),
    ("sudo git status", "ask"),  # sudo is judged as well as what it runs
    ("/usr/bin/sudo rm -rf /", "deny"),
    ("ls | xargs rm -rf /", "deny"),
    ("ls | xargs -I{} rm -rf /", "deny"),
    ("ls | xargs -n 1 ls", "ask"),
    ("nice -n 10 rm -rf /", "deny"),
    ("time git status", "allow"),
    ("timeout -s KILL 5 rm -rf /", "deny"),
    ("nohup rm -rf / &", "deny"),
    ("command rm -rf /", "deny"),
    ("exec rm -rf /", "deny"),
    ("find . -name '*.pyc' -exec rm -rf / \\;", "deny"),
    ("sudo --weird-option rm -rf /", "ask"),  # an option it does not know: what runs can't be told
    # nested shells
    ("bash -c 'rm -rf /'", "deny"),
    ('sh -c "git status; rm -rf /"', "deny"),
    ("bash -lc 'sudo bash -c \"rm -rf /\"'", "deny"),
    ("bash -c 'git status'", "ask"),  # a shell is judged as well as its body
    ('bash -c "$CMD"', "ask"),
    ("bash script.sh", "ask"),
    # what the reader cannot see through
    ("eval 'git status'", "ask"),
    ("$CMD -rf /", "ask"),
    ("source ./env.sh", "ask"),
    ("git status $(", "ask"),
    ("ls )", "ask"),
    ("if true; then ls", "ask"),
    ("", "ask"),
    # writes by redirection
    ("echo x > ~/.ssh/authorized_keys", "deny"),
    ("echo x >> ~/.ssh/authorized_keys", "deny"),
    ("ls &> ~/.ssh/config", "deny"),
    ("git status > /home/agent/.ssh/known_hosts", "deny"),
    ("git diff | tee -a ~/.ssh/authorized_keys", "deny"),
    ("echo x > ~/.ssh/../.ssh/authorized_keys", "deny"),
    ("git status > status.txt", "ask"),
    ("git status 2>&1 >/dev/null", "allow"),
    ('echo x > "~/.ssh/k"', "ask"),  # quoted: a directory named ~ under the cwd, not the home
    ("echo x > $TARGET", "ask"),
    ("cd ~/.ssh && git status > authorized_keys", "ask"),  # the cwd moved: a relative write is not known
]


@pytest.mark.parametrize(("command", "action"), TABLE, ids=[repr(command)[:60] for command, _ in TABLE])
def test_each_command_is_judged_by_its_worst_part(policy: Policy, command: str, action: str) -> None:
    assert policy.evaluate(bash(command)).action == action


def test_a_denial_names_the_part_that_denied(policy: Policy) -> None:
    ruling = policy.evaluate(bash("git status && sudo rm -rf /"))
    assert ruling.rule == "Bash[0]" and ruling.reason.endswith("for `rm -rf /`")
    written = policy.evaluate(bash("echo x > ~/.ssh/authorized_keys"))
    assert written.rule == "Bash[1]" and "writing ~/.ssh/authorized_keys" in written.reason


def test_an_unreadable_command_says_why(policy: Policy) -> None:
    assert "does not parse at line 2" in policy.evaluate(bash("git status\nls (")).reason
    assert "eval runs text" in policy.evaluate(bash("eval ls")).reason
    assert "computes the command name" in policy.evaluate(bash("$CMD")).reason


@pytest.mark.parametrize("mode", ["approve_all", "strict"])
def test_an_unreadable_command_is_never_allowed_by_a_mode(mode: str) -> None:
    allow_all = Policy({"Bash": [rule("allow")]}, mode)  # type: ignore[arg-type]
    assert allow_all.evaluate(bash("git status")).action == "allow"
    for command in ("eval ls", "echo 'open", "$CMD"):
        assert allow_all.evaluate(bash(command)).action == "deny"


def test_a_command_that_is_not_a_string_asks(policy: Policy) -> None:
    assert policy.evaluate(ToolCall("c1", "Bash", {"command": ["rm", "-rf", "/"]})).action == "ask"
    assert policy.evaluate(ToolCall("c1", "Bash", {})).action == "ask"


def test_the_reader_gives_words_as_the_shell_passes_them() -> None:
    parts = read('git commit -m "fix: a\\"b" && FOO=1 env -u X nice -n 5 ls \'a b\' >> log 2>&1').parts
    assert [(p.kind, p.text) for p in parts] == [
        ("command", 'git commit -m fix: a"b'),
        ("command", "ls a b"),
        ("write", "log"),
    ]


def test_a_very_long_or_deeply_nested_command_asks(policy: Policy) -> None:
    assert policy.evaluate(bash("ls " + "a" * 70000)).action == "ask"
    nested = "ls"
    for _ in range(10):
        nested = "bash -c " + "'" + nested.replace("'", "'\\''") + "'"
    assert policy.evaluate(bash(nested)).action == "ask"
    chain = " && ".join(["git status"] * 3000)
    assert policy.evaluate(bash(chain)).action == "allow"
    assert policy.evaluate(bash(chain + " && rm -rf /")).action == "deny"


def test_a_tool_not_named_a_shell_is_not_read_as_one() -> None:
    plain = Policy({"Bash": [rule("allow")]}, shell=[])
    assert plain.evaluate(bash("eval ls")).action == "allow"
    with pytest.raises(PolicyError, match=r"Bash\[0\]\.commands: Bash is not a shell tool"):
        Policy({"Bash": [rule("allow", commands=["ls"])]}, shell=[])


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('commands = "git status"', "must be a list of globs"),
        ("commands = []", "must list from 1"),
        ('commands = ["git  status"]', "joined by one space"),
        ('commands = [" ls"]', "joined by one space"),
        ('commands = ["ls\\u0000"]', "control or invisible"),
        ("commands = [1]", "non-empty strings"),
        ('paths = ["src/*"]', "is a glob"),
        ('paths = ["~root/x"]', "another user's home"),
        ('commands = ["ls"]\npaths = ["src"]', "not both"),
        ('command = ["ls"]', "unknown key"),
    ],
)
def test_scopes_are_checked_when_the_policy_loads(entry: str, message: str) -> None:
    text = f'[[tools.Bash]]\naction = "allow"\n{entry}\n'
    with pytest.raises(PolicyError, match=message) as caught:
        Policy.from_toml(text, source="policy.toml")
    assert str(caught.value).startswith("policy.toml: ")


def test_the_example_policy_loads_and_covers_the_other_tools(policy: Policy, tmp_path: Path) -> None:
    assert policy.shell == frozenset({"Bash"})
    pay = policy.evaluate(
        ToolCall("c1", "mcp__payments__pay", {"amount": 5, "currency": "EUR", "recipient": "x"})
    )
    assert (pay.action, pay.authority.approvers) == ("ask", ("role:finance",))
    assert policy.evaluate(ToolCall("c1", "Read", {"file_path": "/etc/passwd"})).action == "allow"
    assert policy.evaluate(ToolCall("c1", "WebFetch", {"url": "https://example.com"})).action == "ask"
    assert policy.may_ask("Bash") and policy.may_ask("mcp__payments__refund") and not policy.may_ask("Read")


def test_a_regular_expression_runs_in_linear_time_and_is_checked_at_load() -> None:
    policy = Policy.from_toml(
        '[[tools.WebFetch]]\naction = "allow"\nwhen = \'matches(url, "^https://docs\\\\.python\\\\.org/")\'\n'
        '[[tools.Probe]]\naction = "deny"\nwhen = \'matches(text, "^(a+)+$")\'\n'
    )
    fetch = ToolCall("c1", "WebFetch", {"url": "https://docs.python.org/3/"})
    assert policy.evaluate(fetch).action == "allow"
    assert policy.evaluate(fetch.with_args({"url": "https://docs.python.org.evil/"})).action == "ask"
    # Catastrophic for a backtracking engine; RE2 answers at once.
    assert policy.evaluate(ToolCall("c1", "Probe", {"text": "a" * 5000 + "b"})).action == "ask"
    with pytest.raises(
        PolicyError, match=r"policy.toml: tools.X\[0\].when: bad regular expression.* column 14"
    ):
        Policy.from_toml(
            '[[tools.X]]\naction = "allow"\nwhen = \'matches(url, "(a")\'\n', source="policy.toml"
        )
