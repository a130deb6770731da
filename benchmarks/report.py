"""The tables of ``make bench``, as text or reStructuredText, from a run's results or an earlier ``--json`` file.

Kept apart from the runner so ``--from-json`` prints exactly what a run
prints.  A file from before CPU was measured (a bare rate per client) prints
with "-" for CPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from benchmarks.__main__ import Row

#: The tables a row can be in (see benchmarks/__main__.py).
MAIN, FEATURES, THREADS = "client speed", "feature against feature", "threads"
#: The clients' columns, in order (the runner's PEERS, then an --old checkout's jsclient).
COLUMNS = ("jsclient", "nats-py", "nats-py-sync", "nats-py-thread", "pynats2", "raw", "jsclient-old")
#: results key of a row's "% raw": the median over rounds of jsclient's rate over raw's in the same round.
SHARE = "% raw"
CPU = "µs/op"
#: (fast-ingest row, publish_async row, how they ran), for the ratio issue 22 sets a target on (1.5x).
FAST_INGEST_PAIRS = (
    ("js_publish_stream", "js_publish_async", "pinned (the server on one core)"),
    ("js_publish_stream_unpinned", "js_publish_async_unpinned", "nothing pinned"),
)


def entry(res: dict[str, Any], client: str) -> dict[str, Any] | None:
    """A client's summary in a row's results (an older file's bare rate becomes one), or None if not run."""
    value = res.get(client)
    if value is None or isinstance(value, dict):
        return value
    return {"rate": float(value)}


def rate_of(res: dict[str, Any], client: str) -> float | None:
    got = entry(res, client)
    return None if got is None else got.get("rate")


def us(value: float | None) -> str:
    """Microseconds, with the digits that mean something."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def rate_cell(row: Row, got: dict[str, Any] | None) -> str:
    if got is None:
        return "-"
    if got.get("rate") is None:
        return "error" if got.get("errors") else "-"
    return f"{got['rate']:,.0f}" if row.higher_is_better else f"{got['rate']:.1f} %"


def progress(row: Row, client: str, got: dict[str, Any]) -> str:
    """A (row, client)'s line on stderr: median rate and CPU, then each round's rate (a stall shows as one)."""
    rounds = " ".join("error" if f is None else f"{f['rate']:,.0f}" for f in got["rounds"])
    return f"{row.key:<26} {client:<14} {rate_cell(row, got):>12} {us(got.get('cpu_us')):>8} {CPU}  ({rounds})"


def errors(rows: list[Row], results: dict[str, dict[str, Any]]) -> list[str]:
    """Every run that gave no figure, as ``row client: why``."""
    out = []
    for row in rows:
        for client in COLUMNS:
            got = entry(results.get(row.key, {}), client)
            out.extend(f"{row.key} {client} {why}" for why in (got or {}).get("errors", []))
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


def ratio(res: dict[str, Any]) -> float | None:
    js, py = rate_of(res, "jsclient"), rate_of(res, "nats-py")
    return js / py if js and py else None


def of_raw(res: dict[str, Any]) -> str:
    """jsclient as a share of the raw-socket bound (what the server allows), or "-"."""
    share = res.get(SHARE)
    if share:
        return f"{share:.0f} %"
    js, raw = rate_of(res, "jsclient"), rate_of(res, "raw")
    return f"{100 * js / raw:.0f} %" if js and raw else "-"


def speed_table(rows: list[Row], results: dict[str, dict[str, Any]], rst: bool) -> list[str]:
    """Client speed or feature against feature: each client's rate and CPU per operation, the ratio, the target."""
    clients = [c for c in COLUMNS if any(c in row.clients or entry(results.get(row.key, {}), c) for row in rows)]
    headers = ["row"]
    for client in clients:
        headers += [client, CPU]
    headers += [SHARE, "ratio", "target", "ok"]
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
        if old:
            before, now = rate_of(res, "jsclient-old"), rate_of(res, "jsclient")
            cells.append(f"{now / before:.2f}x" if before and now and row.higher_is_better else "-")
        lines.append(cells)
    return render(headers, lines, rst)


def threads_table(rows: list[Row], results: dict[str, dict[str, Any]], rst: bool) -> list[str]:
    """A line per (row, client): calls per second, CPU per call, latency of one call."""
    lines = []
    for row in rows:
        res = results.get(row.key, {})
        for n, client in enumerate(c for c in COLUMNS if entry(res, c) is not None):
            got = entry(res, client) or {}
            lines.append([row.title if rst or n == 0 else "", client, rate_cell(row, got), us(got.get("cpu_us")),
                          us(got.get("p50_us")), us(got.get("p99_us"))])
    return render(["row", "client", "calls/s", "µs CPU/call", "p50 µs", "p99 µs"], lines, rst, left=2)


def fast_ingest_ratios(results: dict[str, dict[str, Any]]) -> list[str]:
    """Fast-ingest over jsclient's own publish_async, for each pair of rows measured."""
    lines = []
    for stream, window, how in FAST_INGEST_PAIRS:
        fast, plain = rate_of(results.get(stream, {}), "jsclient"), rate_of(results.get(window, {}), "jsclient")
        if fast and plain:
            lines.append(f"fast-ingest / publish_async, {how}: {fast / plain:.2f}x (target 1.5x)")
    return lines


def heading(saved: dict[str, Any]) -> list[str]:
    """When, where and what was measured."""
    host = saved.get("machine") or {}
    if isinstance(host, dict):
        host = f"{host.get('cores')} cores, {host.get('cpu')}, Python {host.get('python')}"
    versions = ", ".join(f"{name} {version}" for name, version in (saved.get("versions") or {}).items())
    repeat = saved.get("repeat", 3)
    lines = [f"jsclient benchmarks, {saved.get('date')}, {host}"]
    if versions:
        lines.append(f"versions: {versions}")
    if saved.get("smoke") or (saved.get("scale") or 1) < 0.1:
        lines.append(f"SMOKE/TINY-SCALE RUN (scale {saved.get('scale')}): the figures below mean nothing")
    lines += [
        f"medians of {repeat} runs of each client, taking turns; rate per second, and {CPU}: the client process's "
        "CPU (user + sys, all its threads) per operation over the timed part",
        "ratio = jsclient / nats-py; raw = pre-encoded frames on a bare socket; % raw = median over rounds of "
        "jsclient / raw in the same round; nats-py-sync = its blocking wrapper; nats-py-thread = nats-py on a "
        "loop thread (run_coroutine_threadsafe)",
    ]
    return lines


def print_all(rows: list[Row], saved: dict[str, Any], *, rst: bool = False) -> None:
    results = saved["results"]
    out = heading(saved)
    titles = {
        MAIN: "Client speed: every client doing the same work",
        FEATURES: "Feature against feature: the clients (or jsclient's two rows) do different work, as each title "
        "says; not a measure of client speed",
        THREADS: "Threads of one process: jsclient one shared connection, nats-py-thread one connection on one "
        "loop thread, nats-py-sync a context per thread, pynats2 a connection per thread",
    }
    for table, title in titles.items():
        some = [row for row in rows if row.table == table]
        if not some:
            continue
        out += ["", title, ""]
        out += threads_table(some, results, rst) if table == THREADS else speed_table(some, results, rst)
        ratios = fast_ingest_ratios({row.key: results.get(row.key, {}) for row in rows}) if table == FEATURES else []
        if ratios:
            out += ["", *ratios]
    failed = errors(rows, results)
    if failed:
        out += ["", f"ERRORS: {len(failed)} run(s) gave no figure:", *(f"  {line}" for line in failed)]
    print("\n".join(out))
