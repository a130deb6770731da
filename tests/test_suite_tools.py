"""make test's part runner and make test-stress's load: what they print and whom they stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from jsclient import server
from jsclient.server import NatsServer

from .parts import Part, report, run
from .stress import process_state as state
from .stress import servers_under, slowed_servers


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


def test_the_stress_pauser_stops_only_servers_below_its_root_and_leaves_none_stopped() -> None:
    with NatsServer(jetstream=False) as mine:
        assert mine.proc is not None
        pid = mine.proc.pid
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            assert servers_under(os.getpid()) == [pid]
            assert servers_under(child.pid) == []
            with slowed_servers(os.getpid(), stop_ms=200, every_ms=50):
                deadline = time.monotonic() + 10
                while state(pid) != "T" and time.monotonic() < deadline:
                    time.sleep(0.005)
                assert state(pid) == "T"  # it was stopped at least once
            assert state(pid) != "T"
        finally:
            child.kill()
            child.wait()


def test_the_stress_pauser_leaves_a_server_the_test_stopped_itself_stopped() -> None:
    """A test that stops its server to see a fault (a heartbeat alarm, a stale link) keeps it stopped: the pauser
    continuing it undid eight tests' faults in one servers-slowed round."""
    with NatsServer(jetstream=False) as paused:
        assert paused.proc is not None
        os.kill(paused.proc.pid, signal.SIGSTOP)  # the test's own pause, before the pauser comes round
        try:
            deadline = time.monotonic() + 10
            while state(paused.proc.pid) != "T" and time.monotonic() < deadline:  # the stop takes effect
                time.sleep(0.005)
            with slowed_servers(os.getpid(), stop_ms=1, every_ms=20):
                seen = set()
                for _ in range(50):  # over many of the pauser's rounds
                    seen.add(state(paused.proc.pid))
                    time.sleep(0.01)
            assert seen == {"T"}
        finally:
            os.kill(paused.proc.pid, signal.SIGCONT)


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
