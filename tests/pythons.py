"""The CPythons from 3.11 up that this machine has, each with a virtualenv of its own (``.venv-3.N``).

tests/parts.py runs the suite under them: ``make test-pythons`` (the whole suite under each) and the
compact subset under the newest that ``make test`` runs.  The Spark extra goes where pyspark supports that
Python.  ``make bench`` runs the peers that do best on another release in the same virtualenvs (natsio on 3.13,
nats-py on 3.11: benchmarks/pythons.py).  ``python -m tests.pythons`` lists what is found.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The CPython releases jsclient supports (setup.cfg's classifiers list each one the suite passes on).
SUPPORTED = ("3.11", "3.12", "3.13")
#: Where pyspark (4.x) has wheels and a tested Python: the others run the suite without the Spark tests.
SPARK = ("3.11", "3.12", "3.13")


def find(version: str) -> str | None:
    """The interpreter for ``version``: ``python3.N`` on PATH (a pyenv shim included), else pyenv's own."""
    for candidate in (shutil.which(f"python{version}"),
                      *sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python{version}"))):
        if candidate is None:
            continue
        try:
            out = subprocess.run([str(candidate), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip() == version:
            return str(candidate)
    return None


def venv(version: str, python: str, *, whole: bool) -> Path:
    """``.venv-<version>`` with jsclient installed editable and the extras the suite needs: the compat
    subset's, or (``whole``) the whole suite's, the docs and Spark included.  Built again only when
    setup.cfg changed or more extras are wanted, and then with every extra it had as well: a narrower
    rebuild took Spark and the docs from a whole-suite run that came after it."""
    where = ROOT / f".venv-{version}"
    stamp = where / ".installed"
    wanted = {"test", "dev", "websocket", "otel"}
    if whole:
        wanted |= {"docs", *(["spark"] if version in SPARK else [])}
    had = set(stamp.read_text().split(",")) if stamp.exists() else set()
    if stamp.exists() and stamp.stat().st_mtime >= (ROOT / "setup.cfg").stat().st_mtime and wanted <= had:
        return where
    extras = ",".join(sorted(wanted | had))
    log = where.with_name(where.name + ".log")
    with log.open("w") as out:
        for step in ([python, "-m", "venv", "--clear", str(where)],
                     [str(where / "bin/python"), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
                     [str(where / "bin/python"), "-m", "pip", "install", "--quiet", "-e", f".[{extras}]"]):
            if subprocess.run(step, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, check=False).returncode:
                sys.stdout.write(log.read_text())
                raise SystemExit(f"setting up {where} failed (above, and in {log})")
    stamp.write_text(extras)
    return where


def newest() -> str | None:
    """The newest supported release on this machine."""
    return next((v for v in reversed(SUPPORTED) if find(v)), None)


if __name__ == "__main__":
    for release in SUPPORTED:
        print(f"{release}: {find(release) or 'not on this machine'}")
