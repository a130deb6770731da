"""The interpreter each client of ``make bench`` runs on: every peer on the CPython where it does best.

* nats-py, and nats-py-sync and nats-py-thread over it, on 3.11: on CPython 3.12 to 3.13.0 asyncio's socket
  transport buffers small writes so badly (CPython gh-146507) that nats-py's core publish is many times slower
  there than on 3.11.
* natsio on 3.13: it requires 3.13 or later.
* pynats2 on 3.11 too: it imports ``pkg_resources``, which only a setuptools older than 81 has, and only the
  virtualenvs of 3.11 and older come with one.
* jsclient (and its spin_wait=0 and ``--old`` runs) and the raw socket on the runner's own interpreter,
  make bench's ``.venv``.

A client that wants another release than the runner's runs in the virtualenv that tests/pythons.py keeps for
that release (``.venv-3.N``: jsclient editable and the test extra, whose peers include natsio from 3.13 on; built
on first use, and again when setup.cfg changes), found as tests/pythons.py finds interpreters (``python3.N`` on
PATH, then pyenv's).  If the machine has no such release, nats-py runs on the runner's interpreter all the same
(the run records which), and natsio, which runs on nothing older, is left out of the run and said to be.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from dataclasses import dataclass

#: The release each peer does best on (tests/pythons.py finds it); a client not named runs on the runner's.
WANTED = {"nats-py": "3.11", "nats-py-sync": "3.11", "nats-py-thread": "3.11", "pynats2": "3.11", "natsio": "3.13"}
#: The oldest release a client runs on at all: without an interpreter that new, it is not measured.
MINIMUM = {"natsio": (3, 13)}
#: The first release a client no longer runs on: without an interpreter older, it is not measured.
BEYOND = {"pynats2": (3, 12)}
#: The distribution each client is (its version is read from the interpreter that runs it).
DISTRIBUTIONS = {"nats-py": "nats-py", "nats-py-sync": "nats-py-sync", "nats-py-thread": "nats-py",
                 "pynats2": "pynats2", "natsio": "natsio"}
#: Why the peers run where they do, as the tables and the docs say it.
WHY = ("each peer on the CPython where it does best: nats-py on 3.11, since on 3.12 to 3.13.0 asyncio's write "
       "buffering (CPython gh-146507) makes its core publish many times slower; pynats2 on 3.11, whose "
       "virtualenvs still have the pkg_resources it imports; natsio on 3.13, the first it supports")


@dataclass(frozen=True)
class Interpreter:
    """Where a client runs: the interpreter's path and its version (``3.11.7``)."""

    path: str
    version: str


def runner() -> Interpreter:
    return Interpreter(sys.executable, platform.python_version())


def release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:2])


def wanted(release_: str) -> Interpreter | None:
    """An interpreter of ``release_`` (``3.13``) in its ``.venv-3.N``, built if need be; None if the machine has
    none.  The runner's own interpreter when it is that release."""
    if platform.python_version().startswith(release_ + "."):
        return runner()
    from tests import pythons  # the suite's finder and virtualenvs, shared (benchmarks run from the root)

    python = pythons.find(release_)
    if python is None:
        return None
    where = pythons.ROOT / f".venv-{release_}"
    print(f"  Python {release_}: {python}, in {where} (built if missing or older than setup.cfg) ...",
          file=sys.stderr)
    path = str(pythons.venv(release_, python, whole=False) / "bin" / "python")
    return Interpreter(path, probe(path)["python"])


def probe(python: str, dists: tuple[str, ...] = ()) -> dict[str, str]:
    """An interpreter's version (``python``) and each of ``dists``' version installed for it."""
    code = ("import importlib.metadata as m, json, platform, sys\n"
            "out = {'python': platform.python_version()}\n"
            "for d in sys.argv[1:]:\n"
            "    try: out[d] = m.version(d)\n"
            "    except m.PackageNotFoundError: out[d] = 'not installed'\n"
            "print(json.dumps(out))")
    done = subprocess.run([python, "-c", code, *dists], capture_output=True, text=True, timeout=60, check=True)
    found: dict[str, str] = json.loads(done.stdout)
    return found


def resolve(clients: set[str]) -> tuple[dict[str, Interpreter], dict[str, str]]:
    """Each of ``clients``' interpreter, and the clients that have none, with why."""
    found: dict[str, Interpreter] = {}
    missing: dict[str, str] = {}
    releases: dict[str, Interpreter | None] = {}
    for client in sorted(clients):
        want = WANTED.get(client)
        if want is None:
            found[client] = runner()
            continue
        if want not in releases:
            releases[want] = wanted(want)
        got = releases[want]
        if got is None:
            oldest, beyond, mine = MINIMUM.get(client), BEYOND.get(client), release(platform.python_version())
            if (oldest is None or mine >= oldest) and (beyond is None or mine < beyond):
                got = runner()  # the best is missing: the runner's, and the record says which it was
            else:
                needs = (f"CPython {'.'.join(map(str, oldest))} or later" if oldest is not None
                         else f"a CPython older than {'.'.join(map(str, beyond or ()))}")
                missing[client] = (f"needs {needs}, and this machine has no Python {want} (tests/pythons.py looks "
                                   f"for python{want} on PATH and in pyenv)")
                continue
        found[client] = got
    return found, missing


def versions(interpreters: dict[str, Interpreter]) -> dict[str, str]:
    """Each peer distribution's version, read from the interpreter that runs it."""
    out: dict[str, str] = {}
    by_python: dict[str, list[str]] = {}
    for client, where in interpreters.items():
        dist = DISTRIBUTIONS.get(client)
        if dist is not None:
            by_python.setdefault(where.path, []).append(dist)
    for path, dists in by_python.items():
        out |= {dist: version for dist, version in probe(path, tuple(dists)).items() if dist != "python"}
    return out
