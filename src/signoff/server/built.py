"""Pages the server renders into the built front end's HTML (frontend/, built into `static/`): the email
review page and the demo's mailbox read and look like the inbox, with its stylesheet and, where the entry
has one, its script, at the names with content hashes that only the build knows.

The server fills in the entry's title and its `#root` element, and leaves the rest as built: the page
works with JavaScript off, and a script, if any, only adds to it.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Final

STATIC: Final = Path(__file__).with_name("static")
ROOT: Final = '<div id="root"></div>'


def built(entry: str, title: str, body: str) -> str:
    """The built page `entry` (`review.html`) titled `title`, with `body`, HTML escaped by its maker, in
    its `#root`. Read on each use, like the chat page, so a rebuilt front end is served at once."""
    page = (STATIC / entry).read_text()
    head, _, rest = page.partition("<title>")
    _, _, rest = rest.partition("</title>")
    before, found, after = rest.partition(ROOT)
    assert found, f"static/{entry} has no {ROOT}: rebuild the front end (scripts/build-frontend)"
    return f'{head}<title>{html.escape(title)}</title>{before}<div id="root">{body}</div>{after}'


def header(title: str, *links: tuple[str, str]) -> str:
    """The inbox's header: `title`, and links (address, words) on its right."""
    nav = "".join(f"<a href='{html.escape(href)}'>{html.escape(words)}</a>" for href, words in links)
    return f"<header class='top'><h1>{html.escape(title)}</h1><nav>{nav}</nav></header>"
