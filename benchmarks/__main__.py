"""`make bench`: jsclient beside nats-py, pynats2 and a raw-socket bound, in one run.

Usage: python -m benchmarks [--repeat N] [--scale F] [--rows a,b] [--json FILE]

One nats-server, one shared responder process, one feeder process per
subscribe measurement; every (row, client) pair runs in a fresh process so no
client inherits another's threads or event loop.  On a machine with two or
more cores the server, feeder and responder are pinned to core 0 and the
measured client to core 1, the same for every client, so the infrastructure
does not steal the client's core at random (unpinned runs here varied by 2x).  Each pair runs ``--repeat``
times, the clients of a row taking turns (jsclient and raw side by side, see :func:`round_order`), and the
median is reported, with the ratio to nats-py, the share of raw and the target.
These are measurements, not tests: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from jsclient.server import NatsServer

ROOT = Path(__file__).resolve().parent.parent


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


ALL = ("jsclient", "nats-py", "pynats2", "raw")
ROWS = [
    Row("publish", "publish msgs/s (128 B)", 500_000, ALL, 2.5),
    Row("next_msg", "subscribe next_msg msgs/s", 200_000, ALL, 8.0),
    Row("callback", "subscribe callback msgs/s", 200_000, ALL, 1.5),
    Row("request", "request/reply req/s, 1 in flight", 5_000, ALL, None),
    Row("request_concurrent", "request/reply req/s, 16 in flight", 20_000, ("jsclient", "nats-py", "raw"), 2.0),
    Row("request_threads", "request/reply req/s, 16 threads", 20_000, ("jsclient",), None),
    # Target: the TCP rows' targets less a quarter (WebSocket framing costs every client alike).
    Row("ws_publish", "WebSocket publish msgs/s (128 B)", 500_000, ("jsclient", "nats-py"), 1.9, websocket=True),
    Row("ws_next_msg", "WebSocket next_msg msgs/s", 200_000, ("jsclient", "nats-py"), 6.0, websocket=True),
]
JS = ("jsclient", "nats-py")
JS_RAW = (*JS, "raw")  # the raw socket shows what the server allows
JS_MODULE = "benchmarks.js_clients"
JS_ROWS = [
    Row("js_publish", "js.publish (await each ack) msgs/s", 20_000, JS_RAW, 2.5, JS_MODULE),
    Row("js_publish_async", "js.publish_async (window) msgs/s", 100_000, JS_RAW, 3.0, JS_MODULE),
    Row("js_publish_stream", "fast-ingest publish_stream (nats-py: async) msgs/s", 200_000, JS, None, JS_MODULE),
    Row("js_publish_batch", "atomic batch of 1000 (nats-py: async) msgs/s", 100_000, JS, None, JS_MODULE),
    Row("push_ack", "push next_msg + ack msgs/s", 100_000, JS, 3.0, JS_MODULE),
    Row("fetch_ack", "pull fetch(500) + ack msgs/s", 200_000, JS, 3.0, JS_MODULE),
    Row("pull_messages", "pull messages() + ack msgs/s", 200_000, ("jsclient",), None, JS_MODULE),
    Row("consume", "consume(cb) + ack msgs/s (ADR-37)", 200_000, JS, 3.0, JS_MODULE),
    Row("consumer_messages", "consumer.messages() + ack msgs/s", 200_000, JS, 3.0, JS_MODULE),
    Row("ordered", "ordered consumer replay msgs/s", 500_000, JS, 2.0, JS_MODULE),
    Row("direct_last", "direct get, last by subject ops/s", 5_000, JS_RAW, 2.0, JS_MODULE),
    Row("direct_batch", "direct get batch (nats-py: single gets) msgs/s", 100_000, JS, 10.0, JS_MODULE),
    Row("kv_get", "kv.get ops/s", 5_000, JS_RAW, 2.0, JS_MODULE),
    Row("obj_put", "object store put MiB/s (one 64 MiB object)", 64, JS, 2.0, JS_MODULE, own_server=True),
    Row("obj_get", "object store get MiB/s (one 64 MiB object)", 64, JS, 2.0, JS_MODULE, own_server=True),
    Row("js_publish_stream_unpinned", "bulk load, nothing pinned: publish_stream msgs/s", 200_000, ("jsclient",),
        None, JS_MODULE, own_server=True, pinned=False),
    Row("js_publish_async_unpinned", "bulk load, nothing pinned: publish_async msgs/s", 200_000, ("jsclient",),
        None, JS_MODULE, own_server=True, pinned=False),
    Row("watchdog", "watchdog: 5,000 heartbeat subs, % of a core", 5_000, ("jsclient",), None, JS_MODULE, False),
]
#: nats-py's single direct gets take ~0.3 ms each: it gets fewer, its rate is per message all the same.
SHORTER_FOR_PEER = {"direct_batch": 5_000}


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


def measure(client: str, row: Row, server: NatsServer, scale: float, old_tree: str = "") -> float | None:
    url = server.ws_url if row.websocket else server.url
    count = max(100, int(row.count * scale))
    if client == "pynats2" and row.key == "request":
        count = max(100, count // 10)  # it subscribes and unsubscribes per request
    if client == "nats-py" and row.key in SHORTER_FOR_PEER:
        count = max(100, int(SHORTER_FOR_PEER[row.key] * scale))
    if row.key == "watchdog":
        count = row.count  # a fixed population, not a work count
    if row.key.startswith("obj_"):
        count = max(1, int(row.count * scale))  # MiB, not messages
    proc = subprocess.run(
        [sys.executable, "-m", row.module, "jsclient" if client == OLD else client, row.key, url, str(count)],
        cwd=old_tree if client == OLD else ROOT,  # `python -m` imports jsclient from its working directory
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=pin_client if row.pinned else None,
        env={**os.environ, "BENCH_TCP_URL": server.url},  # for the feeder of a WebSocket row
    )
    if proc.returncode != 0:
        print(f"  {client} {row.key} failed: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["rate"])


def round_order(clients: tuple[str, ...], round_no: int) -> list[str]:
    """The clients of one round: jsclient and raw first and side by side, which goes first taking turns.

    "% raw" divides the two rates of a round, so the two should run as close
    in time as they can: with nats-py's run between them (a second or more,
    and a process start) a slow spell of the machine could fall on one and
    not the other.  Taking turns at going first cancels any cost or gain of
    following another client's run.
    """
    pair = [c for c in ("jsclient", "raw") if c in clients]
    if round_no % 2:
        pair.reverse()
    return pair + [c for c in clients if c not in pair]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every message count")
    parser.add_argument("--rows", default="", help="comma-separated row keys (default: all)")
    parser.add_argument("--json", default="", help="also write the results to this file")
    parser.add_argument("--from-json", default="", help="print the tables of an earlier --json file, measure nothing")
    parser.add_argument("--rst", action="store_true", help="print the table as reStructuredText (for README.rst)")
    parser.add_argument(
        "--old", default="", help="a checkout of an earlier jsclient, measured in turns with this one (before/after)"
    )
    args = parser.parse_args()
    wanted = {r for r in args.rows.split(",") if r}
    rows = [r for r in ROWS + JS_ROWS if not wanted or r.key in wanted]
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        rows = [r for r in rows if r.key in saved["results"]]
        (print_rst if args.rst else print_table)(
            rows, saved["results"], saved.get("date"), saved.get("machine"), saved.get("repeat", 3)
        )
        return
    results: dict[str, dict[str, float | None]] = {}
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
        if any(r.module == JS_MODULE for r in rows):
            from benchmarks.js_clients import prepare

            print("  filling the shared streams ...", file=sys.stderr)
            prepare(server.url, args.scale)
        try:
            for row in rows:
                # Clients take turns within each repeat, so a machine that speeds up or slows
                # down during a row weighs on every client's median alike.
                clients = (*row.clients, OLD) if args.old and "jsclient" in row.clients else row.clients
                runs: dict[str, list[float]] = {client: [] for client in clients}
                with contextlib.ExitStack() as own:
                    target = server
                    if row.own_server:
                        target = own.enter_context(started(NatsServer(websocket=True), pinned=row.pinned))
                    for round_no in range(args.repeat):
                        for client in round_order(clients, round_no):
                            rate = measure(client, row, target, args.scale, args.old)
                            if rate is not None:
                                runs[client].append(rate)
                results[row.key] = {}
                for client, ok in runs.items():
                    results[row.key][client] = statistics.median(ok) if ok else None
                    each = " ".join(f"{rate:,.0f}" for rate in ok)  # by round: a stall shows as one low rate
                    median = results[row.key][client] or 0
                    print(f"  {row.key:<20} {client:<9} {median:>12,.0f}  ({each})", file=sys.stderr)
                shares = paired_shares(runs)
                if shares:
                    results[row.key][SHARE] = statistics.median(shares)
                    print(f"  {row.key:<20} % raw by round: {' '.join(f'{x:.0f}' for x in shares)}", file=sys.stderr)
        finally:
            responder.kill()
            responder.wait()
    (print_rst if args.rst else print_table)(rows, results, repeat=args.repeat)
    if args.json:
        saved = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "repeat": args.repeat, "results": results}
        Path(args.json).write_text(json.dumps(saved, indent=2))


def _ratio(row: Row, res: dict[str, float | None]) -> float | None:
    js, py = res.get("jsclient"), res.get("nats-py")
    return js / py if js and py else None


#: results key of a row's "% raw": the median over rounds of jsclient's rate over raw's in the same round.
SHARE = "% raw"


def paired_shares(runs: dict[str, list[float]]) -> list[float]:
    """jsclient as a percentage of raw, round by round (empty unless both ran every round).

    The two run one after the other in each round, so a machine that is slower for a while weighs on
    both alike; the ratio of the two medians mixes rounds, and on a shared VM it moved by 15 points
    between runs of the same code (the raw socket alone went from 14,000 to 25,000 round trips/s).
    """
    js, raw = runs.get("jsclient", []), runs.get("raw", [])
    if not js or len(js) != len(raw):
        return []
    return [100 * a / b for a, b in zip(js, raw, strict=True)]


def _of_raw(res: dict[str, float | None]) -> str:
    """jsclient as a share of the raw-socket bound (what the server allows), or "-"."""
    share = res.get(SHARE)
    if share:
        return f"{share:.0f} %"
    js, raw = res.get("jsclient"), res.get("raw")
    return f"{100 * js / raw:.0f} %" if js and raw else "-"


def print_rst(
    rows: list[Row],
    results: dict[str, dict[str, float | None]],
    date: str | None = None,
    host: str | None = None,
    repeat: int = 3,
) -> None:
    print(f"Measured {date or time.strftime('%Y-%m-%d')} on {host or machine()}, medians of {repeat} runs, by")
    print("``make bench`` (clients pinned to one core, server and feeders to the other); % raw is the median")
    print("over rounds of jsclient's rate over the raw socket's in the same round.\n")
    first = max(48, *(len(row.title) for row in rows))  # a title wider than its column breaks the table
    widths = (first, 12, 12, 12, 12, 8, 8, 8)
    names = ("row", "jsclient", "nats-py", "pynats2", "raw", "% raw", "ratio", "target")
    border = "  ".join("=" * w for w in widths)
    print(border)
    print("  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip())
    print(border)
    for row in rows:
        res = results.get(row.key, {})
        cells = [row.title]
        for client in ALL:
            value = res.get(client)
            if value is None:
                cells.append("-")
            elif not row.higher_is_better:
                cells.append(f"{value:.1f} %")
            else:
                cells.append(f"{value:,.0f}")
        ratio = _ratio(row, res)
        cells.append(_of_raw(res))
        cells.append(f"{ratio:.2f}x" if ratio else "-")
        cells.append(f"{row.target:.1f}x" if row.target else "-")
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
    print(border)
    for line in fast_ingest_ratios(results):
        print(f"\n{line}")


def print_table(
    rows: list[Row],
    results: dict[str, dict[str, float | None]],
    date: str | None = None,
    host: str | None = None,
    repeat: int = 3,
) -> None:
    print(f"\njsclient benchmarks, {date or time.strftime('%Y-%m-%d')}, {host or machine()}")
    print(f"rates are medians of {repeat} runs; ratio = jsclient / nats-py; raw = pre-encoded frames on a bare socket")
    print("% raw = median over rounds of jsclient / raw in the same round")
    print()
    old = any(OLD in res for res in results.values())
    head = f"{'row':<36}{'jsclient':>12}{'nats-py':>12}{'pynats2':>12}{'raw':>12}"
    head += f"{'% raw':>8}{'ratio':>8}{'target':>8}  ok"
    if old:
        head += f"{'old':>12}{'new/old':>9}"
    print(head)
    print("-" * len(head))
    for row in rows:
        res = results.get(row.key, {})
        cells = []
        for client in ALL:
            value = res.get(client)
            if not row.higher_is_better and value is not None:
                cells.append(f"{value:>11.1f}%")
            else:
                cells.append(f"{value:>12,.0f}" if value else f"{'-':>12}")
        ratio = _ratio(row, res)
        ratio_s = f"{ratio:>7.2f}x" if ratio else f"{'-':>8}"
        target_s = f"{row.target:>7.1f}x" if row.target else f"{'-':>8}"
        verdict = "" if row.target is None or ratio is None else ("yes" if ratio >= row.target else "NO")
        line = f"{row.title:<36}{''.join(cells)}{_of_raw(res):>8}{ratio_s}{target_s}  {verdict:<3}"
        if old:
            before, now = res.get(OLD), res.get("jsclient")
            change = f"{now / before:>8.2f}x" if before and now and row.higher_is_better else f"{'-':>9}"
            line += (f"{before:>12,.0f}" if before else f"{'-':>12}") + change
        print(line.rstrip())
    for line in fast_ingest_ratios(results):
        print(line)


#: (fast-ingest row, publish_async row, how they ran), for the ratio issue 22 sets a target on (1.5x).
FAST_INGEST_PAIRS = (
    ("js_publish_stream", "js_publish_async", "pinned (the server on one core)"),
    ("js_publish_stream_unpinned", "js_publish_async_unpinned", "nothing pinned"),
)


def fast_ingest_ratios(results: dict[str, dict[str, float | None]]) -> list[str]:
    """Fast-ingest over jsclient's own publish_async, for each pair of rows measured."""
    lines = []
    for stream, window, how in FAST_INGEST_PAIRS:
        fast, plain = results.get(stream, {}).get("jsclient"), results.get(window, {}).get("jsclient")
        if fast and plain:
            lines.append(f"fast-ingest / publish_async, {how}: {fast / plain:.2f}x (target 1.5x)")
    return lines


if __name__ == "__main__":
    main()
