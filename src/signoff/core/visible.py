"""Text as a person deciding should see it: nothing hidden, nothing reordered, no look-alike letters unmarked.

What an approver reads is partly written by whoever asked: a description filled from the call's arguments,
a recipient's name. Unicode lets that text lie. `Pay 50 USD to \\u202eokanaH` displays as "Hanako" (a
right-to-left override reverses what follows), a zero-width space makes `Mallory` a different string that
looks the same, and a Cyrillic `\\u0430` in `M\\u0430llory` passes for a Latin `a`. So every place that
shows such text to a person (the CLI here; the page and the inbox do the same in TypeScript) shows:

- format and control characters (bidi controls, zero-width characters, soft hyphens, tags, line breaks, …)
  and whitespace other than a plain space as `⟨U+202E⟩`;
- a word whose letters come from more than one script with a mark: `⚠M\\u0430llory`. Latin beside Chinese or
  Japanese, and Japanese's own scripts together, are ordinary writing and not marked.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

MARK: Final = "⚠"
_WORD: Final = re.compile(r"\w+")
_EAST_ASIAN: Final = ("CJK", "HIRAGANA", "KATAKANA", "HANGUL", "IDEOGRAPHIC", "HALFWIDTH")


def hidden(char: str) -> bool:
    """Whether `char` displays as nothing, or changes how its neighbours display, or passes for a space."""
    if char == " ":
        return False
    category = unicodedata.category(char)
    return category in ("Cc", "Cf", "Co", "Cn", "Zl", "Zp", "Zs") or char in "\u115f\u1160\u3164\uffa0"


def script(char: str) -> str | None:
    """The script a letter is written in, by the first word of its Unicode name (East Asian scripts as
    one); None for anything but a letter."""
    if not char.isalpha():
        return None
    first = unicodedata.name(char, "UNKNOWN").split(" ", 1)[0]
    return "EAST ASIAN" if first.startswith(_EAST_ASIAN) else first


def mixed(word: str) -> bool:
    scripts = {found for char in word if (found := script(char)) is not None}
    return len(scripts - {"LATIN"} if "EAST ASIAN" in scripts else scripts) > 1


def reveal(text: str) -> str:
    """`text` with hidden characters spelled out and mixed-script words marked."""
    shown = "".join(f"⟨U+{ord(c):04X}⟩" if hidden(c) else c for c in text)
    return _WORD.sub(lambda word: MARK + word[0] if mixed(word[0]) else word[0], shown)
