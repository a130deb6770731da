"""Every Python code block in README.rst runs, as written, against a real server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import jsclient

from .conftest import server_release
from .servers import MATRIX, release

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
    """On an older server an example may stop at the first feature that server lacks, refused before sending."""
    code = python_blocks()[index]
    try:
        exec(compile(code, f"README.rst block {index}", "exec"), {"__name__": f"readme_{index}"})
    except jsclient.FeatureNotSupportedError as exc:
        if server_release() >= release(MATRIX[-1]):
            raise
        pytest.xfail(f"refused on an older server: {exc.description}")

