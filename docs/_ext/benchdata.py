"""The benchmark results of the performance page, drawn at build time from the committed JSON (docs/_data).

``make bench`` writes docs/_data/bench.json and ``make bench-spark`` docs/_data/bench-spark.json; the
page shows them through one directive, ``.. bench:: FILE PART``, FILE under ``bench_data_dir`` (``_data``
beside conf.py), so no figure in the docs is typed by hand and a new run, once committed, is the next
build's tables and charts.  The parts:

* of make bench's file: ``about`` (date, machine, versions, the Python each client ran on, how it ran),
  ``headline`` (jsclient beside nats-py: rates, ratio, client CPU per operation), ``speed`` (the client-speed
  table, every client, each headed with the Python it ran on),
  ``features`` (feature against feature), ``threads`` (with latency), ``distance`` (the server behind the
  delay proxy, with what pipelining gains there; a file from before those rows says so), ``instrumented``
  (jsclient with OpenTelemetry switched on beside the same rows off; likewise), and the charts ``ratios``
  (jsclient / nats-py per row, with the targets) and ``cpu`` (client CPU per operation, jsclient and nats-py);
* of make bench-spark's file: ``about``, ``spark`` (the table) and ``spark-chart``.

The tables are the cells of benchmarks/report.py, the ones ``make bench`` prints, as reStructuredText
list-tables; the charts are matplotlib figures (the Agg backend) that the plot directive saves into the
build.  tests/test_bench_docs.py draws both from a fixture and checks that its figures are what appears.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from docutils import nodes
from docutils.statemachine import StringList
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

from benchmarks import report

BENCH_PARTS = ("about", "headline", "speed", "features", "threads", "distance", "instrumented", "ratios", "cpu")
SPARK_PARTS = ("about", "spark", "spark-chart")
CHARTS = ("ratios", "cpu", "spark-chart")
JSCLIENT, NATS_PY, BASELINE = "#2f6fb0", "#e08a2c", "#9a9a9a"


def load(path: Path | str) -> dict[str, Any]:
    saved: dict[str, Any] = json.loads(Path(path).read_text())
    return saved


def is_spark(saved: dict[str, Any]) -> bool:
    return saved.get("benchmark") == "spark"


def rows_in(saved: dict[str, Any], table: str) -> list[report.Described]:
    return [row for row in report.rows_of(saved, ()) if row.table == table]


def about(saved: dict[str, Any], name: str) -> list[str]:
    """Where the figures come from: the file, the date, the machine, the versions, how the run was made."""
    host = saved.get("machine") or {}
    date = str(saved.get("date", "?")).replace("T", " ").replace("+00:00", " UTC")
    if is_spark(saved):
        run = (f"``python -m benchmarks.spark_bench``: {saved.get('messages'):,} messages read and "
               f"{saved.get('writes'):,} written, {saved.get('size')} B payloads, Spark ``local[2]``; medians of "
               f"{saved.get('rounds')} rounds, the baselines and the Spark rows taking turns")
    else:
        pinned = "client and server pinned to a core each" if saved.get("pinned") else "nothing pinned"
        run = (f"``python -m benchmarks --repeat {saved.get('repeat')}`` at scale {saved.get('scale')}: {pinned}; "
               f"medians of {saved.get('repeat')} rounds, the clients taking turns")
    lines = [
        f":Data: ``docs/_data/{name}``, the file ``make {'bench-spark' if is_spark(saved) else 'bench'}`` writes",
        f":Date: {date}",
        f":Machine: {host.get('cores')} cores, {report.rst_cell(str(host.get('cpu')))}; "
        f"{host.get('implementation', 'Python')} {host.get('python')} on {report.rst_cell(str(host.get('platform')))}",
        f":Versions: {report.rst_cell(report.versions_of(saved, paths=False))}",
        f":Run: {run}",
    ]
    where = "" if is_spark(saved) else report.pythons_of(saved)
    if where:  # a file from before they were recorded ran every client on the machine's Python
        from benchmarks.pythons import WHY

        lines.append(f":Pythons: {report.rst_cell(where)} ({report.rst_cell(WHY)})")
    for client, why in ({} if is_spark(saved) else saved.get("not measured") or {}).items():
        lines.append(f":Not measured: {report.rst_cell(client)}: it {report.rst_cell(why)}")
    lines.append("")
    if not is_spark(saved) and report.tiny(saved):
        lines += [".. warning::", "", "   A smoke or tiny-scale run: its figures mean nothing.", ""]
    failed = saved.get("errors") or []
    if failed:
        lines += [".. warning::", "", f"   {len(failed)} run(s) of this file gave no figure:", ""]
        lines += [f"   * {report.rst_cell(why)}" for why in failed] + [""]
    theirs = saved.get("peer failures") or []
    if theirs:
        lines += [".. note::", "", f"   {len(theirs)} round(s) of a peer raised; its figure is the median of its other "
                  "rounds (see :ref:`peer-failures`):", ""]
        lines += [f"   * {report.rst_cell(why)}" for why in theirs] + [""]
    return lines


def table(saved: dict[str, Any], part: str) -> list[str]:
    """A part's table as reStructuredText (a list-table, and for ``features`` the fast-ingest ratios)."""
    if part == "spark":
        notes = [line for note in report.spark_notes(saved) for line in ("", report.rst_cell(note))]
        return report.list_table(*report.spark_cells(saved), "make bench-spark: rows per second") + notes
    results, pythons = saved["results"], saved.get("pythons")
    if part == "headline":
        return report.list_table(*report.headline_cells(rows_in(saved, report.MAIN), results),
                                 "jsclient beside nats-py: rate, ratio and client CPU per operation")
    if part == "speed":
        return report.list_table(*report.speed_cells(rows_in(saved, report.MAIN), results, pythons),
                                 "Client speed: every client doing the same work")
    if part == "features":
        out = report.list_table(*report.speed_cells(rows_in(saved, report.FEATURES), results, pythons),
                                "Feature against feature: not a measure of client speed")
        return out + [f"* {line}" for line in report.fast_ingest_ratios(results)] + [""]
    if part == "threads":
        return report.list_table(*report.threads_cells(rows_in(saved, report.THREADS), results, False, pythons),
                                 "Threads of one process: calls per second, CPU and latency per call", stubs=0)
    if part == "distance":
        rows = rows_in(saved, report.DISTANCE)
        if not rows:
            return [f"Not measured yet: this run ({report.rst_cell(str(saved.get('date')))}) has no distance rows.",
                    ""]
        out = report.list_table(*report.distance_cells(rows, results, pythons),
                                "At a distance: rate and client CPU per operation, the server 0.25 ms or 1 ms away")
        return out + [f"* {line}" for line in report.pipelining_gains(rows, results)] + [""]
    if part == "instrumented":
        rows = rows_in(saved, report.INSTRUMENTED)
        if not rows:
            return [f"Not measured yet: this run ({report.rst_cell(str(saved.get('date')))}) has no instrumented "
                    "rows.", ""]
        return report.list_table(*report.instrumented_cells(rows, results),
                                 "Instrumented: rate and client CPU per operation, OpenTelemetry off, spans dropped, "
                                 "spans batched")
    raise ValueError(f"no table {part!r}")


