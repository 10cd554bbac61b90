"""No how-to page holds a wall of text: every prose paragraph is at most 150 words.

A paragraph is a run of non-blank lines outside fenced code blocks. A list item, a
table row and a heading each count as one of their own; an admonition's title line
is skipped and its indented body is read as prose like the rest of the page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOWTO = ROOT / "docs" / "howto"
PAGES = sorted(HOWTO.glob("*.md"))
MAX_WORDS = 150

_FENCE = re.compile(r"^\s*(```|~~~)")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_ADMONITION = re.compile(r"^\s*(?:!!!|\?\?\?\+?)\s")
_WORD = re.compile(r"\S*\w\S*")


@dataclass(frozen=True)
class Paragraph:
    """One paragraph of a page: the line it starts on and its text."""

    line: int
    text: str

    @property
    def words(self) -> int:
        """Its words: blank-separated tokens with at least one letter or digit."""
        return len(_WORD.findall(self.text))


def paragraphs(text: str) -> list[Paragraph]:
    """The prose paragraphs of a Markdown page, fenced code left out."""
    found: list[Paragraph] = []
    lines: list[str] = []
    start = 0
    fence: str | None = None

    def close() -> None:
        if lines:
            found.append(Paragraph(start, " ".join(lines)))
        lines.clear()

    for number, raw in enumerate(text.splitlines(), start=1):
        opening = _FENCE.match(raw)
        if fence is not None:
            if opening and opening.group(1) == fence:
                fence = None
            continue
        if opening:
            close()
            fence = opening.group(1)
            continue
        line = raw.strip()
        if not line or _ADMONITION.match(raw):
            close()
            continue
        if line.startswith(("#", "|")) or _ITEM.match(raw):
            close()
        if not lines:
            start = number
        lines.append(line)
        if line.startswith(("#", "|")):
            close()
    close()
    return found


def test_the_how_to_pages_are_there() -> None:
    assert len(PAGES) >= 7, f"{HOWTO} lost its pages"


def test_the_splitter_reads_pages_as_a_reader_does() -> None:
    page = (
        "# Title\n\nOne two\nthree.\n\n```sh\nnot prose at all\n```\n"
        "- an item\n  its second line\n- another\n\n"
        '!!! note "Checked"\n    inside the box\n\n| a | b |\n|---|---|\n'
    )
    found = [(p.line, p.words) for p in paragraphs(page)]
    assert found == [(1, 1), (3, 3), (9, 5), (11, 1), (14, 3), (16, 2), (17, 0)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_paragraph_is_a_wall_of_text(page: Path) -> None:
    long = [p for p in paragraphs(page.read_text()) if p.words > MAX_WORDS]
    assert not long, "\n".join(
        f"docs/howto/{page.name}:{p.line}: {p.words} words (at most {MAX_WORDS}): {p.text[:70]}..."
        for p in long
    )
