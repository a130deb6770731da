"""The tables of ``make bench`` and ``make bench-spark``, from a run's results or an earlier ``--json`` file.

Kept apart from the runners so ``--from-json`` prints exactly what a run
prints, and so the docs draw their tables from the same cells: as text, as
reStructuredText simple tables (``--rst``, README's table) or as list-tables
(the docs' extension, docs/_ext/benchdata.py, from the committed files under
docs/_data).  A file from before CPU was measured (a bare rate per client)
prints with "-" for CPU; one from before the file described its rows takes
the runner's.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

#: The tables a row can be in (see benchmarks/__main__.py).
MAIN, FEATURES, THREADS, DISTANCE = "client speed", "feature against feature", "threads", "at a distance"
INSTRUMENTED = "instrumented"
#: jsclient instrumented with OpenTelemetry's SDK (benchmarks/instrumented.py): spans dropped, or batched.
OTEL_DROP, OTEL_BATCH = "jsclient-otel-drop", "jsclient-otel-batch"
#: jsclient connected with spin_wait=0 (it never polls before it sleeps), in the distance rows.
SPIN0 = "jsclient-spin0"
#: The clients' columns, in order (the runner's PEERS, then an --old checkout's jsclient).
COLUMNS = ("jsclient", SPIN0, OTEL_DROP, OTEL_BATCH, "nats-py", "nats-py-sync", "nats-py-thread", "pynats2",
           "natsio", "raw", "jsclient-old")
#: The second ratio of the speed and distance tables: jsclient's rate over this peer's.
SECOND = "natsio"
SECOND_RATIO = f"ratio {SECOND}"
#: results key of a row's "% raw": the median over rounds of jsclient's rate over raw's in the same round.
SHARE = "% raw"
#: results keys of a distance row's jsclient over jsclient-spin0, rate and CPU per operation: medians over rounds
#: of the two's figures in the same round, as SHARE.
RATE_VS_SPIN0, CPU_VS_SPIN0 = "rate / spin_wait=0", "CPU / spin_wait=0"
CPU = "µs/op"
#: README's table: jsclient beside nats-py on these rows (``--readme FILE`` writes it between these comments).
README_ROWS = ("publish", "next_msg", "request_concurrent", "js_publish", "js_publish_async", "ordered", "kv_get")
README_START = ".. Generated from docs/_data/bench.json by make bench (benchmarks/report.py); never edited by hand."
README_END = ".. End of the generated table."
#: (pipelined work, the same work one at a time, what the one's rate over the other's shows), for the distance rows.
PIPELINING = (
    ("request_concurrent", "request", "16 requests in flight over 1"),
    ("fetch_ack_500", "fetch_ack_10", "fetch(500) over fetch(10)"),
    ("js_publish_async", "js_publish", "publish_async over js.publish"),
)
#: (fast-ingest row, publish_async row, how they ran), for the ratio issue 22 sets a target on (1.5x).
FAST_INGEST_PAIRS = (
    ("js_publish_stream", "js_publish_async", "pinned (the server on one core)"),
    ("js_publish_stream_unpinned", "js_publish_async_unpinned", "nothing pinned"),
)


class Described(Protocol):
    """What the tables need of a row: the runner's ``Row``, or a row as a ``--json`` file describes it."""

    @property
    def key(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def clients(self) -> tuple[str, ...]: ...
    @property
    def target(self) -> float | None: ...  # required jsclient / nats-py ratio
    @property
    def higher_is_better(self) -> bool: ...
    @property
    def table(self) -> str: ...
    @property
    def distance(self) -> float | None: ...  # seconds each way through the delay proxy; None: no proxy
    @property
    def in_flight(self) -> int | None: ...  # what a round trip brings at most (the latency bound's); None: not set


@dataclass(frozen=True)
class Shown:
    """A row as a ``--json`` file describes it (:func:`describe`), so the file shows without the runner."""

    key: str
    title: str
    clients: tuple[str, ...]
    target: float | None = None
    higher_is_better: bool = True
    table: str = MAIN
    distance: float | None = None
    in_flight: int | None = None


def describe(rows: Sequence[Described]) -> dict[str, dict[str, Any]]:
    """What a ``--json`` file keeps of its rows, in order: each one's title, clients, target and table (and a
    distance row's distance and requests in flight)."""
    out = {row.key: {"title": row.title, "clients": list(row.clients), "target": row.target,
                     "higher_is_better": row.higher_is_better, "table": row.table} for row in rows}
    for row in rows:
        if row.table == DISTANCE:
            out[row.key] |= {"distance": row.distance, "in_flight": row.in_flight}
    return out


def rows_of(saved: dict[str, Any], known: Sequence[Described]) -> list[Described]:
    """The rows of a ``--json`` file, as it describes them; for an older file, the ``known`` rows it has results of."""
    described: dict[str, dict[str, Any]] | None = saved.get("rows")
    if not described:
        return [row for row in known if row.key in saved["results"]]
    return [Shown(key, row["title"], tuple(row["clients"]), row.get("target"), row.get("higher_is_better", True),
                  row.get("table", MAIN), row.get("distance"), row.get("in_flight")) for key, row in described.items()]


def entry(res: dict[str, Any], client: str) -> dict[str, Any] | None:
    """A client's summary in a row's results (an older file's bare rate becomes one), or None if not run."""
    value = res.get(client)
    if value is None or isinstance(value, dict):
        return value
    return {"rate": float(value)}


def rate_of(res: dict[str, Any], client: str) -> float | None:
    got = entry(res, client)
    return None if got is None else got.get("rate")


#: Every form :func:`us` prints a figure in (1,525 / 15.0 / 1.23): what a reader of the output matches.
US_FIGURE = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"


def us(value: float | None) -> str:
    """Microseconds, with the digits that mean something (:data:`US_FIGURE` matches every form)."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def rate_cell(row: Described, got: dict[str, Any] | None) -> str:
    if got is None:
        return "-"
    if got.get("rate") is None:
        return "error" if got.get("errors") else "-"
    return f"{got['rate']:,.0f}" if row.higher_is_better else f"{got['rate']:.1f} %"


def progress(row: Described, client: str, got: dict[str, Any]) -> str:
    """A (row, client)'s line on stderr: median rate and CPU, then each round's rate (a stall shows as one)."""
    rounds = " ".join("error" if f is None else f"{f['rate']:,.0f}" for f in got["rounds"])
    return f"{row.key:<26} {client:<14} {rate_cell(row, got):>12} {us(got.get('cpu_us')):>8} {CPU}  ({rounds})"


#: The runs of these are jsclient's and the bound's: a round of theirs without a figure fails the run.
OURS = frozenset({"jsclient", SPIN0, OTEL_DROP, OTEL_BATCH, "jsclient-old", "raw"})


def errors(rows: Sequence[Described], results: dict[str, dict[str, Any]]) -> list[str]:
    """Every run that gave no figure and fails ``make bench``, as ``row client: why``: any of jsclient's or the
    raw bound's, and a peer's when none of its rounds gave one (the row then has no figure for it)."""
    return [why for why, fatal in _failures(rows, results) if fatal]


def peer_failures(rows: Sequence[Described], results: dict[str, dict[str, Any]]) -> list[str]:
    """A peer's rounds that failed in a row where its other rounds gave the median: the peer's own failure
    (its library raised), listed with the results and in the docs, never hidden, but not the benchmark's."""
    return [why for why, fatal in _failures(rows, results) if not fatal]


def _failures(rows: Sequence[Described], results: dict[str, dict[str, Any]]) -> list[tuple[str, bool]]:
    out: list[tuple[str, bool]] = []
    for row in rows:
        for client in COLUMNS:
            got = entry(results.get(row.key, {}), client) or {}
            fatal = client in OURS or got.get("rate") is None
            out.extend((f"{row.key} {client} {why}", fatal) for why in got.get("errors", []))
    return out


def render(headers: list[str], lines: list[list[str]], rst: bool, left: int = 1) -> list[str]:
    """A table: the first ``left`` columns left-aligned, the others right-aligned (text), or RST's simple table."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *lines, strict=True)]

    def line(cells: list[str]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        return "  ".join(c.ljust(w) if rst or i < left else c.rjust(w) for i, (c, w) in pairs).rstrip()
    if not rst:
        return [line(headers), "-" * len(line(headers)), *(line(cells) for cells in lines)]
    border = "  ".join("=" * w for w in widths)
    return [border, line(headers), border, *(line(cells) for cells in lines), border]


def ratio(res: dict[str, Any], peer: str = "nats-py") -> float | None:
    """jsclient's rate over ``peer``'s (nats-py's: the ratio of the tables and the targets)."""
    js, py = rate_of(res, "jsclient"), rate_of(res, peer)
    return js / py if js and py else None


def header(client: str, pythons: dict[str, str] | None) -> str:
    """A client's column heading, with the CPython release it ran on where the file records it."""
    version = (pythons or {}).get(client)
    return f"{client} (py{'.'.join(version.split('.')[:2])})" if version else client


def pythons_of(saved: dict[str, Any]) -> str:
    """The interpreter each client ran on, in a line (``3.11.7: jsclient, nats-py; 3.13.0: natsio``); "" for a
    file from before they were recorded (every client on the machine's Python)."""
    by_version: dict[str, list[str]] = {}
    for client in COLUMNS:
        version = (saved.get("pythons") or {}).get(client)
        if version:
            by_version.setdefault(version, []).append(client)
    return "; ".join(f"{version}: {', '.join(clients)}" for version, clients in by_version.items())


def of_raw(res: dict[str, Any]) -> str:
    """jsclient as a share of the raw-socket bound (what the server allows), or "-"."""
    share = res.get(SHARE)
    if share:
        return f"{share:.0f} %"
    js, raw = rate_of(res, "jsclient"), rate_of(res, "raw")
    return f"{100 * js / raw:.0f} %" if js and raw else "-"


def speed_cells(rows: Sequence[Described], results: dict[str, dict[str, Any]],
                pythons: dict[str, str] | None = None) -> tuple[list[str], list[list[str]]]:
    """Client speed or feature against feature: each client's rate and CPU per operation (headed with the Python
    it ran on, given ``pythons``), the ratio, the target, and jsclient's rate over natsio's where it ran."""
    clients = [c for c in COLUMNS if any(c in row.clients or entry(results.get(row.key, {}), c) for row in rows)]
    headers = ["row"]
    for client in clients:
        headers += [header(client, pythons), CPU]
    headers += [SHARE, "ratio", "target", "ok"]
    second = SECOND in clients
    if second:
        headers.append(SECOND_RATIO)
    old = "jsclient-old" in clients
    if old:
        headers.append("new/old")
    lines = []
    for row in rows:
        res = results.get(row.key, {})
        cells = [row.title]
        for client in clients:
            got = entry(res, client)
            cells += [rate_cell(row, got), us((got or {}).get("cpu_us"))]
        got_ratio = ratio(res)
        verdict = "" if row.target is None or got_ratio is None else ("yes" if got_ratio >= row.target else "NO")
        cells += [of_raw(res), f"{got_ratio:.2f}x" if got_ratio else "-", f"{row.target:.1f}x" if row.target else "-",
                  verdict]
        if second:
            cells.append(times(ratio(res, SECOND)))
        if old:
            before, now = rate_of(res, "jsclient-old"), rate_of(res, "jsclient")
            cells.append(f"{now / before:.2f}x" if before and now and row.higher_is_better else "-")
        lines.append(cells)
    return headers, lines


def times(value: float | None) -> str:
    return f"{value:.2f}x" if value else "-"


def speed_table(rows: Sequence[Described], results: dict[str, dict[str, Any]], rst: bool,
                pythons: dict[str, str] | None = None) -> list[str]:
    return render(*speed_cells(rows, results, pythons), rst)


def headline_cells(rows: Sequence[Described], results: dict[str, dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """jsclient beside nats-py alone: each one's rate and CPU per operation, the ratio, the target."""
    headers = ["row", "jsclient", "nats-py", "ratio", f"jsclient {CPU}", f"nats-py {CPU}", "target"]
    lines = []
    for row in rows:
        res = results.get(row.key, {})
        js, py = entry(res, "jsclient"), entry(res, "nats-py")
        if js is None or py is None:
            continue
        got_ratio = ratio(res)
        lines.append([row.title, rate_cell(row, js), rate_cell(row, py), f"{got_ratio:.2f}x" if got_ratio else "-",
                      us(js.get("cpu_us")), us(py.get("cpu_us")), f"{row.target:.1f}x" if row.target else "-"])
    return headers, lines


def threads_cells(rows: Sequence[Described], results: dict[str, dict[str, Any]],
                  every_title: bool, pythons: dict[str, str] | None = None) -> tuple[list[str], list[list[str]]]:
    """A line per (row, client): calls per second, CPU per call, latency of one call; the title on its first line
    only, unless ``every_title`` (a simple table needs it on every line); each client with the Python it ran on,
    given ``pythons``."""
    lines = []
    for row in rows:
        res = results.get(row.key, {})
        for n, client in enumerate(c for c in COLUMNS if entry(res, c) is not None):
            got = entry(res, client) or {}
            lines.append([row.title if every_title or n == 0 else "", header(client, pythons), rate_cell(row, got),
                          us(got.get("cpu_us")), us(got.get("p50_us")), us(got.get("p99_us"))])
    return ["row", "client", "calls/s", "µs CPU/call", "p50 µs", "p99 µs"], lines


def threads_table(rows: Sequence[Described], results: dict[str, dict[str, Any]], rst: bool,
                  pythons: dict[str, str] | None = None) -> list[str]:
    return render(*threads_cells(rows, results, rst, pythons), rst, left=2)


#: results keys of an instrumented row: an instrumented client's rate over plain jsclient's, round by round.
VERSUS_PLAIN = {OTEL_DROP: "rate, spans dropped / off", OTEL_BATCH: "rate, spans batched / off"}


def instrumented_cells(rows: Sequence[Described],
                       results: dict[str, dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Instrumented: each client's rate and CPU per operation, the instrumented rates over the plain one (the
    median of the rounds' ratios) and what instrumenting adds to the client's CPU per operation."""
    headers = ["row", "off", CPU, "spans dropped", CPU, "spans batched", CPU, "dropped / off", "batched / off",
               "+µs/op dropped", "+µs/op batched"]
    lines = []
    for row in rows:
        res = results.get(row.key, {})
        cells = [row.title]
        for client in ("jsclient", OTEL_DROP, OTEL_BATCH):
            got = entry(res, client)
            cells += [rate_cell(row, got), us((got or {}).get("cpu_us"))]
        cells += [f"{res[key]:.2f}x" if res.get(key) else "-" for key in VERSUS_PLAIN.values()]
        plain = (entry(res, "jsclient") or {}).get("cpu_us")
        for client in (OTEL_DROP, OTEL_BATCH):
            cpu = (entry(res, client) or {}).get("cpu_us")
            cells.append(f"{cpu - plain:+.2f}" if cpu is not None and plain is not None else "-")
        lines.append(cells)
    return headers, lines


def instrumented_table(rows: Sequence[Described], results: dict[str, dict[str, Any]], rst: bool,
                       pythons: dict[str, str] | None = None) -> list[str]:
    return render(*instrumented_cells(rows, results), rst)


def bound(row: Described) -> float | None:
    """What the distance alone allows a row: what one round trip brings, over the round trip (twice the delay)."""
    return row.in_flight / (2 * row.distance) if row.in_flight and row.distance else None


def versus_spin0(res: dict[str, Any], key: str, name: str) -> str:
    """jsclient's figure ``name`` over jsclient-spin0's: the median of the rounds' ratios (``key``), or for a file
    without them the ratio of the medians; "-" if either is missing."""
    if res.get(key):
        return f"{res[key]:.2f}x"
    mine, theirs = (entry(res, "jsclient") or {}).get(name), (entry(res, SPIN0) or {}).get(name)
    return f"{mine / theirs:.2f}x" if mine and theirs else "-"


def distance_cells(rows: Sequence[Described], results: dict[str, dict[str, Any]],
                   pythons: dict[str, str] | None = None) -> tuple[list[str], list[list[str]]]:
    """At a distance: the latency bound, each client's rate and CPU per operation, jsclient's share of the bound,
    its ratio to nats-py (and to natsio, where it ran), and its rate and CPU over its own with spin_wait=0 (round
    by round, the median)."""
    clients = [c for c in COLUMNS if any(c in row.clients or entry(results.get(row.key, {}), c) for row in rows)]
    headers = ["row", "bound"]
    for client in clients:
        headers += ["spin_wait=0" if client == SPIN0 else header(client, pythons), CPU]
    second = SECOND in clients
    headers += ["% bound", "ratio", *([SECOND_RATIO] if second else []), RATE_VS_SPIN0, CPU_VS_SPIN0]
    lines = []
    for row in rows:
        res = results.get(row.key, {})
        limit, js = bound(row), rate_of(res, "jsclient")
        cells = [row.title, f"{limit:,.0f}" if limit else "-"]
        for client in clients:
            got = entry(res, client)
            cells += [rate_cell(row, got), us((got or {}).get("cpu_us"))]
        got_ratio = ratio(res)
        cells += [f"{100 * js / limit:.0f} %" if js and limit else "-", f"{got_ratio:.2f}x" if got_ratio else "-",
                  *([times(ratio(res, SECOND))] if second else []),
                  versus_spin0(res, RATE_VS_SPIN0, "rate"), versus_spin0(res, CPU_VS_SPIN0, "cpu_us")]
        lines.append(cells)
    return headers, lines


def distance_table(rows: Sequence[Described], results: dict[str, dict[str, Any]], rst: bool,
                   pythons: dict[str, str] | None = None) -> list[str]:
    return render(*distance_cells(rows, results, pythons), rst)


def pipelining_gains(rows: Sequence[Described], results: dict[str, dict[str, Any]]) -> list[str]:
    """What pipelining gains at each distance measured: the rate of the pipelined row over its one-at-a-time
    peer's, for jsclient and nats-py."""
    lines = []
    for row in rows:
        for fast, slow, what in PIPELINING:
            prefix = f"distance_{fast}_"
            if not row.key.startswith(prefix) or row.distance is None:
                continue
            res, base = results.get(row.key, {}), results.get(f"distance_{slow}_{row.key.removeprefix(prefix)}", {})
            gains = []
            for client in ("jsclient", "nats-py"):
                mine, theirs = rate_of(res, client), rate_of(base, client)
                if mine and theirs:
                    gains.append(f"{client} {mine / theirs:.1f}x")
            if gains:
                lines.append(f"{what}, {row.distance * 1e3:g} ms each way: {', '.join(gains)}")
    return lines


def fast_ingest_ratios(results: dict[str, dict[str, Any]]) -> list[str]:
    """Fast-ingest over jsclient's own publish_async, for each pair of rows measured."""
    lines = []
    for stream, window, how in FAST_INGEST_PAIRS:
        fast, plain = rate_of(results.get(stream, {}), "jsclient"), rate_of(results.get(window, {}), "jsclient")
        if fast and plain:
            lines.append(f"fast-ingest / publish_async, {how}: {fast / plain:.2f}x (target 1.5x)")
    return lines


def host_of(saved: dict[str, Any]) -> str:
    """The machine a file was measured on, in a line."""
    host = saved.get("machine") or {}
    if isinstance(host, dict):
        host = f"{host.get('cores')} cores, {host.get('cpu')}, Python {host.get('python')}"
    return str(host)


def versions_of(saved: dict[str, Any], *, paths: bool = True) -> str:
    """The versions a file was measured with, in a line (without ``paths``, a binary's path is left out)."""
    out = []
    for name, version in (saved.get("versions") or {}).items():
        out.append(f"{name} {version if paths else re.sub(r' [(]/[^)]*[)]$', '', str(version))}")
    return ", ".join(out)


def heading(saved: dict[str, Any]) -> list[str]:
    """When, where and what was measured."""
    versions = versions_of(saved)
    repeat = saved.get("repeat", 3)
    lines = [f"jsclient benchmarks, {saved.get('date')}, {host_of(saved)}"]
    if versions:
        lines.append(f"versions: {versions}")
    lines += pythons_lines(saved)
    if tiny(saved):
        lines.append(f"SMOKE/TINY-SCALE RUN (scale {saved.get('scale')}): the figures below mean nothing")
    lines += [
        f"medians of {repeat} runs of each client, taking turns; rate per second, and {CPU}: the client process's "
        "CPU (user + sys, all its threads) per operation over the timed part",
        "ratio = jsclient / nats-py; ratio natsio = jsclient / natsio; raw = pre-encoded frames on a bare socket; "
        "% raw = median over rounds of jsclient / raw in the same round; nats-py-sync = its blocking wrapper; "
        "nats-py-thread = nats-py on a loop thread (run_coroutine_threadsafe); natsio = the asyncio client with a "
        "sans-IO core; (pyX.Y) = the CPython a client ran on",
    ]
    return lines


def pythons_lines(saved: dict[str, Any]) -> list[str]:
    """Which interpreter each client ran on and why, and the clients this machine could not run."""
    from benchmarks.pythons import WHY

    lines = []
    where = pythons_of(saved)
    if where:
        lines.append(f"Python of each client: {where} ({WHY})")
    for client, why in (saved.get("not measured") or {}).items():
        lines.append(f"not measured: {client}: it {why}")
    return lines


def tiny(saved: dict[str, Any]) -> bool:
    """A smoke run or one at a tiny scale: its figures mean nothing."""
    return bool(saved.get("smoke")) or (saved.get("scale") or 1) < 0.1


def print_all(rows: Sequence[Described], saved: dict[str, Any], *, rst: bool = False) -> None:
    results = saved["results"]
    out = heading(saved)
    titles = {
        MAIN: "Client speed: every client doing the same work",
        FEATURES: "Feature against feature: the clients (or jsclient's two rows) do different work, as each title "
        "says; not a measure of client speed",
        THREADS: "Threads of one process: jsclient one shared connection, nats-py-thread one connection on one "
        "loop thread, nats-py-sync a context per thread, pynats2 a connection per thread",
        DISTANCE: "At a distance: the server behind a proxy that holds every chunk 0.25 ms or 1 ms each way; bound = "
        "what a round trip brings / the round trip; spin_wait=0 = jsclient that never polls before it sleeps",
        INSTRUMENTED: "Instrumented: jsclient with OpenTelemetry's SDK switched on (spans dropped by their processor, "
        "or batched into memory), beside the same rows off",
    }
    tables = {THREADS: threads_table, DISTANCE: distance_table, INSTRUMENTED: instrumented_table}
    for table, title in titles.items():
        some = [row for row in rows if row.table == table]
        if not some:
            continue
        out += ["", title, ""]
        out += tables.get(table, speed_table)(some, results, rst, saved.get("pythons"))
        ratios = fast_ingest_ratios({row.key: results.get(row.key, {}) for row in rows}) if table == FEATURES else []
        ratios += pipelining_gains(some, results) if table == DISTANCE else []
        if ratios:
            out += ["", *ratios]
    failed = errors(rows, results)
    if failed:
        out += ["", f"ERRORS: {len(failed)} run(s) gave no figure:", *(f"  {line}" for line in failed)]
    theirs = peer_failures(rows, results)
    if theirs:
        out += ["", f"PEER FAILURES: {len(theirs)} round(s) of a peer raised (its median is of its other rounds):",
                *(f"  {line}" for line in theirs)]
    print("\n".join(out))


def rst_cell(text: str) -> str:
    """A cell's text as reStructuredText reads it literally: inline markup escaped, and a first character that
    could open a list ("-" for no figure) or anything else escaped too."""
    text = re.sub(r"([\\`*_|<>\[\]])", r"\\\1", text)
    return f"\\{text}" if text and not text[0].isalnum() and text[0] != "\\" else text


def list_table(headers: list[str], lines: list[list[str]], title: str = "", *, stubs: int = 1) -> list[str]:
    """A reStructuredText list-table (the docs' tables: wide ones scroll, and a blank cell stays blank)."""
    out = [f".. list-table:: {rst_cell(title)}".rstrip(), "   :header-rows: 1", f"   :stub-columns: {stubs}", ""]
    for cells in (headers, *lines):
        out += [f"   {'*' if n == 0 else ' '} - {rst_cell(cell)}".rstrip() for n, cell in enumerate(cells)]
    return [*out, ""]


def readme_block(rows: Sequence[Described], saved: dict[str, Any]) -> list[str]:
    """README's performance table and the sentence that says where its figures come from, between the markers."""
    shown = [row for key in README_ROWS for row in rows if row.key == key]
    headers, lines = headline_cells(shown, saved["results"])
    machine = saved.get("machine") or {}
    python = f"Python {machine.get('python')}"
    peer = (saved.get("pythons") or {}).get("nats-py")
    if peer and peer != machine.get("python"):
        python += f" (nats-py on {peer})"
    about = (
        f"From the ``make bench`` run of {str(saved.get('date'))[:10]} on {machine.get('cores')} cores "
        f"({machine.get('cpu')}), {python}, {versions_of(saved, paths=False)}: client and "
        f"server pinned to a core each, medians of {saved.get('repeat')} rounds, the clients taking turns. "
        f"Rate per second, and {CPU}: the client's CPU per operation (docs/_data/bench.json keeps every round). "
        "The method and every row: `Performance <docs/guides/performance.rst>`_."
    )
    return [
        README_START,
        "",
        *textwrap.wrap(about, 78, break_on_hyphens=False, break_long_words=False),
        "",
        *render(headers, lines, rst=True),
        "",
        README_END,
    ]


def with_readme_block(text: str, block: list[str]) -> str:
    """``text`` (README.rst) with what lies between the markers, the markers included, replaced by ``block``."""
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        raise ValueError("no generated table's markers in the file (README_START ... README_END)")
    return text[:start] + "\n".join(block) + text[end + len(README_END):]


#: make bench-spark's baselines: one plain Python process, no Spark (the Spark bound: Spark with no JetStream).
SPARK_BULK = "BulkReader pulls, one process"
SPARK_REPLAY = "ordered consumer replay, one process"
SPARK_PUBLISH = "publish_async loop, one process"
SPARK_PUBLISH_MSGID = "publish_async loop with message ids, one process"
SPARK_PUBLISH_ATOMIC = "publish_batch loop of atomic batches of 1000, one process"
SPARK_KV_READ = "kv.keys() + kv.get per key, one process"
SPARK_KV_PUT = "kv.put loop, one process"
SPARK_BOUND = "streaming bound: rows made in memory -> dropped, same query"
SPARK_STREAM = "streaming read->write (checkpointed)"
SPARK_BASELINES = (SPARK_BULK, SPARK_REPLAY, SPARK_PUBLISH, SPARK_PUBLISH_MSGID, SPARK_PUBLISH_ATOMIC, SPARK_KV_READ,
                   SPARK_KV_PUT, SPARK_BOUND)
#: Issue 43's targets: a Spark write at least this times its same-guarantee loop's rate; the streaming query's CPU
#: per row outside nats-server at most this times the bound's.
SPARK_WRITE_TARGET, SPARK_CPU_TARGET = 1.0, 1.1


def spark_baseline(name: str) -> str | None:
    """The baseline a Spark row is divided by (reads by the BulkReader, writes by the loop with their guarantee,
    a bucket's by the plain client's key-value calls, the streaming query by the bound); None for one."""
    if name in SPARK_BASELINES:
        return None
    if "bucket" in name:
        return SPARK_KV_READ if "read" in name else SPARK_KV_PUT
    if name == SPARK_STREAM:
        return SPARK_BOUND
    if "read" in name:
        return SPARK_BULK
    if "message ids" in name:
        return SPARK_PUBLISH_MSGID
    return SPARK_PUBLISH_ATOMIC if "atomic" in name else SPARK_PUBLISH


def spark_plain(name: str) -> str | None:
    """A stream write's third column: the plain publish_async loop, which promises nothing (None: not a write)."""
    return SPARK_PUBLISH if name.startswith("spark write") else None


def spark_heading(saved: dict[str, Any]) -> list[str]:
    return [
        f"jsclient spark benchmarks, {saved.get('date')}, {host_of(saved)}",
        f"versions: {versions_of(saved)}",
        f"{saved.get('messages'):,} messages read, {saved.get('writes'):,} written, {saved.get('size')} B payloads, "
        f"medians of {saved.get('rounds')} rounds (baselines and Spark rows taking turns)",
        "CPU µs/row: CPU per row of every process of the run but nats-server (the driver, Spark's JVM, its Python "
        "workers); server µs/row: nats-server's",
    ]


def _spark_verdict(name: str, got: dict[str, Any]) -> tuple[str, str]:
    """A row's target and whether it is met: a write's rate ratio, the streaming query's CPU ratio."""
    if name == SPARK_STREAM and got.get("cpu ratio"):
        return f"CPU <= {SPARK_CPU_TARGET:.1f}x", "yes" if got["cpu ratio"] <= SPARK_CPU_TARGET else "NO"
    if name.startswith("spark write") and got.get("ratio"):
        return f"{SPARK_WRITE_TARGET:.1f}x", "yes" if got["ratio"] >= SPARK_WRITE_TARGET else "NO"
    return "", ""


def spark_cells(saved: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """make bench-spark's table: each row's rate, its ratio to its baseline and that ratio's range over rounds,
    a write's ratio to the plain loop, CPU per row outside nats-server and in it, and the target."""
    lines = []
    for name, got in saved["results"].items():
        base, per_round = got.get("baseline"), got.get("ratio rounds") or []
        spread = f"{min(per_round):.2f}-{max(per_round):.2f} (of {base.split(',')[0]})" if base and per_round else ""
        target, verdict = _spark_verdict(name, got)
        lines.append([name, f"{got['rate']:,.0f}" if got.get("rate") else "-",
                      f"{got['ratio']:.2f}x" if got.get("ratio") else "", spread,
                      f"{got['plain ratio']:.2f}x" if got.get("plain ratio") else "",
                      us(got.get("cpu_us")), us(got.get("server_us")), target, verdict])
    headers = ["row", "rows/s", "ratio", "per round", "of plain loop", "CPU µs/row", "server µs/row", "target", "ok"]
    return headers, lines


def spark_notes(saved: dict[str, Any]) -> list[str]:
    """What the table's figures say about issue 43's questions: what each write guarantee costs the server per
    message, and the streaming query's CPU per row against the Spark bound's."""
    results = saved["results"]
    out = []
    plain = (results.get(SPARK_PUBLISH) or {}).get("server_us")
    if plain is not None:  # 0 in a tiny run: the kernel counts CPU in clock ticks
        costs = [f"plain {us(plain)} µs"]
        for name, what in ((SPARK_PUBLISH_MSGID, "with message ids"), (SPARK_PUBLISH_ATOMIC, "in atomic batches")):
            cost = (results.get(name) or {}).get("server_us")
            if cost is not None:
                costs.append(f"{what} {us(cost)} µs" + (f" ({cost / plain:.2f}x)" if plain else ""))
        out.append("nats-server CPU per message published in one process: " + ", ".join(costs))
    stream, floor = results.get(SPARK_STREAM) or {}, results.get(SPARK_BOUND) or {}
    if stream.get("cpu ratio") and floor.get("cpu_us"):
        spread = stream.get("cpu ratio rounds") or [stream["cpu ratio"]]
        out.append(
            f"streaming: {us(stream['cpu_us'])} µs of CPU per row outside nats-server "
            f"(and {us(stream.get('server_us'))} in it) against the Spark bound's {us(floor['cpu_us'])}: "
            f"{stream['cpu ratio']:.2f}x "
            f"({min(spread):.2f}-{max(spread):.2f} over rounds; target <= {SPARK_CPU_TARGET:.1f}x)"
        )
        less_jit = stream.get("cpu ratio less JIT rounds")
        if less_jit:
            out.append(
                f"of which the JVM's JIT compiler threads: {us(stream.get('jit_us'))} µs per row, the bound's "
                f"{us(floor.get('jit_us'))}; without them, {min(less_jit):.2f}-{max(less_jit):.2f}x over rounds"
            )
    return out
