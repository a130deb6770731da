"""`make bench`: jsclient beside nats-py, nats-py-sync, nats-py on a loop thread, pynats2, natsio and a raw-socket
bound.

Usage: python -m benchmarks [--repeat N] [--scale F] [--rows a,b] [--clients a,b] [--json FILE] [--old TREE]

One nats-server, one shared responder process, one feeder process per
subscribe measurement; every (row, client) pair runs in a fresh process so no
client inherits another's threads or event loop.  On a machine with two or
more cores the server, feeder, churner, responder and delay proxy are pinned to core 0 and the
measured client to core 1, the same for every client, so the infrastructure
does not steal the client's core at random (unpinned runs here varied by 2x).  Each pair runs ``--repeat``
times, the clients of a row taking turns (jsclient and raw side by side, see :func:`round_order`), and the
median is reported: the rate, and beside it the client process's CPU per operation over the timed part
(user + sys of all its threads), with the ratio to nats-py (and to natsio), the share of raw and the target.

Each peer runs on the CPython where it does best (:mod:`benchmarks.pythons`): nats-py on 3.11, natsio on 3.13
(in the ``.venv-3.N`` that tests/pythons.py builds), the others on the runner's own; the JSON and the tables
say which interpreter each client ran on.

Four tables: client speed (every client doing the same work), feature against feature (rows where the
clients do different things, labelled so: not a measure of client speed), threads (calls from 1, 8 and 64
threads of one process, with latency), and at a distance (the server behind a proxy that holds every chunk
0.25 ms or 1 ms each way, benchmarks.delay_proxy; jsclient also with spin_wait=0).  A run that gives no
figure is an error: it is shown in its cell and listed, and the run exits with status 1.  These are
measurements, not tests: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks import common, pythons, report
from benchmarks.common import ROOT, Figure
from benchmarks.delay_proxy import delay_proxy
from benchmarks.report import DISTANCE, FEATURES, MAIN, SHARE, SPIN0, THREADS
from jsclient.server import NatsServer


@dataclass(frozen=True)
class Row:
    key: str
    title: str
    count: int
    clients: tuple[str, ...]
    target: float | None  # required jsclient / nats-py ratio
    module: str = "benchmarks.clients"
    higher_is_better: bool = True
    websocket: bool = False  # the client connects to the server's ws:// listener (feeders stay on TCP)
    #: Measured on a server of its own: on the shared one, whose memory holds the 800,000 messages the
    #: other rows read, object puts ran at 280 or 680 MiB/s by turns (a collection of that heap, or not).
    own_server: bool = False
    #: Neither the client nor its server (one of its own) is pinned: for a comparison the pinning would decide.
    #: Fast-ingest leaves a publisher nearly idle while the server stores (about 1 us of client CPU per message
    #: against 3 to 4.5 us of the server's), so with the server held to one core that row measures nats-server
    #: alone; on one machine whose cores both may work, it is the bulk load a user runs.
    pinned: bool = True
    table: str = MAIN
    #: Seconds each way through the delay proxy (benchmarks.delay_proxy); None: straight to the server.
    distance: float | None = None
    #: What one round trip brings at most (requests in flight, a fetch's batch): the latency bound's numerator.
    in_flight: int | None = None


#: Every client, in the tables' order.  nats-py-sync is the blocking wrapper a sync user finds on PyPI;
#: nats-py-thread is nats-py on an asyncio loop in a background thread, called through
#: run_coroutine_threadsafe (benchmarks.common.LoopThread); natsio is the asyncio client with a sans-IO core
#: (Python 3.13+, run on 3.13: benchmarks.pythons).
NATSIO = "natsio"
PEERS = ("jsclient", "nats-py", "nats-py-sync", "nats-py-thread", "pynats2", NATSIO, "raw")
ALL = PEERS
SYNC = ("nats-py-sync", "nats-py-thread")
ROWS = [
    Row("publish", "publish msgs/s (128 B)", 500_000, ALL, 2.5),
    Row("next_msg", "subscribe next_msg msgs/s", 200_000, ALL, 8.0),
    # nats-py-sync has no callback API.
    Row("callback", "subscribe callback msgs/s", 200_000, ("jsclient", "nats-py", "pynats2", NATSIO, "raw"), 1.5),
    Row("request", "request/reply req/s, 1 in flight", 5_000, ALL, None),
    Row("request_concurrent", "request/reply req/s, 16 in flight", 20_000,
        ("jsclient", "nats-py", "nats-py-thread", NATSIO, "raw"), 2.0),
    Row("request_threads", "request/reply req/s, 16 threads", 20_000, ("jsclient",), None),
    # Target: the TCP rows' targets less a quarter (WebSocket framing costs every client alike).
    Row("ws_publish", "WebSocket publish msgs/s (128 B)", 500_000, ("jsclient", "nats-py", "nats-py-sync", NATSIO),
        1.9, websocket=True),
    Row("ws_next_msg", "WebSocket next_msg msgs/s", 200_000, ("jsclient", "nats-py", "nats-py-sync", NATSIO), 6.0,
        websocket=True),
]
JS = ("jsclient", "nats-py")
#: natsio's JetStream has every client-speed row but push_ack (it has pull consumers only, as ADR-37 has it).
JS_PEERS = (*JS, NATSIO)
JS_RAW = (*JS_PEERS, "raw")  # the raw socket shows what the server allows
KV_PEERS = (*JS_PEERS, *SYNC, "raw")  # nats-py-sync's API reaches KV and (by its request) a JetStream publish
DIRECT_PEERS = (*JS_PEERS, "nats-py-thread", "raw")  # nats-py-sync has no direct get
JS_MODULE = "benchmarks.js_clients"
JS_ROWS = [
    Row("js_publish", "js.publish (await each ack) msgs/s", 20_000, KV_PEERS, 2.5, JS_MODULE),
    Row("js_publish_async", "js.publish_async (window) msgs/s", 100_000, JS_RAW, 3.0, JS_MODULE),
    Row("push_ack", "push next_msg + ack msgs/s", 100_000, JS, 3.0, JS_MODULE),
    Row("fetch_ack", "pull fetch(500) + ack msgs/s", 200_000, JS_PEERS, 3.0, JS_MODULE),
    Row("pull_messages", "pull messages() + ack msgs/s", 200_000, ("jsclient",), None, JS_MODULE),
    Row("consume", "consume(cb) + ack msgs/s (ADR-37)", 200_000, JS_PEERS, 3.0, JS_MODULE),
    Row("consumer_messages", "consumer.messages() + ack msgs/s", 200_000, JS_PEERS, 3.0, JS_MODULE),
    Row("ordered", "ordered consumer replay msgs/s", 500_000, JS_PEERS, 2.0, JS_MODULE),
    Row("direct_last", "direct get, last by subject ops/s", 5_000, DIRECT_PEERS, 2.0, JS_MODULE),
    Row("direct_last_changing", "direct get, last by subject, values changing ops/s", 5_000, DIRECT_PEERS, None,
        JS_MODULE),
    Row("kv_get", "kv.get ops/s", 5_000, KV_PEERS, 2.0, JS_MODULE),
    Row("kv_get_changing", "kv.get, values changing ops/s", 5_000, KV_PEERS, None, JS_MODULE),
    Row("kv_put", "kv.put ops/s", 5_000, KV_PEERS, None, JS_MODULE),
    Row("obj_put", "object store put MiB/s (one 64 MiB object)", 64, JS_PEERS, 2.0, JS_MODULE, own_server=True),
    Row("obj_get", "object store get MiB/s (nats-py: result.data)", 64, JS_PEERS, 2.0, JS_MODULE, own_server=True),
    Row("obj_get_writeinto", "object store get into a file object MiB/s", 64, JS_PEERS, None, JS_MODULE,
        own_server=True),
    Row("watchdog", "watchdog: 5,000 heartbeat subs, % of a core", 5_000, ("jsclient",), None, JS_MODULE, False),
    # Feature against feature: the clients (or jsclient's two rows) do different work.
    Row("js_publish_stream", "fast-ingest publish_stream (nats-py: async) msgs/s", 200_000, JS, None, JS_MODULE,
        table=FEATURES),
    Row("js_publish_batch", "atomic batch of 1000 (nats-py: async) msgs/s", 100_000, JS, None, JS_MODULE,
        table=FEATURES),
    Row("direct_batch", "direct get batch (nats-py: single gets) msgs/s", 100_000, JS, 10.0, JS_MODULE,
        table=FEATURES),
    Row("js_publish_stream_unpinned", "bulk load, nothing pinned: publish_stream msgs/s", 200_000, ("jsclient",),
        None, JS_MODULE, own_server=True, pinned=False, table=FEATURES),
    Row("js_publish_async_unpinned", "bulk load, nothing pinned: publish_async msgs/s", 200_000, ("jsclient",),
        None, JS_MODULE, own_server=True, pinned=False, table=FEATURES),
]
THREAD_PEERS = ("jsclient", "nats-py-thread", "nats-py-sync", "pynats2")
THREAD_ROWS = [
    Row(f"threads_{what}_{threads}", f"{title}, {threads} thread{'s' if threads > 1 else ''}", 10_000,
        THREAD_PEERS if what == "request" else THREAD_PEERS[:3], None, "benchmarks.threads", table=THREADS)
    for what, title in (("request", "request/reply"), ("kv_get", "kv.get")) for threads in (1, 8, 64)
]
#: The server at a distance: every client through the same delay proxy, jsclient also with spin_wait=0.
#: nats-py-sync's API reaches request/reply, js.publish (as its request) and kv.get; natsio's every row's work.
FAR = ("jsclient", SPIN0, "nats-py", NATSIO)
FAR_SYNC = (*FAR, "nats-py-sync")
#: (key, title, seconds each way): the distances measured.
PLACES = (("250us", "0.25 ms each way", 0.00025), ("1ms", "1 ms each way", 0.001))
#: (work, its title, operations at each of PLACES (fewer where the distance bounds the rate, so that every
#: run takes about as long), clients, what one round trip brings at most: None, not bound that way).  The 1 ms
#: request row runs longer: its comparison with spin_wait=0 must not rest on a connection's first waits, whose
#: polls back off only as they miss.
DISTANCE_WORK = (
    ("request", "request/reply, 1 in flight", (1_200, 1_500), (*FAR_SYNC, "raw"), 1),
    ("request_concurrent", "request/reply, 16 in flight", (10_000, 4_000), FAR, 16),
    ("js_publish", "js.publish (await each ack)", (1_200, 400), FAR_SYNC, 1),
    ("js_publish_async", "js.publish_async (window of 4,000)", (20_000, 20_000), FAR, 4_000),
    ("fetch_ack_10", "pull fetch(10) + ack", (5_000, 2_000), FAR, 10),
    ("fetch_ack_500", "pull fetch(500) + ack", (20_000, 20_000), FAR, 500),
    ("kv_get", "kv.get", (1_200, 400), FAR_SYNC, 1),
    ("ordered", "ordered consumer replay", (50_000, 50_000), FAR, None),
)
DISTANCE_MODULE = "benchmarks.distance"
DISTANCE_ROWS = [
    # What the proxy itself costs: the same request loop straight to the server and through the proxy at no delay.
    Row("distance_request_direct", "request/reply, 1 in flight, straight to the server", 3_000, ("jsclient", "raw"),
        None, DISTANCE_MODULE, table=DISTANCE),
    Row("distance_request_0ms", "request/reply, 1 in flight, through the proxy at 0 ms", 3_000, ("jsclient", "raw"),
        None, DISTANCE_MODULE, table=DISTANCE, distance=0.0),
] + [
    Row(f"distance_{work}_{key}", f"{title}, {where}", count, clients, None, DISTANCE_MODULE, table=DISTANCE,
        distance=delay, in_flight=bound_by)
    for work, title, counts, clients, bound_by in DISTANCE_WORK
    for (key, where, delay), count in zip(PLACES, counts, strict=True)
]
#: jsclient with OpenTelemetry on (benchmarks/instrumented.py) beside the same work off: the rows issue 59 names.
INSTRUMENTED_MODULE = "benchmarks.instrumented"
INSTRUMENTED_ROWS = [
    Row(f"otel_{row.key}", row.title, row.count, ("jsclient", report.OTEL_DROP, report.OTEL_BATCH), None,
        INSTRUMENTED_MODULE, table=report.INSTRUMENTED)
    for row in ROWS + JS_ROWS
    if row.key in ("publish", "next_msg", "request", "js_publish", "js_publish_async", "fetch_ack")
]
EVERY_ROW = ROWS + JS_ROWS + THREAD_ROWS + DISTANCE_ROWS + INSTRUMENTED_ROWS
#: nats-py's single direct gets take ~0.3 ms each: it gets fewer, its rate is per message all the same.
SHORTER_FOR_PEER = {"direct_batch": 5_000}
#: The watchdog's population with --smoke.
SMOKE_WATCHDOG = 20


INFRA_CORES = {0}
CLIENT_CORES = {1}


def pinning() -> bool:
    return hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2


def pin_process(pid: int, cores: set[int]) -> None:
    """Pin every thread of ``pid``: sched_setaffinity(pid) moves only the thread whose id is ``pid``."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(tid), cores)