def _bars(height: int) -> tuple[Figure, Any]:
    fig, ax = plt.subplots(figsize=(8.5, 0.34 * height + 1.5), layout="constrained")
    return fig, ax


def figure(saved: dict[str, Any] | Path | str, part: str) -> Figure:
    """A part's chart, drawn with pyplot (so the plot directive finds it) and returned."""
    if not isinstance(saved, dict):
        saved = load(saved)
    date = str(saved.get("date", "?"))[:10]
    if part == "spark-chart":
        return _spark_chart(saved, date)
    results = saved["results"]
    rows = [row for row in rows_in(saved, report.MAIN) if report.ratio(results.get(row.key, {}))]
    if part == "ratios":
        fig, ax = _bars(len(rows))
        values = [report.ratio(results[row.key]) or 0.0 for row in rows]
        ax.barh(range(len(rows)), values, color=JSCLIENT, label="jsclient / nats-py")
        for i, value in enumerate(values):
            ax.text(value, i, f" {value:.2f}x", va="center", fontsize=8)
        targets = [(i, row.target) for i, row in enumerate(rows) if row.target]
        if targets:
            ax.scatter([t for _, t in targets], [i for i, _ in targets], marker="|", s=180, color="black",
                       zorder=3, label="target")
        ax.axvline(1, color=BASELINE, linewidth=1)
        ax.set_xscale("log")
        ax.set_xlim(min(0.8, *values), max(values) * 1.6)
        ax.set_xlabel("jsclient's rate / nats-py's (log scale; 1x: as fast as nats-py)")
        ax.set_title(f"jsclient beside nats-py, make bench of {date}", fontsize=10)
    elif part == "cpu":
        cpu = {row.key: [(report.entry(results[row.key], who) or {}).get("cpu_us") for who in ("jsclient", "nats-py")]
               for row in rows}
        rows = [row for row in rows if all(cpu[row.key])]
        fig, ax = _bars(len(rows))
        for offset, who, color, n in ((-0.2, "jsclient", JSCLIENT, 0), (0.2, "nats-py", NATS_PY, 1)):
            spent = [float(cpu[row.key][n] or 0) for row in rows]
            ax.barh([i + offset for i in range(len(rows))], spent, height=0.4, color=color, label=who)
            for i, value in enumerate(spent):
                ax.text(value, i + offset, f" {report.us(value)}", va="center", fontsize=7)
        ax.set_xscale("log")
        ax.set_xlabel("client CPU per operation (per MiB for the object store), µs: user + sys, all its threads; "
                      "log scale")
        ax.set_title(f"Client CPU per operation, make bench of {date}", fontsize=10)
    else:
        raise ValueError(f"no chart {part!r}")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}" + ("x" if part == "ratios" else "")))
    ax.set_yticks(range(len(rows)), [row.title for row in rows], fontsize=8)
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize=8)
    return fig


