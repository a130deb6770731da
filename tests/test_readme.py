"""Every Python code block in README.rst runs, as written, against a real server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.rst"


def python_blocks() -> list[str]:
    text = README.read_text()
    blocks = []
    for match in re.finditer(r"^\.\. code-block:: python\n\n((?:(?:    .*)?\n)+)", text, re.M):
        lines = match.group(1).splitlines()
        blocks.append("\n".join(line[4:] for line in lines))
    return blocks


def test_readme_has_examples() -> None:
    assert python_blocks(), "README.rst should show Python examples"


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_example_runs(index: int) -> None:
    code = python_blocks()[index]
    exec(compile(code, f"README.rst block {index}", "exec"), {"__name__": f"readme_{index}"})
