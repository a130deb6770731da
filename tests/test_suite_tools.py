"""make test's part runner and make test-stress's load: what they print and whom they stop."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import jsclient
from jsclient import server
from jsclient.server import NatsServer

from . import pythons
from .parts import Part, report, run
from .stress import ROUND, Freezer, FreezerUnavailable, servers_under, slowed_servers
from .stress import process_state as state


def test_every_part_runs_and_the_table_counts_each_and_fails_when_one_failed() -> None:
    ok = Part("passes", [sys.executable, "-c", "print('=== 3 passed, 1 skipped in 0.10s ===')"])
    bad = Part("fails", [sys.executable, "-c", "print('1 failed, 2 passed in 0.2s'); raise SystemExit(1)"])
    crash = Part("crashes", [sys.executable, "-c", "raise SystemExit(3)"])
    for part in (ok, bad, crash):
        run(part)
    assert (ok.status, bad.status, crash.status) == (0, 1, 3)
    assert (ok.counts, bad.counts, crash.counts) == ("3 passed, 1 skipped", "1 failed, 2 passed", "no summary line")
    table = report([ok, bad, crash])
    assert "FAILED (exit 1)" in table and "FAILED (exit 3)" in table
    assert table.splitlines()[-1] == "total: 5 passed, 2 failed, 1 skipped"  # the crash counts as a failure


@pytest.fixture
def freezer_here() -> None:
    """The servers-slowed load needs a cgroup freezer; make test-stress skips that kind where there is none."""
    if os.environ.get(ROUND) == "servers-slowed":
        pytest.skip("this servers-slowed round's own freezer holds the test's servers (a cgroup holds a process once)")
    try:
        Freezer(f"jsclient-test-probe-{os.getpid()}").close()
    except FreezerUnavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.usefixtures("freezer_here")
def test_the_stress_pauser_freezes_only_servers_below_its_root_and_leaves_none_frozen() -> None:
    with NatsServer(jetstream=False) as mine:
        assert mine.proc is not None
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        nc = jsclient.connect(mine.url)
        try:
            assert servers_under(os.getpid()) == [mine.proc.pid]
            assert servers_under(child.pid) == []
            with slowed_servers(os.getpid(), stop_ms=500, every_ms=10) as pauser:
                assert pauser.frozen.wait(10)
                thaws = pauser.thaws
                nc.flush(timeout=10)  # a PING sent while the server is frozen: its PONG comes after the thaw
                assert pauser.thaws > thaws
                frozen_in = pauser.cgroup
                assert frozen_in.exists()
            assert not frozen_in.exists()
            nc.flush(timeout=10)  # answered: nothing left frozen
        finally:
            nc.close()
            child.kill()
            child.wait()


@pytest.mark.usefixtures("freezer_here")
@pytest.mark.parametrize("when", ["before the pauser comes round", "while the pauser holds it"])
def test_the_stress_pauser_leaves_a_server_the_test_stopped_itself_stopped(when: str) -> None:
    """A test that stops its server to see a fault (a heartbeat alarm, a stale link) keeps it stopped.

    SIGSTOP/SIGCONT bursts undid eight tests' faults in one servers-slowed round by continuing a server the test
    had stopped before the burst; after that was fixed, one more whose stop landed inside a burst.
    """
    with NatsServer(jetstream=False) as paused:
        assert paused.proc is not None
        pid = paused.proc.pid
        try:
            if when == "before the pauser comes round":
                paused.pause()
            with slowed_servers(os.getpid(), stop_ms=200, every_ms=10) as pauser:
                if when == "while the pauser holds it":
                    assert pauser.frozen.wait(10)
                    os.kill(pid, signal.SIGSTOP)
                    assert pauser.frozen.is_set()  # sent inside the freeze (200 ms is long enough here)
                thaws = pauser.thaws
                seen = set()
                while pauser.thaws < thaws + 3:  # over thaws of the pauser's
                    seen.add(state(pid))
                    time.sleep(0.005)
            # Stopped ("T"), frozen as well ("D"), or for an instant runnable at a thaw to take the pending stop
            # ("R"); never idle and answering again ("S", what a continued nats-server shows between frames).
            assert "S" not in seen, seen
            deadline = time.monotonic() + 10
            while state(pid) != "T" and time.monotonic() < deadline:
                time.sleep(0.005)
            assert state(pid) == "T"
        finally:
            paused.resume()


def test_side_by_side_test_processes_pick_ports_from_slices_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-xdist's workers each set PORT_SLOT (tests/conftest.py): their free ports never meet."""
    below = range(10000, server._ephemeral_ports().start)
    seen: list[set[int]] = []
    for index in range(3):
        monkeypatch.setenv(server.PORT_SLOT, f"{index}/3")
        ports = {server.free_port() for _ in range(40)}
        size = len(below) // 3
        assert all(below.start + index * size <= p < below.start + (index + 1) * size for p in ports), ports
        seen.append(ports)
    assert not (seen[0] & seen[1] or seen[1] & seen[2] or seen[0] & seen[2])
    monkeypatch.setenv(server.PORT_SLOT, "nonsense")  # read as no slot: the whole range
    assert server.free_port() in below