@contextlib.contextmanager
def started(server: NatsServer, *, pinned: bool = True) -> Iterator[NatsServer]:
    """A server pinned to the infrastructure core (unless not ``pinned``), stopped at the end."""
    with server:
        if pinned and pinning():
            assert server.proc is not None
            pin_process(server.proc.pid, INFRA_CORES)
        yield server


def pin_client() -> None:
    """preexec_fn for measured processes: run on the client core."""
    if pinning():
        os.sched_setaffinity(0, CLIENT_CORES)


#: ``--old TREE``: a second jsclient (another checkout) measured in turns with this one.
OLD = "jsclient-old"
#: How an ``--old`` run starts: this tree's benchmark code (so every row and figure exists in both), the
#: other tree's jsclient (put first on the path once ``benchmarks`` is imported from this one).
OLD_LAUNCHER = (
    "import runpy, sys; import benchmarks; sys.path.insert(0, sys.argv[1]); import jsclient; "
    "assert jsclient.__file__.startswith(sys.argv[1]), jsclient.__file__; "
    "sys.argv = sys.argv[2:]; runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"
)


@dataclass
class Runs:
    """One (row, client) over the rounds: each round's figure, or None where the run failed and why."""

    figures: list[Figure | None] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def median(self, name: str) -> float | None:
        values = [getattr(f, name) for f in self.figures if f is not None and getattr(f, name) is not None]
        return statistics.median(values) if values else None

    def summary(self) -> dict[str, Any]:
        """What the JSON keeps: the median of each figure, every round's figures, and the errors."""
        out: dict[str, Any] = {name: self.median(name) for name in ("rate", "cpu_us", "p50_us", "p99_us")}
        out = {name: value for name, value in out.items() if value is not None or name in ("rate", "cpu_us")}
        out["rounds"] = [None if f is None else {k: v for k, v in asdict(f).items() if v is not None}
                         for f in self.figures]
        if self.errors:
            out["errors"] = self.errors
        return out