def _spark_chart(saved: dict[str, Any], date: str) -> Figure:
    names = list(saved["results"])
    fig, ax = _bars(len(names))
    for i, name in enumerate(names):
        got = saved["results"][name]
        base = got.get("baseline")
        ax.barh(i, got["rate"], color=JSCLIENT if base else BASELINE)
        label = f" {got['rate']:,.0f}" + (f"  ({got['ratio']:.2f}x of {base.split(',')[0]})" if base else "")
        ax.text(got["rate"], i, label, va="center", fontsize=7)
    ax.set_xlim(0, max(got["rate"] for got in saved["results"].values()) * 1.7)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("rows per second (grey: the single-process baselines)")
    ax.set_title(f"The Spark data source, make bench-spark of {date}", fontsize=10)
    return fig


def chart(path: Path, part: str, saved: dict[str, Any]) -> list[str]:
    """A plot directive that draws a part's chart from the file at ``path``; its alt text says what it shows."""
    what = {
        "ratios": "jsclient's rate over nats-py's for each client-speed row, with the targets",
        "cpu": "client CPU per operation of jsclient and nats-py for each client-speed row",
        "spark-chart": "rows per second of the Spark rows and their single-process baselines",
    }[part]
    return [
        ".. plot::",
        "   :context: close-figs",  # drawn again at every build: the file may have changed since the last
        f"   :alt: A bar chart: {what}, from docs/_data/{path.name} ({saved.get('date')}).",
        "",
        "   import benchdata",
        f"   benchdata.figure({str(path)!r}, {part!r})",
        "",
    ]


def rst(path: Path, part: str) -> list[str]:
    """What ``.. bench:: FILE PART`` stands for, as reStructuredText."""
    saved = load(path)
    parts = SPARK_PARTS if is_spark(saved) else BENCH_PARTS
    if part not in parts:
        raise ValueError(f"{path.name} has no part {part!r} (it has {', '.join(parts)})")
    if part == "about":
        return about(saved, path.name)
    if part in CHARTS:
        return chart(path, part, saved)
    return table(saved, part)


class BenchDirective(SphinxDirective):
    """``.. bench:: FILE PART``: a part of a benchmark run's results, from FILE under ``bench_data_dir``."""

    required_arguments = 2
    has_content = False

    def run(self) -> list[nodes.Node]:
        name, part = self.arguments
        path = Path(self.env.srcdir) / self.config.bench_data_dir / name
        self.env.note_dependency(str(path))
        try:
            lines = rst(path, part)
        except (OSError, ValueError, KeyError) as exc:
            raise self.error(f"bench:: {name} {part}: {exc}") from exc
        container = nodes.container(classes=["bench-data"])
        nested_parse_with_titles(self.state, StringList(lines, source=str(path)), container)
        return list(container.children)


def setup(app: Any) -> dict[str, Any]:
    app.add_config_value("bench_data_dir", "_data", "env")
    app.add_directive("bench", BenchDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