def test_the_classifiers_name_each_python_the_suite_runs_under() -> None:
    """setup.cfg's classifiers and README's list say which CPythons are supported: those make test-pythons runs
    the whole suite under (tests/pythons.py), no more and no fewer."""
    import configparser
    import re

    from .pythons import ROOT, SUPPORTED

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    listed = re.findall(r"Programming Language :: Python :: (3\.\d+)", cfg["metadata"]["classifiers"])
    assert tuple(listed) == SUPPORTED
    readme = (ROOT / "README.rst").read_text()
    assert f"passes on CPython {', '.join(SUPPORTED[:-1])} and {SUPPORTED[-1]}" in readme.replace("\n", " ")


def test_a_virtualenv_rebuilt_for_the_compat_subset_keeps_the_whole_suites_extras(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """make bench asks for 3.13's virtualenv without Spark and the docs; after setup.cfg changed, its rebuild
    dropped them from the one make test-pythons had built, and the next whole-suite run under 3.13 lacked both."""
    (tmp_path / "setup.cfg").write_text("[metadata]\n")
    stamp = tmp_path / ".venv-3.13" / ".installed"
    stamp.parent.mkdir()
    stamp.write_text("dev,docs,otel,spark,test,websocket")
    os.utime(stamp, (0, 0))  # older than setup.cfg: a rebuild is due
    steps: list[list[str]] = []
    monkeypatch.setattr(pythons, "ROOT", tmp_path)

    def run(step: list[str], **_: object) -> subprocess.CompletedProcess[bytes]:
        steps.append(step)
        return subprocess.CompletedProcess(step, 0)

    monkeypatch.setattr(subprocess, "run", run)
    pythons.venv("3.13", sys.executable, whole=False)
    assert steps[-1][-1] == ".[dev,docs,otel,spark,test,websocket]"
    assert stamp.read_text() == "dev,docs,otel,spark,test,websocket"
    steps.clear()
    pythons.venv("3.13", sys.executable, whole=True)  # up to date and wide enough: nothing is run
    assert steps == []


def test_the_map_of_tests_names_every_module_and_only_files_that_exist() -> None:
    """tests/README.rst tells a newcomer which tests cover the module they change: no module left off it."""
    text = (Path(__file__).parent / "README.rst").read_text()
    package = Path(jsclient.__file__).parent
    named = set(re.findall(r"``([\w/]+(?:\.py|/))``", text))
    modules = {str(p.relative_to(package)) for p in package.rglob("*.py")}
    missing = {m for m in modules if m not in named and f"{Path(m).parent}/" not in named}
    assert not missing, f"modules with no line in tests/README.rst: {sorted(missing)}"
    assert not {m for m in named if m.endswith(".py")} - modules, "tests/README.rst names a module that is gone"
    files = set(re.findall(r"\b((?:nemesis/)?test_\w+\.py)\b", text))
    assert files, "no test file named"
    assert not {f for f in files if not (Path(__file__).parent / f).exists()}, "a named test file is gone"
    every = {str(p.relative_to(Path(__file__).parent)) for p in Path(__file__).parent.rglob("test_*.py")}
    assert not every - files, f"test files the map does not name: {sorted(every - files)}"
