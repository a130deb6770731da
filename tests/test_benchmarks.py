"""The benchmark harness itself still runs (tiny counts; no timing is asserted, only that every client answered)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.server_behaviour("2.14", "the harness runs the fast-ingest rows; benchmarks run on the newest server")
def test_benchmark_harness_runs_every_client() -> None:
    proc = subprocess.run(
        [
            sys.executable, "-m", "benchmarks", "--repeat", "1", "--scale", "0.002",
            "--rows", "publish,callback,request,fetch_ack,direct_last,js_publish,js_publish_async,js_publish_stream,"
            "js_publish_stream_unpinned,js_publish_async_unpinned",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "failed" not in proc.stderr, proc.stderr[-2000:]
    # Each client's rate by round (README says make bench prints them), and the share of raw by round.
    assert re.search(r"direct_last +jsclient +[\d,]+ +\([\d,]+\)", proc.stderr), proc.stderr[-2000:]
    assert re.search(r"direct_last +% raw by round: \d+", proc.stderr), proc.stderr[-2000:]
    table = proc.stdout
    titles = ("publish msgs/s", "subscribe callback", "request/reply", "pull fetch(500)", "direct get, last")
    for title in (*titles, "js.publish"):
        line = next(line for line in table.splitlines() if line.startswith(title))
        numbers = [cell for cell in line[36:].split() if cell.replace(",", "").isdigit()]
        assert len(numbers) >= 2, line  # jsclient and at least one peer measured
    # The fast-ingest ratio (issue 22's target) is printed for both ways of running, the unpinned pair on a
    # server of its own.
    for how in ("pinned (the server on one core)", "nothing pinned"):
        assert f"fast-ingest / publish_async, {how}: " in table, table


def test_jsclient_and_raw_run_side_by_side_taking_turns_at_going_first() -> None:
    """The share of raw divides the rates of one round: its two runs are next to each other in every round."""
    from benchmarks.__main__ import OLD, round_order

    clients = ("jsclient", "nats-py", "raw", OLD)
    rounds = [round_order(clients, n) for n in range(4)]
    assert rounds[0] == ["jsclient", "raw", "nats-py", OLD]
    assert rounds[1] == ["raw", "jsclient", "nats-py", OLD]
    assert rounds[2] == rounds[0] and rounds[3] == rounds[1]
    assert round_order(("jsclient", "nats-py"), 1) == ["jsclient", "nats-py"]  # no raw: nothing to pair


def run_module(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` from the project root, which must succeed."""
    proc = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def test_turnaround_table_runs() -> None:
    """``python -m benchmarks.turnaround`` (README cites it) prints a rate for every added delay."""
    proc = run_module("benchmarks.turnaround", "--rounds", "1", "--block", "5")
    rows = [line for line in proc.stdout.splitlines() if line.strip().split(" ")[0].isdigit()]
    assert len(rows) == 8, proc.stdout


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (Debian's package)")
def test_instruction_count_runs() -> None:
    """``python -m benchmarks.instructions`` (README cites it) counts each part of a call on the own-read path.

    With the reader kept parked every call reads its own reply, so each kind of part is found; a run in
    which none were (the dump triggers named wrongly, say) would print zeros.
    """
    proc = run_module("benchmarks.instructions", "--calls", "20", "--what", "kv,publish")
    rows = [line.split() for line in proc.stdout.splitlines()[1:]]
    assert [row[1] for row in rows] == ["kv", "publish"], proc.stdout
    for row in rows:
        post, pre, _, wait = (int(cell.replace(",", "")) for cell in row[2:])
        assert post > 1000 and pre > 1000 and wait > 1000, proc.stdout
