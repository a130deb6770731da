"""A user's typed script passes mypy --strict with no ignores, and runs against a real server.

``tests/typed_user.py`` keeps what each documented call returns in a variable of the exported type: an
overload, an export or a return type that an IDE cannot follow fails here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from jsclient.server import NatsServer

SCRIPT = Path(__file__).resolve().parent / "typed_user.py"
ROOT = SCRIPT.parent.parent


def test_the_script_has_no_type_ignores() -> None:
    assert "type: ignore" not in SCRIPT.read_text()


def test_mypy_strict_passes_on_a_users_script() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(SCRIPT)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_script_runs(server: NatsServer) -> None:
    run = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", str(SCRIPT), server.url],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
