"""Text shown to a person deciding: hidden and reordering characters spelled out, look-alikes marked."""

from __future__ import annotations

import pytest

from signoff.core.visible import reveal


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Pay 50 USD to \u202eokanaH", "Pay 50 USD to ⟨U+202E⟩okanaH"),  # right-to-left override
        ("Mallory\u200b", "Mallory⟨U+200B⟩"),  # zero-width space
        ("Mal\u00adlory", "Mal⟨U+00AD⟩lory"),  # soft hyphen
        ("a\u2066b\u2069", "a⟨U+2066⟩b⟨U+2069⟩"),  # bidi isolates
        ("line\nforged", "line⟨U+000A⟩forged"),  # a second line of the prompt
        ("to\u00a0Eve", "to⟨U+00A0⟩Eve"),  # a space that is not one
        ("M\u0430llory", "⚠M\u0430llory"),  # Cyrillic a
        ("\uff2dallory", "⚠\uff2dallory"),  # fullwidth M
        ("P\u0430y Hanako", "⚠P\u0430y Hanako"),  # only the mixed word is marked
        ("Ελλάδα", "Ελλάδα"),
        ("naïve café", "naïve café"),
        ("東京タワー へ", "東京タワー へ"),
        ("iPhone充電", "iPhone充電"),
        ("Pay 50 USD to Hanako", "Pay 50 USD to Hanako"),
    ],
)
def test_reveal(text: str, shown: str) -> None:
    assert reveal(text) == shown
