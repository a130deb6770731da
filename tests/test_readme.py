"""Every Python code block in README.rst runs, as written, against a real server.

Each in a fresh interpreter, as a reader would paste it: the Spark example
starts and stops its own SparkSession, which must not be the suite's.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

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
    run = subprocess.run(
        [sys.executable, "-c", python_blocks()[index]], capture_output=True, text=True, timeout=280, check=False
    )
    if run.returncode == 0:
        return
    last = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ""
    if last.startswith("jsclient.errors.FeatureNotSupportedError") and server_release() < release(MATRIX[-1]):
        pytest.xfail(f"refused on an older server: {last}")
    pytest.fail(f"README.rst block {index} failed:\n{run.stderr[-4000:]}")


def test_the_readme_is_a_landing_page_of_at_most_200_lines() -> None:
    """The rest belongs in docs/: a README that grows past a screenful or two stops being read."""
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.rst is {len(lines)} lines; move the detail to docs/"
