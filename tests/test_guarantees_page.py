"""Every test the guarantees page cites exists, in the file it names: a promise's proof cannot be renamed away."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "guarantees.rst"


def citations() -> list[tuple[str, str]]:
    """(file, test) for each ``test_...`` name of a "Checked by" block, in the last ``tests/...py`` file named
    before it (the page writes ``* ``tests/a.py``: ``test_x`` `` and ``**Checked by** ``tests/b.py``:`` too)."""
    found = []
    for block in re.findall(r"\*\*Checked by\*\*(.*?)(?=\n[^\n]+\n-{3,}\n|\Z)", PAGE.read_text(), re.DOTALL):
        current = None
        for token in re.findall(r"``(tests/[\w/]+\.py|test_\w+)", block):
            if token.startswith("tests/"):
                current = token
            elif current is not None:
                found.append((current, token))
    return found


def test_the_page_cites_tests() -> None:
    assert len(citations()) > 100  # the parser still finds the lists


def test_every_cited_test_exists_in_its_file() -> None:
    missing = [
        f"{path}::{name}" for path, name in citations()
        if not re.search(rf"^\s*def {name}\(", (ROOT / path).read_text(), re.MULTILINE)
    ]
    assert not missing, missing
