"""The benchmark harnesses still run: every row of ``make bench`` and ``make bench-spark`` for every client.

Tiny counts; no timing is asserted, only that every (row, client) gave a figure (a rate and the CPU per
operation), that a failed run is reported as an error rather than a missing figure, and that the tables
and the JSON say what the docs and issue 43 promise.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks.report import US_FIGURE, us
from tests.pythons import find as find_python

ROOT = Path(__file__).resolve().parent.parent
#: natsio's rows run on a Python 3.13: none on this machine (and the runner older), they cannot.
NO_313 = sys.version_info < (3, 13) and find_python("3.13") is None


def run_module(module: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` from the project root (which must succeed, with ``check``)."""
    proc = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    if check:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.mark.server_behaviour("2.14", "the harness runs the fast-ingest rows; benchmarks run on the newest server")
@pytest.mark.timeout(1200)  # the first run builds .venv-3.13 (tests/pythons.py), as make test's newest part does
def test_every_bench_row_gives_every_client_a_figure(tmp_path: Path) -> None:
    """``make bench``, every row, one round at a tiny scale: each client of each row a rate and CPU per op."""
    from benchmarks.__main__ import EVERY_ROW, THREADS

    out = tmp_path / "bench.json"
    proc = run_module("benchmarks", "--repeat", "1", "--scale", "0.002", "--smoke", "--json", str(out))
    saved = json.loads(out.read_text())
    assert saved["errors"] == [], saved["errors"]
    # Every client of every row ran, but a client this machine has no interpreter for (natsio without a 3.13),
    # which the file and the tables say.
    no_311 = sys.version_info >= (3, 12) and find_python("3.11") is None  # pynats2 runs on nothing newer
    assert set(saved["not measured"]) <= {*(["natsio"] if NO_313 else []), *(["pynats2"] if no_311 else [])}, (
        saved["not measured"])
    for client in saved["not measured"]:
        assert f"not measured: {client}: it needs CPython" in proc.stdout, proc.stdout[:3000]
    if not NO_313:  # natsio ran on its 3.13, and the tables say so
        assert saved["pythons"]["natsio"].startswith("3.13") and saved["versions"]["natsio"].startswith("1.")
        natsio_on = re.escape(saved["pythons"]["natsio"]) + r": [\w, -]*\bnatsio\b"  # in its release's group
        assert re.search("Python of each client: .*" + natsio_on, proc.stdout), proc.stdout[:3000]
        assert "natsio (py3.13)" in proc.stdout and "ratio natsio" in proc.stdout, proc.stdout[:3000]
    missing = []
    for row in EVERY_ROW:
        for client in (c for c in row.clients if c not in saved["not measured"]):
            got: dict[str, Any] = saved["results"][row.key].get(client) or {}
            wanted = ("rate", "cpu_us", "p50_us", "p99_us") if row.table == THREADS else ("rate", "cpu_us")
            if any(got.get(name) is None for name in wanted) or len(got.get("rounds", [])) != 1:
                missing.append(f"{row.key} {client}: {got}")
    assert not missing, "\n".join(missing)
    # Each row's title in the printed tables, and what the JSON records beside the figures.
    for row in EVERY_ROW:
        assert row.title in proc.stdout, row.title
    assert set(saved["versions"]) >= {"jsclient", "nats-py", "nats-py-sync", "pynats2", "nats-server"} - set(
        saved["not measured"])
    assert saved["pythons"]["jsclient"] and saved["pythons"]["nats-py"] and "Python of each client: " in proc.stdout
    assert saved["machine"]["cores"] and saved["machine"]["cpu"] and saved["machine"]["python"]
    assert re.match(r"\d{4}-\d\d-\d\dT", saved["date"])
    # Each client's rate by round (the docs say make bench prints them), and the share of raw by round.
    assert re.search(r"direct_last +jsclient +[\d,]+ +[\d.,]+ µs/op +\([\d,]+\)", proc.stderr), proc.stderr[-2000:]
    assert re.search(r"direct_last +% raw by round: \d+", proc.stderr), proc.stderr[-2000:]
    # The fast-ingest ratio (issue 22's target) is printed for both ways of running, the unpinned pair on a
    # server of its own; and the feature-against-feature rows are in a table of their own.
    for how in ("pinned (the server on one core)", "nothing pinned"):
        assert f"fast-ingest / publish_async, {how}: " in proc.stdout, proc.stdout
    features = proc.stdout.split("Feature against feature")[1].split("Threads of one process")[0]
    assert "direct get batch" in features and "kv.get" not in features
    # The rows at a distance: a table of their own, each row's distance and what a round trip brings kept in the
    # JSON (the latency bound's), jsclient with spin_wait=0 beside it, and what pipelining gains below the table.
    distance = proc.stdout.split("At a distance:")[1]
    assert "spin_wait=0" in distance and "rate / spin_wait=0" in distance, distance
    described = saved["rows"]["distance_request_1ms"]
    assert (described["table"], described["distance"], described["in_flight"]) == ("at a distance", 0.001, 1)
    assert "jsclient-spin0" in described["clients"]
    for what in ("16 requests in flight over 1", "fetch(500) over fetch(10)", "publish_async over js.publish"):
        for where in ("0.25 ms", "1 ms"):
            assert re.search(f"{re.escape(what)}, {where} each way: jsclient [\\d.]+x, nats-py [\\d.]+x", distance), (
                what, where, distance)
    # --from-json prints the same tables.
    again = run_module("benchmarks", "--from-json", str(out))
    assert again.stdout == proc.stdout[proc.stdout.index("jsclient benchmarks,"):]


