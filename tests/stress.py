"""``make test-stress``: the suite (or a named part of it) with the machine made busy on purpose.

Three kinds of load, one round each, repeated until every kind has passed ``--passes`` times in a row
(or ``--rounds`` rounds have run):

* ``hogs-low``: a CPU hog per core at a lower priority than the tests (nice 10);
* ``hogs-same``: a CPU hog per core at the same priority;
* ``servers-slowed``: the tests' own nats-server processes frozen for ``--stop-ms`` in every
  ``--every-ms`` (a cgroup freezer, which leaves a test's own SIGSTOP alone), as a loaded machine would
  deschedule them.  Where no cgroup freezer can be used, the kind is skipped with a line that says why.

Each round's pytest output goes to ``build/stress/<round>-<kind>.log``; the table at the end names every
round that failed and its failing tests.  A failure here is a finding: find its cause (a wait on a sleep,
a count other threads disturb, a port the kernel can hand out elsewhere) before calling it a flake.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from .parts import PARALLEL

KINDS = ("hogs-low", "hogs-same", "servers-slowed")
#: Set in the environment of a servers-slowed round's pytest: a cgroup holds a process once, so the tests of the
#: freezer itself cannot hold their servers while the round's freezer does.
ROUND = "JSCLIENT_STRESS_ROUND"
HOG = "while True: pass"


@contextlib.contextmanager
def hogs(nice: int) -> Iterator[None]:
    """One busy process per core at ``nice``, for as long as the block runs."""
    procs = [
        subprocess.Popen([sys.executable, "-c", HOG], preexec_fn=(lambda: os.nice(nice)) if nice else None)
        for _ in range(os.cpu_count() or 1)
    ]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def servers_under(root: int) -> list[int]:
    """The nats-server processes descended from ``root`` (read from /proc)."""
    parent: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            pid = int(entry.name)
            parent[pid] = int(stat[stat.rindex(")") + 2 :].split()[1])
            names[pid] = name
    found = []
    for pid, name in names.items():
        if name != "nats-server":
            continue
        up = parent.get(pid, 0)
        while up and up != root:
            up = parent.get(up, 0)
        if up == root:
            found.append(pid)
    return found


def process_state(pid: int) -> str:
    """The state letter of /proc/PID/stat ("T": stopped); "" once the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat[stat.rindex(")") + 2]


class FreezerUnavailable(Exception):
    """No cgroup freezer this process may use: the servers-slowed kind cannot run here."""