def count_for(client: str, row: Row, scale: float, smoke: bool) -> int:
    """The work of one run: the row's count scaled, less for a peer that would take minutes over it."""
    count = max(100, int(row.count * scale))
    if client == "pynats2" and row.key.startswith(("request", "threads_request")):
        count = max(100, count // 10)  # it subscribes and unsubscribes per request
    if client == "nats-py" and row.key in SHORTER_FOR_PEER:
        count = max(100, int(SHORTER_FOR_PEER[row.key] * scale))
    if row.key == "watchdog":
        count = SMOKE_WATCHDOG if smoke else row.count  # a fixed population, not a work count
    if row.key.startswith("obj_"):
        count = max(1, int(row.count * scale))  # MiB, not messages
    return count


def measure(client: str, row: Row, server: NatsServer, scale: float, old_tree: str = "",
            smoke: bool = False, via: str = "", python: str = "") -> Figure | str:
    """One run of (row, client) in a fresh process of ``python`` (the runner's interpreter if not given),
    connecting to ``via`` if given (a delay proxy), else to the server: its figure, or why it gave none."""
    url = via or (server.ws_url if row.websocket else server.url)
    args = ["jsclient" if client == OLD else client, row.key, url, str(count_for(client, row, scale, smoke))]
    start = ["-c", OLD_LAUNCHER, old_tree, row.module] if client == OLD else ["-m", row.module]
    env = {**os.environ, "BENCH_TCP_URL": server.url}  # for the feeder of a WebSocket row
    if smoke:
        env["BENCH_SMOKE"] = "1"
    try:
        proc = subprocess.run(
            [python or sys.executable, *start, *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            preexec_fn=pin_client if row.pinned else None,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return "no figure in 600 s"
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        return last[0][:300]
    try:
        return Figure(**json.loads(proc.stdout.strip().splitlines()[-1]))
    except (ValueError, TypeError, IndexError) as exc:
        return f"unreadable output ({exc}): {proc.stdout[-200:]!r}"


def round_order(clients: tuple[str, ...], round_no: int) -> list[str]:
    """The clients of one round: jsclient-spin0, jsclient and raw (those of them the row has) first and side by
    side, jsclient in the middle, their order reversed every other round.

    "% raw" divides the two rates of a round (and the distance rows divide
    jsclient's figures by spin_wait=0's), so the two should run as close in
    time as they can: with nats-py's run between them (a second or more, and
    a process start) a slow spell of the machine could fall on one and not
    the other.  Taking turns at going first cancels any cost or gain of
    following another client's run.
    """
    group = [c for c in (SPIN0, report.OTEL_DROP, "jsclient", report.OTEL_BATCH, "raw") if c in clients]
    if round_no % 2:
        group.reverse()
    return group + [c for c in clients if c not in group]


def paired_ratios(runs: dict[str, Runs], mine: str, base: str, name: str = "rate") -> list[float]:
    """``mine``'s figure ``name`` over ``base``'s, round by round (the rounds in which both gave one).

    The two run one after the other in each round, so a machine that is slower for a while weighs on
    both alike; the ratio of the two medians mixes rounds, and on a shared VM it moved by 15 points
    between runs of the same code (the raw socket alone went from 14,000 to 25,000 round trips/s).
    """
    if mine not in runs or base not in runs:
        return []
    pairs = zip(runs[mine].figures, runs[base].figures, strict=True)
    return [getattr(a, name) / getattr(b, name) for a, b in pairs if a is not None and b is not None]


def paired_shares(runs: dict[str, Runs]) -> list[float]:
    """jsclient as a percentage of raw, round by round (see :func:`paired_ratios`)."""
    return [100 * ratio for ratio in paired_ratios(runs, "jsclient", "raw")]


def versions(old_tree: str = "", interpreters: dict[str, pythons.Interpreter] | None = None) -> dict[str, str]:
    """Every client's and nats-server's version, as measured (each peer's read from the interpreter that runs it;
    and an ``--old`` checkout's commit)."""
    found = common.versions(("nats-py", "nats-py-sync", "pynats2"),
                            {OLD: f"{old_tree} ({common.git_head(old_tree)})"} if old_tree else None)
    return found | pythons.versions(interpreters or {})


def interpreters_for(rows: list[Row], old_tree: str = "") -> tuple[list[Row], dict[str, pythons.Interpreter],
                                                                    dict[str, str]]:
    """The rows as this machine can run them (a client with no interpreter it runs on left out), each client's
    interpreter (benchmarks.pythons), and the clients left out, with why."""
    clients = {client for row in rows for client in row.clients}
    found, missing = pythons.resolve(clients)
    if old_tree:
        found[OLD] = pythons.runner()
    for client, why in missing.items():
        print(f"  {client} is not measured: it {why}", file=sys.stderr)
    runnable = [replace(row, clients=tuple(c for c in row.clients if c not in missing)) for row in rows]
    return runnable, found, missing


def run_rows(rows: list[Row], args: argparse.Namespace,
             interpreters: dict[str, pythons.Interpreter] | None = None) -> dict[str, dict[str, Any]]:
    """Measure every row, clients taking turns within each round, each client on its interpreter (the runner's
    if not given); the results as the JSON keeps them."""
    where = {client: found.path for client, found in (interpreters or {}).items()}
    results: dict[str, dict[str, Any]] = {}
    with NatsServer(jetstream=True, websocket=True) as server:
        if pinning():
            assert server.proc is not None
            pin_process(server.proc.pid, INFRA_CORES)  # threads it starts later inherit it
        responder = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.responder", server.url, "bench.req"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
        )
        assert responder.stdout is not None
        responder.stdout.readline()
        if pinning():
            pin_process(responder.pid, INFRA_CORES)
        if any(r.module != "benchmarks.clients" for r in rows):
            from benchmarks.js_clients import prepare

            print("  filling the shared streams ...", file=sys.stderr)
            prepare(server.url, args.scale)
        try:
            for row in rows:
                # Clients take turns within each repeat, so a machine that speeds up or slows
                # down during a row weighs on every client's median alike.
                clients = (*row.clients, OLD) if args.old and "jsclient" in row.clients else row.clients
                runs = {client: Runs() for client in clients}
                with contextlib.ExitStack() as own:
                    target, via = server, ""
                    if row.own_server:
                        target = own.enter_context(started(NatsServer(websocket=True), pinned=row.pinned))
                    if row.distance is not None:
                        via = own.enter_context(delay_proxy(server.url, row.distance))
                    for round_no in range(args.repeat):
                        for client in round_order(clients, round_no):
                            got = measure(client, row, target, args.scale, args.old, args.smoke, via,
                                          where.get(client, ""))
                            runs[client].figures.append(got if isinstance(got, Figure) else None)
                            if isinstance(got, str):
                                runs[client].errors.append(f"round {round_no + 1}: {got}")
                results[row.key] = {client: run.summary() for client, run in runs.items()}
                for client, run in runs.items():
                    print("  " + report.progress(row, client, run.summary()), file=sys.stderr)
                shares = paired_shares(runs)
                if shares:
                    results[row.key][SHARE] = statistics.median(shares)
                    results[row.key][SHARE + " rounds"] = shares
                    print(f"  {row.key:<26} % raw by round: {' '.join(f'{x:.0f}' for x in shares)}", file=sys.stderr)
                for client, key in report.VERSUS_PLAIN.items():
                    ratios = paired_ratios(runs, client, "jsclient")
                    if ratios:
                        results[row.key][key] = statistics.median(ratios)
                        results[row.key][key + " rounds"] = ratios
                        print(f"  {row.key:<26} {key} by round: {' '.join(f'{x:.2f}' for x in ratios)}",
                              file=sys.stderr)
                for key, name in ((report.RATE_VS_SPIN0, "rate"), (report.CPU_VS_SPIN0, "cpu_us")):
                    ratios = paired_ratios(runs, "jsclient", SPIN0, name)
                    if ratios:
                        results[row.key][key] = statistics.median(ratios)
                        results[row.key][key + " rounds"] = ratios
                        print(f"  {row.key:<26} {key} by round: {' '.join(f'{x:.2f}' for x in ratios)}",
                              file=sys.stderr)
        finally:
            responder.kill()
            responder.wait()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every message count")
    parser.add_argument("--rows", default="", help="comma-separated row keys (default: all)")
    parser.add_argument("--clients", default="",
                        help="comma-separated clients (default: each row's every client); a row with none is left out")
    parser.add_argument("--json", default="", help="also write the results to this file")
    parser.add_argument("--from-json", default="", help="print the tables of an earlier --json file, measure nothing")
    parser.add_argument("--rst", action="store_true", help="print the table as reStructuredText (for the docs)")
    parser.add_argument(
        "--old", default="", help="a checkout of an earlier jsclient, measured in turns with this one (before/after)"
    )
    parser.add_argument("--smoke", action="store_true",
                        help="the harness's own test: fixed workloads made tiny too (the watchdog's); no figure counts")
    parser.add_argument("--readme", default="",
                        help="also write README's performance table (between its markers) from the results")
    args = parser.parse_args()
    if args.old:
        args.old = str(Path(args.old).resolve())
    wanted = {r for r in args.rows.split(",") if r}
    unknown = wanted - {r.key for r in EVERY_ROW}
    if unknown:
        parser.error(f"unknown rows: {', '.join(sorted(unknown))}")
    chosen = {c for c in args.clients.split(",") if c}
    if chosen - {c for r in EVERY_ROW for c in r.clients}:
        parser.error(f"unknown clients: {', '.join(sorted(chosen - {c for r in EVERY_ROW for c in r.clients}))}")
    rows: list[report.Described] = [r for r in EVERY_ROW if not wanted or r.key in wanted]
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        rows = [r for r in report.rows_of(saved, EVERY_ROW) if not wanted or r.key in wanted]
        report.print_all(rows, saved, rst=args.rst)
        write_readme(args.readme, rows, saved)
        return 0
    picked = [replace(r, clients=tuple(c for c in r.clients if not chosen or c in chosen))
              for r in EVERY_ROW if not wanted or r.key in wanted]
    measured, interpreters, missing = interpreters_for([r for r in picked if r.clients], args.old)
    rows = list(measured)
    saved = {
        "date": common.now(),
        "machine": common.machine(),
        "versions": versions(args.old, interpreters),
        # The interpreter each client ran on (benchmarks.pythons), and the clients this machine could not run.
        "pythons": {client: found.version for client, found in sorted(interpreters.items())},
        "not measured": missing,
        "repeat": args.repeat,
        "scale": args.scale,
        "pinned": pinning(),
        "smoke": args.smoke,
        "rows": report.describe(measured),
        "results": run_rows(measured, args, interpreters),
    }
    saved["errors"] = report.errors(rows, saved["results"])
    saved["peer failures"] = report.peer_failures(rows, saved["results"])
    report.print_all(rows, saved, rst=args.rst)
    if args.json:
        Path(args.json).write_text(json.dumps(saved, indent=2) + "\n")
    write_readme(args.readme, rows, saved)
    return 1 if saved["errors"] else 0


def write_readme(path: str, rows: list[report.Described], saved: dict[str, Any]) -> None:
    """``--readme FILE``: FILE's generated table, from these results (never from a smoke or tiny-scale run's)."""
    if not path:
        return
    if report.tiny(saved):
        print(f"not writing {path}: a smoke or tiny-scale run's figures mean nothing", file=sys.stderr)
        return
    readme = Path(path)
    readme.write_text(report.with_readme_block(readme.read_text(), report.readme_block(rows, saved)))


if __name__ == "__main__":
    sys.exit(main())