def natsio_rows() -> list[str]:
    from benchmarks.__main__ import EVERY_ROW

    return [row.key for row in EVERY_ROW if "natsio" in row.clients]


def test_natsio_is_a_peer_of_every_row_whose_work_it_has() -> None:
    """natsio's API reaches publish, both ways of subscribing, request/reply, every JetStream client-speed row but
    push_ack (it has pull consumers only) and the rows at a distance; not the threads nor the feature rows."""
    from benchmarks.__main__ import EVERY_ROW, FEATURES, THREADS

    rows = set(natsio_rows())
    assert {"publish", "next_msg", "callback", "request", "request_concurrent", "ws_publish", "ws_next_msg",
            "js_publish", "js_publish_async", "fetch_ack", "consume", "consumer_messages", "ordered", "direct_last",
            "direct_last_changing", "kv_get", "kv_get_changing", "kv_put", "obj_put", "obj_get",
            "obj_get_writeinto"} <= rows
    assert {r.key for r in EVERY_ROW if r.key.startswith("distance_") and "nats-py" in r.clients} <= rows
    assert "push_ack" not in rows
    assert not {r.key for r in EVERY_ROW if r.table in (FEATURES, THREADS)} & rows


def test_each_peer_runs_on_the_python_where_it_does_best() -> None:
    """nats-py (and the clients over it) on 3.11 where the machine has one (its publish is many times slower on
    3.12 to 3.13.0: CPython gh-146507), pynats2 on 3.11 too (it imports pkg_resources, which 3.12+'s virtualenvs
    lack), natsio on 3.13 (in .venv-3.13, with natsio installed), jsclient and raw on the runner's own
    interpreter; a peer left out, with why, on a machine without its release."""
    import platform

    from benchmarks import pythons

    found, missing = pythons.resolve({"jsclient", "raw", "pynats2", "nats-py", "nats-py-sync", "natsio"})
    for client in ("jsclient", "raw"):
        assert found[client] == pythons.Interpreter(sys.executable, platform.python_version())
    if find_python("3.11") is not None:
        assert found["nats-py"].version.startswith("3.11.") and found["nats-py-sync"] == found["nats-py"]
        assert found["pynats2"] == found["nats-py"]
        assert pythons.versions({"pynats2": found["pynats2"]})["pynats2"].startswith("0.")
    elif sys.version_info >= (3, 12):
        assert "a CPython older than 3.12" in missing.pop("pynats2")
    if NO_313:
        assert "natsio" not in found and "needs CPython 3.13 or later" in missing["natsio"]
        return
    assert not missing and found["natsio"].version.startswith("3.13.")
    assert pythons.versions({"natsio": found["natsio"]})["natsio"].startswith("1.")


