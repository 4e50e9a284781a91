"""Commands that run another command (`sudo rm …`, `env X=1 rm …`, `xargs rm`, `find -exec rm …`): which
words are their own options, and where the command they run begins.

Each wrapper's options are listed, those taking a value apart from flags, because `nice -n 10 rm` runs `rm`
while `nice -n` would otherwise look like it runs `10`. An option not listed is not guessed at: the call
is then asked about, since the command it runs cannot be told.
"""

from __future__ import annotations

from typing import Final

import msgspec

Word = tuple[str, bool]


class Spec(msgspec.Struct, frozen=True, kw_only=True):
    """How one wrapper is written. `transparent`: it changes nothing a policy cares about (`time`,
    `nice`), so only the command it runs is judged; otherwise it is judged too (`sudo`, `xargs`)."""

    flags: frozenset[str] = frozenset()
    values: frozenset[str] = frozenset()
    """Options followed by a value, as the next word (`-u root`) or joined (`-uroot`, `--user=root`)."""
    attached: frozenset[str] = frozenset()
    """Options whose value, if any, is joined (`xargs -i{}`)."""
    stops: frozenset[str] = frozenset()
    """Options after which it runs no command (`command -v`, `sudo -l`)."""
    positional: int = 0
    """Words before the command that are not options (`timeout 5 …`)."""
    assignments: bool = False
    numeric: bool = False
    """Whether `-10` is an option (`nice -10 …`)."""
    transparent: bool = True


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


SHELLS: Final = _set("sh bash dash zsh ksh mksh ash")
SPECS: Final[dict[str, Spec]] = {
    "env": Spec(
        flags=_set("-i -0 - --ignore-environment --null --debug -v"),
        values=_set("-u --unset -C --chdir"),
        assignments=True,
    ),
    "sudo": Spec(
        flags=_set(
            "-A -b -E -H -i -k -n -P -s -S -B --askpass --background --preserve-env --set-home "
            "--login --reset-timestamp --non-interactive --preserve-groups --shell --stdin --bell"
        ),
        values=_set(
            "-u -g -h -p -C -D -r -t -U -T --user --group --host --prompt --close-from --chdir "
            "--role --type --other-user --command-timeout"
        ),
        stops=_set("-l -v -K -V -e --list --validate --remove-timestamp --version --edit --help"),
        assignments=True,
        transparent=False,
    ),
    "doas": Spec(flags=_set("-n -s"), values=_set("-u -C -a"), transparent=False),
    "nice": Spec(values=_set("-n --adjustment"), numeric=True),
    "nohup": Spec(),
    "time": Spec(flags=_set("-p -v --portability --verbose"), values=_set("-f -o --format --output")),
    "timeout": Spec(
        flags=_set("-v --verbose --preserve-status --foreground"),
        values=_set("-s -k --signal --kill-after"),
        positional=1,
    ),
    "command": Spec(flags=_set("-p"), stops=_set("-v -V")),
    "builtin": Spec(),
    "exec": Spec(flags=_set("-c -l"), values=_set("-a")),
    "stdbuf": Spec(values=_set("-i -o -e --input --output --error")),
    "xargs": Spec(
        flags=_set("-0 -r -t -p -x -o --null --no-run-if-empty --verbose --interactive --exit --open-tty"),
        values=_set(
            "-I -n -L -P -s -d -E -a --arg-file --delimiter --max-args --max-lines --max-procs "
            "--max-chars --eof --process-slot-var"
        ),
        attached=_set("-i -l -e --replace"),
        transparent=False,
    ),
    "find": Spec(transparent=False),  # its commands follow -exec, -execdir, -ok and -okdir
}
_FIND_RUNS: Final = _set("-exec -execdir -ok -okdir")


def unwrap(name: str, spec: Spec, words: list[Word]) -> tuple[list[list[Word]], str | None]:
    """The commands `name` runs with its arguments `words`, and why they cannot be told (None if they can)."""
    if name == "find":
        return _find(words), None
    index = 0
    while index < len(words):
        word, known = words[index]
        if not known:
            return [], f"{name}'s arguments are computed by the shell"
        if word == "--":
            index += 1
            break
        if (
            spec.assignments
            and not word.startswith("-")
            and word.partition("=")[0].isidentifier()
            and "=" in word
        ):
            index += 1
            continue
        if not word.startswith("-") or (word == "-" and word not in spec.flags):
            break
        step = _option(spec, word)
        if step is None:
            return [], None
        if step == 0:
            return [], f"{name} {word} is an option the policy does not know"
        index += step
    index += spec.positional
    return ([words[index:]] if index < len(words) else []), None


def _option(spec: Spec, word: str) -> int | None:
    """How many words the option `word` takes up (0: unknown), or None when it means no command runs."""
    if word.startswith("--") or word == "-":
        option, joined, _ = word.partition("=")
        if option in spec.stops:
            return None
        if option in spec.values:
            return 1 if joined else 2
        return 1 if option in spec.flags or option in spec.attached else 0
    if spec.numeric and word[1:].isdigit():
        return 1
    for position in range(1, len(word)):
        option = "-" + word[position]
        if option in spec.stops:
            return None
        if option in spec.values:
            return 1 if position + 1 < len(word) else 2
        if option in spec.attached:
            return 1
        if option not in spec.flags:
            return 0
    return 1


def _find(words: list[Word]) -> list[list[Word]]:
    commands: list[list[Word]] = []
    current: list[Word] | None = None
    for word in words:
        if current is None:
            if word[0] in _FIND_RUNS:
                current = []
        elif word[0] in (";", "+") and word[1]:
            commands.append(current)
            current = None
        else:
            current.append(word)
    if current:
        commands.append(current)
    return [command for command in commands if command]
