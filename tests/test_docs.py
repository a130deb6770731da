"""The documentation site builds cleanly, documents every public name, and its examples run.

* The Sphinx build (docs/, as ``make docs`` runs it: ``-W --keep-going -n``) gives no warning at
  all: no docstring that does not parse, no cross-reference that resolves to nothing.
* Every name in ``jsclient.__all__`` (and in the ``__all__`` of ``jsclient.spark``,
  ``jsclient.micro`` and ``jsclient.instrumentation``) is in the built ``objects.inv``, so the API
  reference cannot fall behind the package.
* Every ``.. code-block:: python`` in docs/**/*.rst runs, as written, in a fresh interpreter
  against a real server, as tests/test_readme.py runs README's: on an older server an example may
  stop at the first feature that server lacks, refused before sending (xfail).

The no-run convention: a block that is deliberately not runnable (a fragment, a handler shown
alone, something that needs a cluster or a WSGI server) is written as a ``.. code-block:: python``
whose previous non-blank line is the comment ``.. no-run`` (an RST comment: it renders as
nothing)::

    .. no-run

    .. code-block:: python

        def handler(msg): ...

Such a block is not run, but it must still compile.  docs/conf.py says the same.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pytest

from .conftest import server_release
from .servers import MATRIX, release

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
NO_RUN = ".. no-run"

# A python code-block at any indentation (inside a list item too), its options (``:caption:``),
# a blank line, then its body: blank lines and lines indented deeper than the directive.
BLOCK = re.compile(
    r"^(?P<indent>[ \t]*)\.\. code-block:: python[ \t]*\n"
    r"(?:(?P=indent)[ \t]+:.*\n)*"
    r"[ \t]*\n"
    r"(?P<body>(?:(?:(?P=indent)[ \t]+.*)?\n)+)",
    re.M,
)


class Example:
    def __init__(self, page: str, line: int, code: str, run: bool) -> None:
        self.page, self.line, self.code, self.run = page, line, code, run

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def examples() -> list[Example]:
    found = []
    for path in sorted(DOCS.rglob("*.rst")):
        if any(part.startswith(("_", ".")) for part in path.relative_to(DOCS).parts):
            continue
        text = path.read_text()
        for match in BLOCK.finditer(text):
            before = [line.strip() for line in text[: match.start()].splitlines() if line.strip()]
            code = textwrap.dedent(match.group("body")).strip("\n") + "\n"
            line = text.count("\n", 0, match.start()) + 1
            found.append(Example(str(path.relative_to(DOCS)), line, code, not before or before[-1] != NO_RUN))
    return found


EXAMPLES = examples()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built as ``make docs`` builds it, into a directory of the test's own."""
    out = tmp_path_factory.mktemp("docs")
    run = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-n", "-q",
         "-d", str(out / ".doctrees"), str(DOCS), str(out / "html")],
        capture_output=True, text=True, timeout=280, check=False, cwd=ROOT,
    )
    assert run.returncode == 0 and "WARNING" not in run.stderr, f"the docs build failed:\n{run.stderr[-6000:]}"
    return out / "html"


def test_docs_build_without_a_warning(built: Path) -> None:
    assert (built / "index.html").is_file()
    assert (built / "reference" / "jsclient.html").is_file()


def inventory(path: Path) -> dict[str, str]:
    """objects.inv (version 2): four header lines, then zlib-compressed ``name domain:role prio uri text``."""
    raw = path.read_bytes()
    header = raw.split(b"\n", 4)
    assert header[0] == b"# Sphinx inventory version 2", header[0]
    entries = {}
    for line in zlib.decompress(header[4]).decode().splitlines():
        match = re.match(r"(.+?)\s+(\S+:\S+)\s+-?\d+\s+\S*\s+.*", line)
        if match:
            entries[match.group(1)] = match.group(2)
    return entries


def test_every_public_name_is_documented(built: Path) -> None:
    import jsclient.instrumentation
    import jsclient.micro
    import jsclient.spark

    py = {name for name, role in inventory(built / "objects.inv").items() if role.startswith("py:")}
    missing = []
    for module in (jsclient, jsclient.spark, jsclient.micro, jsclient.instrumentation):
        for name in module.__all__:
            # A submodule's name that jsclient exports too is documented once, as jsclient's.
            exported = name in jsclient.__all__ and getattr(jsclient, name) is getattr(module, name)
            if f"{module.__name__}.{name}" not in py and not (exported and f"jsclient.{name}" in py):
                missing.append(f"{module.__name__}.{name}")
    assert not missing, f"public names missing from the API reference: {missing}"


def test_docs_have_examples() -> None:
    assert [example for example in EXAMPLES if example.run], "the docs should show runnable Python examples"


@pytest.mark.parametrize("example", EXAMPLES, ids=[example.where for example in EXAMPLES])
def test_docs_example_runs(example: Example, tmp_path: Path) -> None:
    """Each in a fresh interpreter, in a directory of its own; a no-run block need only compile."""
    if not example.run:
        compile(example.code, example.where, "exec")
        return
    run = subprocess.run(
        [sys.executable, "-c", example.code],
        capture_output=True, text=True, timeout=280, check=False, cwd=tmp_path,
    )
    if run.returncode == 0:
        return
    last = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ""
    if last.startswith("jsclient.errors.FeatureNotSupportedError") and server_release() < release(MATRIX[-1]):
        pytest.xfail(f"refused on an older server: {last}")
    pytest.fail(f"docs/{example.where} failed:\n{run.stderr[-4000:]}")
