"""The package as users get it: ``make dist``'s sdist and wheel, installed where the source tree is not.

The sdist and the wheel are built as ``make dist`` builds them (``python -m build``: the sdist
first, the wheel from the unpacked sdist, so a file the sdist leaves out is missing from the wheel
too).  The wheel goes into a new virtualenv with its dependencies from the package index, as a
user's ``pip install`` would: a ``--system-site-packages`` one would see the test virtualenv's
editable jsclient, which hides whatever the wheel lacks.  The venv is made without pip, and the
test virtualenv's pip installs into it (``pip --python``), so it costs about a second with a warm
pip cache.  A smoke script then runs in it, isolated (``python -I``) in a directory of its own: a
real nats-server (the one this run tests against, by ``NATS_SERVER_BIN``), publish, subscribe,
request, a JetStream publish, and the installed package's version and ``py.typed``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import jsclient
from jsclient.server import find_server_binary

ROOT = Path(__file__).resolve().parent.parent

SMOKE = """
import importlib.metadata
import pathlib
import sys

import jsclient
from jsclient.server import NatsServer

here = pathlib.Path(jsclient.__file__).resolve().parent
assert pathlib.Path(sys.prefix).resolve() in here.parents, f"jsclient imported from {here}, not the venv"
assert (here / "py.typed").is_file(), "py.typed is not installed"
assert jsclient.__version__ == importlib.metadata.version("jsclient"), jsclient.__version__

with NatsServer() as server, jsclient.connect(server.url, name="dist-smoke") as nc:
    sub = nc.subscribe("smoke.>")
    nc.publish("smoke.one", b"data", headers={"k": "v"})
    msg = sub.next_msg(timeout=5)
    assert (msg.subject, msg.data, msg.headers["k"]) == ("smoke.one", b"data", "v")

    nc.subscribe("smoke.echo", callback=lambda m: m.respond(m.data.upper()))
    assert nc.request("smoke.echo", b"hi", timeout=5).data == b"HI"

    js = nc.jetstream()
    js.add_stream(name="SMOKE", subjects=["orders.>"])
    ack = js.publish("orders.1", b"first", timeout=5)
    assert (ack.stream, ack.seq) == ("SMOKE", 1), ack
print("smoke ok", jsclient.__version__)
"""


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    run = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=280, check=False, cwd=ROOT,
    )
    assert run.returncode == 0, f"python -m build failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return out


def only(directory: Path, pattern: str) -> Path:
    found = sorted(directory.glob(pattern))
    assert len(found) == 1, f"{pattern} in {directory}: {found}"
    return found[0]


def test_wheel_and_sdist_hold_the_package(dist: Path) -> None:
    wheel = only(dist, "jsclient-*-py3-none-any.whl")
    sdist = only(dist, "jsclient-*.tar.gz")
    version = jsclient.__version__
    assert wheel.name == f"jsclient-{version}-py3-none-any.whl"
    assert sdist.name == f"jsclient-{version}.tar.gz"
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("jsclient/__init__.py", "jsclient/py.typed", "jsclient/jetstream/context.py",
                   "jsclient/spark/source.py", "jsclient/cli/__init__.py", "jsclient/protocol/parser.py",
                   "jsclient/instrumentation/core.py"):
        assert needed in names, f"{needed} is not in the wheel"
    assert not [name for name in names if name.startswith("tests/")], "the wheel ships the tests"
    # opentelemetry-instrument finds the instrumentor through this entry point (the installed wheel's metadata).
    entry_points = zipfile.ZipFile(wheel).read(f"jsclient-{version}.dist-info/entry_points.txt").decode()
    assert "[opentelemetry_instrumentor]\njsclient = jsclient.instrumentation:JsclientInstrumentor" in entry_points
    with tarfile.open(sdist) as tar:
        members = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    for needed in ("setup.cfg", "pyproject.toml", "README.rst", "jsclient/py.typed"):
        assert needed in members, f"{needed} is not in the sdist"


def test_installed_wheel_runs(dist: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--disable-pip-version-check", str(only(dist, "jsclient-*.whl"))],
        capture_output=True, text=True, timeout=280, check=False,
    )
    assert install.returncode == 0, f"pip install of the wheel failed:\n{install.stderr[-3000:]}"

    env = {**os.environ, "NATS_SERVER_BIN": find_server_binary()}
    env.pop("PYTHONPATH", None)
    smoke = subprocess.run(
        [str(python), "-I", "-c", SMOKE], capture_output=True, text=True, timeout=120, check=False,
        cwd=tmp_path, env=env,
    )
    assert smoke.returncode == 0, f"the smoke script failed in the wheel's venv:\n{smoke.stderr[-4000:]}"
    assert smoke.stdout.strip() == f"smoke ok {jsclient.__version__}"

    command = subprocess.run(
        [str(venv / "bin" / "jsclient"), "--help"], capture_output=True, text=True, timeout=60, check=False,
        env=env,
    )
    assert command.returncode == 0 and "usage" in command.stdout.lower(), command.stderr[-2000:]