class Freezer:
    """A cgroup of its own whose tasks freeze and thaw together (v2's ``cgroup.freeze``, or v1's ``freezer.state``).

    The freezer sends no signal.  A SIGSTOP that a test sends its own server while the freezer holds it takes
    effect at the thaw and stays: the SIGSTOP/SIGCONT bursts this replaces continued such a server, undoing the
    test's fault whenever its stop landed inside one of theirs.
    """

    def __init__(self, name: str) -> None:
        mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
        own = dict(line.split(":", 2)[1:] for line in Path("/proc/self/cgroup").read_text().splitlines())
        tried = []
        for kind, where, opts in ((m[2], m[1], m[3].split(",")) for m in mounts):
            if kind == "cgroup2" and "" in own:
                parent, switch, values = Path(where + own[""]), "cgroup.freeze", ("1", "0")
            elif kind == "cgroup" and "freezer" in opts and "freezer" in own:
                parent, switch, values = Path(where + own["freezer"]), "freezer.state", ("FROZEN", "THAWED")
            else:
                continue
            path = parent / name
            try:
                path.mkdir()
                (path / switch).write_text(values[1])
            except OSError as exc:
                tried.append(f"{path}: {exc.strerror}")
                with contextlib.suppress(OSError):
                    path.rmdir()
                continue
            self.parent, self.path, self._switch, self._values = parent, path, switch, values
            return
        raise FreezerUnavailable("no cgroup freezer to use (" + ("; ".join(tried) or "none mounted") + ")")

    def hold(self, pid: int) -> None:
        with contextlib.suppress(OSError):  # gone already
            (self.path / "cgroup.procs").write_text(str(pid))

    def freeze(self, *, frozen: bool) -> None:
        """Freeze (and wait until every task is frozen: the write alone let a server answer a PING after it),
        or thaw."""
        (self.path / self._switch).write_text(self._values[0 if frozen else 1])
        deadline = time.monotonic() + 5
        while frozen and not self._frozen() and time.monotonic() < deadline:
            time.sleep(0.0005)

    def _frozen(self) -> bool:
        if self._switch == "cgroup.freeze":
            return "frozen 1" in (self.path / "cgroup.events").read_text()
        return (self.path / "freezer.state").read_text().strip() == "FROZEN"

    def close(self) -> None:
        """Thaw, hand every task back to the cgroup it came from, and remove the cgroup."""
        self.freeze(frozen=False)
        for pid in (self.path / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                (self.parent / "cgroup.procs").write_text(pid)
        self.path.rmdir()


class Pauser:
    """What the servers-slowed load shows a test of it: its cgroup, whether it is frozen now, and the thaws so far."""

    def __init__(self, cgroup: Path) -> None:
        self.cgroup = cgroup
        self.frozen = threading.Event()
        self.thaws = 0


@contextlib.contextmanager
def slowed_servers(root: int, stop_ms: int, every_ms: int) -> Iterator[Pauser]:
    """Freeze every nats-server under ``root`` for ``stop_ms`` in each ``every_ms``, until the block ends."""
    freezer = Freezer(f"jsclient-stress-{os.getpid()}-{threading.get_ident()}")
    done = threading.Event()
    pauser = Pauser(freezer.path)

    def pause() -> None:
        held: set[int] = set()
        while not done.wait(every_ms / 1000):
            for pid in set(servers_under(root)) - held:
                freezer.hold(pid)
                held.add(pid)
            freezer.freeze(frozen=True)
            pauser.frozen.set()
            time.sleep(stop_ms / 1000)
            pauser.thaws += 1  # counted first: what the thaw lets the server answer may arrive before the next line
            pauser.frozen.clear()
            freezer.freeze(frozen=False)

    thread = threading.Thread(target=pause, name="stress-pauser", daemon=True)
    thread.start()
    try:
        yield pauser
    finally:
        done.set()
        thread.join()
        freezer.close()  # never leave one frozen


def run_round(kind: str, args: argparse.Namespace, log: Path) -> tuple[int, list[str]]:
    """One pytest run under ``kind`` of load: its exit status and its failing tests."""
    command = [sys.executable, "-m", "pytest", *PARALLEL, *args.pytest_args]  # as make test runs it
    with log.open("w") as out:
        if kind == "servers-slowed":
            env = {**os.environ, ROUND: kind}
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
            with slowed_servers(proc.pid, args.stop_ms, args.every_ms):
                status = proc.wait()
        else:
            with hogs(10 if kind == "hogs-low" else 0):
                status = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", log.read_text(errors="replace"), re.M)
    return status, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passes", type=int, default=2, help="passes in a row each kind of load needs")
    parser.add_argument("--rounds", type=int, default=12, help="rounds at the most")
    parser.add_argument("--stop-ms", type=int, default=30, help="servers-slowed: how long each stop lasts")
    parser.add_argument("--every-ms", type=int, default=500, help="servers-slowed: how often a stop comes")
    parser.add_argument("pytest_args", nargs="*", default=[], help="what pytest runs (default: the whole suite)")
    args = parser.parse_args(argv)
    logs = Path("build/stress")
    logs.mkdir(parents=True, exist_ok=True)
    kinds = list(KINDS)
    table: list[str] = []
    try:
        Freezer(f"jsclient-stress-probe-{os.getpid()}").close()
    except FreezerUnavailable as exc:
        kinds.remove("servers-slowed")
        table.append(f"servers-slowed: skipped, {exc}")
        print(table[-1], flush=True)
    streak = dict.fromkeys(kinds, 0)
    for number in range(1, args.rounds + 1):
        kind = min(kinds, key=lambda k: (streak[k], kinds.index(k)))
        if streak[kind] >= args.passes:
            break
        log = logs / f"{number:02d}-{kind}.log"
        started = time.monotonic()
        status, failed = run_round(kind, args, log)
        streak[kind] = streak[kind] + 1 if status == 0 else 0
        line = f"round {number:2d} {kind:<15} {time.monotonic() - started:7.0f} s  exit {status}  {log}"
        table.append(line + "".join(f"\n    {name}" for name in failed))
        print(table[-1], flush=True)
    print("== make test-stress")
    print("\n".join(table))
    ok = all(n >= args.passes for n in streak.values())
    print(f"every kind of load here ({', '.join(kinds)}) passed {args.passes} times in a row: {'yes' if ok else 'no'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