def test_the_delay_proxy_passes_every_byte_in_order_both_ways_and_the_end() -> None:
    """benchmarks.delay_proxy in front of an echo server: what goes through comes back whole and in order, in
    chunks larger than one read, and a side's end reaches the other once what it sent before has."""
    import socket
    import threading

    from benchmarks.delay_proxy import delay_proxy

    listener = socket.create_server(("127.0.0.1", 0))

    def echo() -> None:
        conn, _ = listener.accept()
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    threading.Thread(target=echo, daemon=True).start()
    sent = bytes(range(256)) * 8192  # 2 MiB: many reads of the proxy's
    with delay_proxy(f"nats://127.0.0.1:{listener.getsockname()[1]}", 0.0005) as url:
        port = int(url.rpartition(":")[2])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            threading.Thread(target=lambda: (sock.sendall(sent), sock.shutdown(socket.SHUT_WR)), daemon=True).start()
            got = bytearray()
            while data := sock.recv(65536):  # until the echo server's end, passed on after its last bytes
                got += data
    listener.close()
    assert bytes(got) == sent


def test_a_failed_run_is_an_error_not_a_missing_figure() -> None:
    """A measurement process that fails gives the reason; the JSON keeps it, the table and the exit status say it."""
    from benchmarks import report
    from benchmarks.__main__ import Row, Runs, measure

    row = Row("publish", "publish msgs/s (128 B)", 100, ("jsclient", "nats-py"), None)
    server = SimpleNamespace(url="nats://127.0.0.1:1", ws_url="ws://127.0.0.1:1")
    why = measure("no-such-client", row, server, 0.01)  # type: ignore[arg-type]
    assert isinstance(why, str) and "KeyError" in why, why
    runs = Runs([None], [f"round 1: {why}"])
    results = {"publish": {"jsclient": runs.summary()}}
    assert results["publish"]["jsclient"]["rate"] is None
    assert report.errors([row], results) == [f"publish jsclient round 1: {why}"]
    table = "\n".join(report.speed_table([row], results, rst=False))
    assert "error" in table


def test_old_checkout_runs_this_trees_rows_with_its_own_jsclient() -> None:
    """``--old TREE``: this tree's benchmark code (every row exists) over the other tree's jsclient.

    The launcher asserts that jsclient came from TREE; this tree stands in for an older one.
    """
    proc = run_module("benchmarks", "--repeat", "1", "--scale", "0.002", "--rows", "kv_get_changing", "--old", ".")
    line = next(line for line in proc.stdout.splitlines() if line.startswith("kv.get, values changing"))
    assert "error" not in line and line.rstrip().endswith("x"), line  # new/old: both gave a rate


def test_jsclient_and_raw_run_side_by_side_taking_turns_at_going_first() -> None:
    """The share of raw divides the rates of one round: its two runs are next to each other in every round."""
    from benchmarks.__main__ import OLD, round_order

    clients = ("jsclient", "nats-py", "raw", OLD)
    rounds = [round_order(clients, n) for n in range(4)]
    assert rounds[0] == ["jsclient", "raw", "nats-py", OLD]
    assert rounds[1] == ["raw", "jsclient", "nats-py", OLD]
    assert rounds[2] == rounds[0] and rounds[3] == rounds[1]
    assert round_order(("jsclient", "nats-py"), 1) == ["jsclient", "nats-py"]  # no raw: nothing to pair


SPARK_ROWS = (
    "BulkReader pulls, one process",
    "ordered consumer replay, one process",
    "spark batch read, 1 partition(s)",
    "spark batch read, 4 partition(s)",
    "publish_async loop, one process",
    "publish_async loop with message ids, one process",
    "publish_batch loop of atomic batches of 1000, one process",
    "spark write, 2 partitions, atomic batches + markers",
    "spark write, 2 partitions, message ids",
    "spark filtered read (1 % of the subjects), pushed",
    "spark filtered read (1 % of the subjects), unpushed",
    "kv.keys() + kv.get per key, one process",
    "spark bucket read, 4 partitions",
    "kv.put loop, one process",
    "spark bucket write, 2 partitions, atomic batches + markers",
    "streaming bound: rows made in memory -> dropped, same query",
    "streaming read->write (checkpointed)",
)


@pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None or shutil.which("java") is None, reason="needs pyspark and java"
)
@pytest.mark.server_behaviour("2.12", "the harness runs the atomic write rows; benchmarks run on the newest server")
def test_every_bench_spark_row_gives_a_figure() -> None:
    """``make bench-spark`` at a tiny scale (one round): every row prints a rate."""
    proc = run_module("benchmarks.spark_bench", "--messages", "2000", "--writes", "1000", "--keys", "500",
                      "--rounds", "1")
    for name in SPARK_ROWS:
        line = next((line for line in proc.stdout.splitlines() if line.startswith(name)), "")
        assert re.match(re.escape(name) + r" +[\d,]+", line), (name, proc.stdout)
    assert "nats-server CPU per message published in one process: plain" in proc.stdout, proc.stdout
    streaming = rf"^streaming: {US_FIGURE} µs of CPU per row outside nats-server"
    assert re.search(streaming, proc.stdout, re.M), proc.stdout
    jit = rf"^of which the JVM's JIT compiler threads: {US_FIGURE} µs per row"
    assert re.search(jit, proc.stdout, re.M), proc.stdout


@pytest.mark.parametrize("value", [0.0, 0.004, 1.23, 9.999, 10.0, 15.04, 99.96, 100.0, 1525.3, 1_234_567.0])
def test_the_figure_pattern_matches_every_form_a_figure_is_printed_in(value: float) -> None:
    """The smoke tests read printed figures with US_FIGURE: a busy machine's 1,525 µs must read as well as 15.0
    (a pattern without the thousands separator failed make test on a loaded 2-core machine)."""
    printed = us(value)
    assert re.fullmatch(US_FIGURE, printed), printed
    assert float(printed.replace(",", "")) == pytest.approx(value, rel=0.01, abs=0.006)
    assert not re.fullmatch(US_FIGURE, us(None))  # "-": no figure


def test_turnaround_table_runs() -> None:
    """``python -m benchmarks.turnaround`` (the performance guide cites it) prints a rate for every added delay."""
    proc = run_module("benchmarks.turnaround", "--rounds", "1", "--block", "5")
    rows = [line for line in proc.stdout.splitlines() if line.strip().split(" ")[0].isdigit()]
    assert len(rows) == 8, proc.stdout


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (Debian's package)")
def test_instruction_count_runs() -> None:
    """``python -m benchmarks.instructions`` (the performance guide cites it) counts each
    part of a call on the own-read path.

    With the reader kept parked every call reads its own reply, so each kind of part is found; a run in
    which none were (the dump triggers named wrongly, say) would print zeros.
    """
    proc = run_module("benchmarks.instructions", "--calls", "20", "--what", "kv")  # one: most of it is valgrind's
    rows = [line.split() for line in proc.stdout.splitlines()[1:]]  # start-up, about 35 s of CPU a kind
    assert [row[1] for row in rows] == ["kv"], proc.stdout
    for row in rows:
        post, pre, _, wait = (int(cell.replace(",", "")) for cell in row[2:])
        assert post > 1000 and pre > 1000 and wait > 1000, proc.stdout


def test_a_peers_failed_round_is_listed_and_only_ours_fail_the_run() -> None:
    """A round of jsclient's (or raw's) without a figure is an error; a peer's is one too when the row has no
    figure of it at all, and otherwise a peer failure: listed beside the results, not the run's failure."""
    from benchmarks import report
    from benchmarks.__main__ import Row, Runs
    from benchmarks.common import Figure

    row = Row("publish", "publish msgs/s (128 B)", 100, ("jsclient", "natsio", "nats-py"), None)
    one_failed = Runs([None, Figure(10.0, 1.0)], ["round 1: natsio stalled"]).summary()
    all_failed = Runs([None], ["round 1: nats-py stalled"]).summary()
    results = {"publish": {"natsio": one_failed, "nats-py": all_failed, "jsclient": one_failed}}
    assert report.peer_failures([row], results) == ["publish natsio round 1: natsio stalled"]
    assert sorted(report.errors([row], results)) == [
        "publish jsclient round 1: natsio stalled", "publish nats-py round 1: nats-py stalled"
    ]
