"""The README's and the manual's (docs/, every page) Python examples run, and print what they say they print.

A ```python block followed by a blank line, `prints`, a blank line and a plain ``` block must print exactly
that block. No ```python block is left out: one the collector can't read (indented in a list, say) fails.
Also the front door's promises (issue 42, item 9): the README stays short, never suggests that signoff comes
from PyPI, names no seed numbers, and links only to files that exist; every page is in the site's nav; a
shell example that uses `$TOKEN` sets it first.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]

BLOCK = re.compile(r"^```python\n(.*?)^```\n(?:\nprints\n\n```\n(.*?)^```\n)?", re.S | re.M)
OPENING = re.compile(r"^[ \t]*```python\b", re.M)
PRINTS = re.compile(r"^prints\n\n```\n", re.M)
SHELL = re.compile(r"^```(?:bash|sh|console)\n(.*?)^```", re.S | re.M)


class Example(NamedTuple):
    where: str
    code: str
    expected: str


def name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def examples(page: Path) -> list[Example]:
    text = page.read_text()
    return [
        Example(f"{name(page)}:{text.count(chr(10), 0, m.start()) + 1}", m.group(1), m.group(2) or "")
        for m in BLOCK.finditer(text)
    ]


EXAMPLES = [example for page in PAGES for example in examples(page)]


def test_the_readme_and_the_manual_have_examples() -> None:
    assert len(examples(README)) >= 1
    assert sum(len(examples(page)) for page in PAGES[1:]) >= 8  # the manual's eight, when it was the README


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_no_python_block_is_skipped(page: Path) -> None:
    text = page.read_text()
    found = examples(page)
    assert len(found) == len(OPENING.findall(text)), f"{name(page)}: a ```python block the tests can't read"
    printed = [e for e in found if e.expected]
    assert len(printed) == len(PRINTS.findall(text)), f"{name(page)}: a `prints` block no example owns"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.where)
def test_example_runs(example: Example, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", example.code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    if example.expected:
        assert result.stdout == example.expected


def test_the_readme_is_a_front_door() -> None:
    assert len(README.read_text().splitlines()) <= 250


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_nothing_suggests_signoff_comes_from_pypi(page: Path) -> None:
    """signoff is not on PyPI, and another project publishes `signoff-*` there: every `pip install` of it
    names a checkout or a wheel."""
    for line in page.read_text().splitlines():
        assert not re.search(r"pip install\s+['\"]?signoff\b", line), f"{name(page)}: {line.strip()}"


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_no_seed_numbers(page: Path) -> None:
    assert not re.search(r"\bseeds? ?0\d\d", page.read_text(), re.I), name(page)


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_a_shell_example_sets_the_token_it_uses(page: Path) -> None:
    for block in SHELL.findall(page.read_text()):
        if "$TOKEN" in block:
            assert re.search(r"^(?:export )?TOKEN=", block, re.M), f"{name(page)}: $TOKEN is never set"


def test_the_readme_links_to_files_that_exist() -> None:
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [t for t in targets if not re.match(r"[a-z]+:", t)]
    assert local
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing


def test_every_page_is_in_the_site() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    listed = set(re.findall(r":\s*([\w/.-]+\.md)\s*$", config, re.M))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages == listed
