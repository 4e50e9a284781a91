"""A shell command as a policy reads it: every simple command it would run, and every file it would write.

A policy that allows `git status` must not allow `git status; rm -rf /`, so a Bash call is judged part by
part (see `core.scope`), and the parts come from a real parser, tree-sitter's Bash grammar, never from a
pattern over the text: quoting, escapes, heredocs, `$(…)` and line continuations all defeat patterns.

What the reader cannot see through it marks `opaque`, and the policy asks a person about it whatever the
rules say: a command that does not parse, a command name the shell computes (`$CMD`), `eval`, `source`, a
shell reading a script it was not given as `-c '…'`, a write to a computed path. The rest is unwrapped:
the bodies of `bash -c '…'` are read again, and `sudo`, `env`, `xargs`, `nice`, `time`, `timeout`,
`command`, `exec`, `find -exec` and the like give the command they run as a part of its own.
"""

from __future__ import annotations

import itertools
from typing import Final, Literal

import msgspec
import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from signoff.core.wrappers import SHELLS, SPECS, unwrap

_BASH: Final = Language(tree_sitter_bash.language())
MAX_COMMAND: Final = 65536
"""Characters; a longer command is asked about whole rather than read."""
MAX_NESTING: Final = 8
"""`bash -c` inside `bash -c`, this many deep, and no deeper."""

_WRITES: Final = frozenset({">", ">>", "&>", "&>>", ">|", "<>", ">&", "&>|"})
_DUPLICATES: Final = frozenset({">&", "<&"})
_DEVICES: Final = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_OPAQUE: Final = {
    "eval": "eval runs text as a command",
    "source": "source runs a script the policy cannot read",
    ".": ". runs a script the policy cannot read",
    "trap": "trap runs text as a command",
}
_MOVES: Final = frozenset({"cd", "pushd", "popd"})
_ANSI: Final = {
    "n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "v": "\v",
    "\\": "\\", "'": "'", '"': '"', "?": "?",
}  # fmt: skip

_DIGITS: Final = {0: "", 8: "01234567", 16: "0123456789abcdefABCDEF"}

Word = tuple[str, bool]
"""A word as the shell would pass it, and whether that is known (`False`: its source, such as `$HOME`)."""


class Part(msgspec.Struct, frozen=True, kw_only=True):
    """One thing a command does: run a simple command (`text` is its words joined by one space) or write
    a file (`text` is the path as written, `~` for the home directory only where the shell expands it)."""

    kind: Literal["command", "write"]
    text: str
    opaque: str | None = None
    """Why a person must read this part, whatever the rules say; None when the policy can judge it."""


class Script(msgspec.Struct, frozen=True, kw_only=True):
    """A shell command read: its parts in source order, and where it does not parse (None if it does)."""

    parts: tuple[Part, ...]
    unparsed: str | None = None


def read(command: str) -> Script:
    """The parts of `command`. A command that does not parse still gives the parts the parser found, so a
    `rm -rf /` beside a syntax error is denied; the error alone makes the whole call ask."""
    reader = _Reader()
    if len(command) > MAX_COMMAND:
        reader.fault(f"it is longer than {MAX_COMMAND} characters")
    else:
        reader.script(command, 0)
    parts = tuple(reader.parts) or (Part(kind="command", text=""),)
    if reader.moved:  # after a cd, a relative path means a directory the policy does not know
        why = "it writes to a relative path after changing directory"
        parts = tuple(_opaque(p, why) if p.kind == "write" and not _anchored(p.text) else p for p in parts)
    return Script(parts=parts, unparsed=reader.unparsed)


def _anchored(path: str) -> bool:
    return path.startswith("/") or path == "~" or path.startswith("~/")


def _opaque(part: Part, why: str) -> Part:
    return part if part.opaque else msgspec.structs.replace(part, opaque=why)


