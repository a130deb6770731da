"""``make test``'s parts, each run whatever the others did, then one table: counts and wall time per part.

``make test``: the whole suite on the newest nats-server, the compat subset (``-m compat``) on each older
release, and the compat subset under the newest CPython on the machine when it is not the one running
(``--newest-python``).  ``make test-pythons``: the whole suite under each supported CPython
(``--pythons``; a missing one is a line that says so).  A part that fails does not hide the ones after it:
every part runs, the table says which failed, and the exit status is 1 when any did.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field

from . import pythons

#: pytest's closing line: "3 failed, 1480 passed, 2 skipped in 974.55s (0:16:14)".
SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s")


@dataclass
class Part:
    name: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    status: int | None = None
    seconds: float = 0.0
    counts: str = "no summary line"


#: pytest-xdist: two workers per core (JSCLIENT_TEST_WORKERS overrides; 0 runs in one process), each test
#: file on one worker, so that a module's server and a session's Spark start once per worker.  Two, because
#: a worker spends about half its time waiting on servers, timeouts and Spark (on 2 cores, /proc/stat: one
#: worker per core left them idle 51% of a compat run, two per core 24%, three 7% and no faster).
WORKERS = os.environ.get("JSCLIENT_TEST_WORKERS", str(2 * (os.cpu_count() or 1)))
PARALLEL = ["-n", WORKERS, "--dist", "loadfile"] if WORKERS != "0" else []


def parts(servers: list[str], server_dir: str, python: str) -> list[Part]:
    made = [Part("newest nats-server, whole suite", [python, "-m", "pytest", *PARALLEL])]
    for version in servers:
        binary = os.path.join(server_dir, version, "nats-server")
        made.append(Part(f"nats-server {version}, compat subset",
                         [python, "-m", "pytest", *PARALLEL, "-m", "compat"], {"NATS_SERVER_BIN": binary}))
    return made


def under(release: str, pytest_args: list[str], what: str, *, whole: bool) -> Part | None:
    """pytest under CPython ``release`` in its own virtualenv; None (said) when the machine lacks it."""
    python = pythons.find(release)
    if python is None:
        print(f"== Python {release}: not on this machine, skipped", flush=True)
        return None
    print(f"== Python {release}: its virtualenv ({python})", flush=True)
    where = pythons.venv(release, python, whole=whole)
    return Part(f"Python {release}, {what}", [str(where / "bin" / "python"), "-m", "pytest", *pytest_args])


def run(part: Part) -> None:
    """Runs ``part``, its output passed through as it comes; its status, time and pytest's counts recorded."""
    print(f"== {part.name}", flush=True)
    started = time.monotonic()
    tail: collections.deque[str] = collections.deque(maxlen=50)
    with subprocess.Popen(
        part.args, env={**os.environ, **part.env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        bufsize=1,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            tail.append(line.rstrip("\n"))
        part.status = proc.wait()
    part.seconds = time.monotonic() - started
    for line in reversed(tail):
        found = SUMMARY.match(line.strip())
        if found:
            part.counts = found.group(1)
            break


def report(done: list[Part]) -> str:
    width = max(len(p.name) for p in done)
    lines = ["== make test, part by part"]
    for p in done:
        verdict = "ok" if p.status == 0 else f"FAILED (exit {p.status})"
        minutes, seconds = divmod(round(p.seconds), 60)
        lines.append(f"{p.name:<{width}}  {minutes:>3}:{seconds:02d}  {verdict:<16} {p.counts}")
    total = round(sum(p.seconds for p in done))
    lines.append(f"{'all parts':<{width}}  {total // 60:>3}:{total % 60:02d}")
    counts: collections.Counter[str] = collections.Counter()
    for p in done:
        for number, word in re.findall(r"(\d+) (\w+)", p.counts):
            counts["failed" if word in ("failed", "error", "errors") else word] += int(number)
    if any(p.status != 0 and p.counts == "no summary line" for p in done):
        counts["failed"] += 1  # a part that ended before pytest could count (a crash, a collection error)
    lines.append(f"total: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--servers", nargs="*", default=[], help="older nats-server releases for the compat subset")
    parser.add_argument("--server-dir", default="build/servers", help="where each release's binary is")
    parser.add_argument("--newest-python", action="store_true",
                        help="also the compat subset under the newest supported CPython, if not this one")
    parser.add_argument("--pythons", action="store_true", help="only the whole suite under each supported CPython")
    args = parser.parse_args(argv)
    if args.pythons:
        found = [under(release, PARALLEL, "whole suite", whole=True) for release in pythons.SUPPORTED]
        done = [part for part in found if part is not None]
    else:
        done = parts(args.servers, args.server_dir, sys.executable)
        newest = pythons.newest() if args.newest_python else None
        if newest is not None and newest != f"{sys.version_info[0]}.{sys.version_info[1]}":
            extra = under(newest, [*PARALLEL, "-m", "compat"], "compat subset", whole=False)
            if extra is not None:
                done.append(extra)
    for part in done:
        run(part)
    print(report(done), flush=True)
    return 0 if all(p.status == 0 for p in done) else 1


if __name__ == "__main__":
    sys.exit(main())
