"""The Python guide shows only code that runs: every ```python block of
docs/guides/python.md must appear, line for line, in the example program
that scripts/test.sh executes (indentation aside)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "guides"
GUIDE = DOCS / "python.md"
EXAMPLE = DOCS / "examples" / "python" / "example.py"


def python_blocks(markdown: str) -> List[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.S)


def appears_in(block: str, text: str) -> bool:
    """Whether block's lines are consecutive lines of text, all shifted by
    one same indentation."""
    want = [ln.rstrip() for ln in block.strip("\n").splitlines()]
    lines = [ln.rstrip() for ln in text.splitlines()]
    base = len(want[0]) - len(want[0].lstrip())
    for i in range(len(lines) - len(want) + 1):
        first = lines[i]
        shift = (len(first) - len(first.lstrip())) - base
        if shift < 0:
            continue
        pad = " " * shift
        if all((w == "" and g == "") or g == pad + w for w, g in zip(want, lines[i : i + len(want)])):
            return True
    return False


def test_guide_has_python_blocks() -> None:
    assert len(python_blocks(GUIDE.read_text())) >= 5


@pytest.mark.parametrize("index", range(len(python_blocks(GUIDE.read_text()))))
def test_block_is_in_the_example(index: int) -> None:
    block = python_blocks(GUIDE.read_text())[index]
    assert appears_in(block, EXAMPLE.read_text()), f"this block of {GUIDE.name} is not in {EXAMPLE.name}:\n{block}"


def test_the_matcher_is_strict() -> None:
    assert appears_in("a = 1\nb = 2\n", "def f():\n    a = 1\n    b = 2\n")
    assert not appears_in("a = 1\nb = 3\n", "def f():\n    a = 1\n    b = 2\n")
    assert not appears_in("a = 1\n    b = 2\n", "def f():\n    a = 1\n    b = 2\n")