class _Reader:
    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.unparsed: str | None = None
        self.moved = False
        self.source = b""

    def fault(self, why: str) -> None:
        if self.unparsed is None:
            self.unparsed = why

    def script(self, text: str, depth: int) -> None:
        if depth > MAX_NESTING:
            self.fault(f"shells are nested more than {MAX_NESTING} deep")
            return
        outer = self.source
        self.source = text.encode()
        self.walk(Parser(_BASH).parse(self.source).root_node, depth)
        self.source = outer

    def walk(self, root: Node, depth: int) -> None:
        # Iterative: `a && b && …` nests one level per operator, and Python's stack is not a bound to trust.
        stack = [root]
        while stack:
            node = stack.pop()
            if node.is_error or node.is_missing:
                row, column = node.start_point
                what = "is missing" if node.is_missing else "does not parse"
                self.fault(f"{node.type if node.is_missing else 'the text'} {what} at line {row + 1}, "
                           f"column {column + 1}")  # fmt: skip
            if node.type == "command":
                self.command(node, depth)
            elif node.type == "file_redirect":
                self.redirect(node)
            elif node.type in ("declaration_command", "unset_command"):
                self.add([(self.text(node.children[0]), True), *self.words(node.children[1:])], depth)
            stack.extend(reversed(node.children))

    def text(self, node: Node) -> str:
        return self.source[node.start_byte : node.end_byte].decode(errors="replace")

    def words(self, nodes: list[Node]) -> list[Word]:
        words: list[Word] = []
        for node in nodes:
            if node.type.endswith("redirect") or node.type == "variable_assignment":
                continue
            value = literal(node) if node.type != "command_name" else literal(node.children[0])
            words.append((self.text(node), False) if value is None else (value, True))
        return words

    def command(self, node: Node, depth: int) -> None:
        children = node.children
        for before, after in itertools.pairwise(children):
            gap = self.source[before.end_byte : after.start_byte]
            if gap and not gap.replace(b"\\\n", b""):
                why = "a line continuation joins two words"
                self.parts.append(Part(kind="command", text=self.text(node), opaque=why))
                return
        self.add(self.words(children), depth)

    def add(self, words: list[Word], depth: int) -> None:
        """One simple command, and the commands it runs in turn (`sudo rm …`, `bash -c '…'`)."""
        if not words:
            return
        text = " ".join(word for word, _ in words)
        written, known = words[0]
        name = written.rsplit("/", 1)[-1]  # `/usr/bin/sudo` unwraps as `sudo` does
        if not known:
            self.parts.append(Part(kind="command", text=text, opaque="the shell computes the command name"))
            return
        if name in _OPAQUE:
            self.parts.append(Part(kind="command", text=text, opaque=_OPAQUE[name]))
            return
        self.moved = self.moved or name in _MOVES
        if name in SHELLS:
            self.shell(words, text, depth)
            return
        spec = SPECS.get(name)
        if spec is None:
            self.parts.append(Part(kind="command", text=text))
            if name == "tee":
                self.tee(words[1:])
            return
        inner, why = unwrap(name, spec, words[1:])
        if why is not None or not spec.transparent or not inner:
            self.parts.append(Part(kind="command", text=text, opaque=why))
        for command in inner:
            self.add(command, depth)

    def shell(self, words: list[Word], text: str, depth: int) -> None:
        body = None
        for index, (word, known) in enumerate(words[1:], start=1):
            if not known or not word.startswith("-") or word == "--":
                break
            if "c" in word[1:] and not word.startswith("--") and index + 1 < len(words):
                body = words[index + 1]
                break
        if body is None or not body[1]:
            why = "a shell runs a script the policy cannot read (only -c '…' is read)"
            self.parts.append(Part(kind="command", text=text, opaque=why))
            return
        self.parts.append(Part(kind="command", text=text))
        self.script(body[0], depth + 1)

    def tee(self, words: list[Word]) -> None:
        for word, known in words:
            if known and word.startswith("-") and word != "-":
                continue
            why = None if known else "it writes to a path the shell computes"
            self.parts.append(Part(kind="write", text=word, opaque=why))

    def redirect(self, node: Node) -> None:
        operator = next((child.type for child in node.children if child.type in _WRITES), None)
        target = node.child_by_field_name("destination")
        if operator is None or target is None or target.type == "process_substitution":
            return
        path = literal(target)
        if path is None:
            self.parts.append(
                Part(kind="write", text=self.text(target), opaque="it writes to a computed path")
            )
        elif not (operator in _DUPLICATES and (path.isdigit() or path == "-")) and path not in _DEVICES:
            self.parts.append(Part(kind="write", text=path))


def literal(node: Node) -> str | None:
    """The word `node` stands for, as the shell would pass it, or None where the shell computes it.

    An unquoted leading `~` stays `~` (the shell expands it); a quoted one is made `./~` (it does not)."""
    if node.type == "concatenation":
        pieces = [literal(child) for child in node.children]
        if any(piece is None for piece in pieces) or _braces(node):
            return None
        head = pieces[0] or ""
        if node.children[0].type != "word" and head.startswith("~"):
            head = "./" + head
        return head + "".join(piece or "" for piece in pieces[1:])
    raw = (node.text or b"").decode(errors="replace")
    if node.type == "word":
        return None if _braces(node) else _unescape(raw, "")
    if node.type == "number":
        return raw
    if node.type == "raw_string":
        return _quoted_tilde(raw[1:-1])
    if node.type == "ansi_c_string":
        return _ansi(raw[2:-1])
    if node.type == "string" and all(child.type in ('"', "string_content") for child in node.children):
        inside = "".join(_unescape((c.text or b"").decode(errors="replace"), '"$`\\') for c in node.children
                         if c.type == "string_content")  # fmt: skip
        return _quoted_tilde(inside)
    return None


def _quoted_tilde(text: str) -> str:
    return "./" + text if text.startswith("~") else text


def _braces(node: Node) -> bool:
    """Whether the shell would expand `{a,b}` or `{1..3}` here: the word it passes is then not this one."""
    text = (node.text or b"").decode(errors="replace")
    return node.type in ("word", "concatenation") and "{" in text and ("," in text or ".." in text)


def _unescape(text: str, only: str) -> str:
    """Drop the backslash of an escape: of any character outside quotes (`only` empty), of the few that
    are special inside double quotes otherwise; a backslash before a newline drops both."""
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        following = text[index + 1 : index + 2]
        if char == "\\" and following and (not only or following in only or following == "\n"):
            out.append("" if following == "\n" else following)
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out)


def _ansi(text: str) -> str | None:
    """The text of `$'…'`, or None for an escape this reader does not decode (the shell's would differ)."""
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        index += 1
        if char != "\\":
            out.append(char)
            continue
        code = text[index : index + 1]
        index += 1
        if code in _ANSI:
            out.append(_ANSI[code])
            continue
        width, base = {"x": (2, 16), "u": (4, 16), "U": (8, 16)}.get(code, (0, 0))
        if code.isdigit() and code < "8":
            width, base, index = 3, 8, index - 1
        digits = ""
        while len(digits) < width and index < len(text) and text[index] in _DIGITS[base]:
            digits += text[index]
            index += 1
        if not digits or int(digits, base) > 0x10FFFF:
            return None
        out.append(chr(int(digits, base)))
    return "".join(out)
