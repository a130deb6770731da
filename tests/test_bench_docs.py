"""The docs' benchmark figures come from the benchmarks' JSON, never from a hand: issue 41.

* The committed files (docs/_data/bench.json from ``make bench``, docs/_data/bench-spark.json from
  ``make bench-spark``) exist, parse, come from full runs and say when, where and with what they were measured.
* The tables and charts of docs/_ext/benchdata.py are drawn from a file: from a small fixture, its figures are
  the ones that appear, and a changed figure changes the table and the chart.
* A site built with the extension over a fixture shows the fixture's figures and saves its charts as images.
* README's performance table is what ``make bench`` writes from the committed file.

No timing is asserted anywhere: the figures are data here.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib", reason="install the docs extra: pip install -e '.[docs]'")

from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "_data"
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import benchdata  # noqa: E402

from benchmarks import report  # noqa: E402

ROWS = {
    "publish": {"title": "publish msgs/s (128 B)", "clients": ["jsclient", "nats-py", "raw"], "target": 2.5,
                "higher_is_better": True, "table": report.MAIN},
    "kv_get": {"title": "kv.get ops/s", "clients": ["jsclient", "nats-py"], "target": None,
               "higher_is_better": True, "table": report.MAIN},
    "direct_batch": {"title": "direct get batch (nats-py: single gets) msgs/s", "clients": ["jsclient", "nats-py"],
                     "target": 10.0, "higher_is_better": True, "table": report.FEATURES},
    "threads_request_8": {"title": "request/reply, 8 threads", "clients": ["jsclient", "pynats2"], "target": None,
                          "higher_is_better": True, "table": report.THREADS},
    "distance_request_1ms": {"title": "request/reply, 1 in flight, 1 ms each way",
                             "clients": ["jsclient", report.SPIN0, "nats-py"], "target": None,
                             "higher_is_better": True, "table": report.DISTANCE, "distance": 0.001, "in_flight": 1},
    "distance_request_concurrent_1ms": {"title": "request/reply, 16 in flight, 1 ms each way",
                                        "clients": ["jsclient", report.SPIN0, "nats-py"], "target": None,
                                        "higher_is_better": True, "table": report.DISTANCE, "distance": 0.001,
                                        "in_flight": 16},
}


def figure(rate: float, cpu_us: float, **more: float) -> dict[str, Any]:
    return {"rate": rate, "cpu_us": cpu_us, **more, "rounds": [{"rate": rate, "cpu_us": cpu_us, **more}]}


def bench_fixture() -> dict[str, Any]:
    """A make bench file of four rows, as benchmarks/__main__.py writes one."""
    return {
        "date": "2031-02-03T04:05:06+00:00",
        "machine": {"cpu": "Fixture CPU 9000", "cores": 7, "python": "3.11.99", "implementation": "CPython",
                    "platform": "Linux-fixture"},
        "versions": {"jsclient": "9.8.7 (abcdef1)", "nats-py": "2.99.0",
                     "nats-server": "2.77.1 (/opt/bin/nats-server)"},
        "repeat": 5, "scale": 1.0, "pinned": True, "smoke": False,
        "rows": ROWS,
        "results": {
            "publish": {"jsclient": figure(1_234_567, 0.71), "nats-py": figure(363_108, 2.61),
                        "raw": figure(2_469_134, 0.05), report.SHARE: 50.0},
            "kv_get": {"jsclient": figure(16_054, 61.2), "nats-py": figure(4_732, 205.0)},
            "direct_batch": {"jsclient": figure(250_000, 3.3), "nats-py": figure(5_000, 180.0)},
            "threads_request_8": {"jsclient": figure(31_337, 70.0, p50_us=230.0, p99_us=990.0),
                                  "pynats2": figure(1_111, 600.0, p50_us=7_000.0, p99_us=9_000.0)},
            "distance_request_1ms": {"jsclient": figure(451, 44.0), report.SPIN0: figure(441, 40.0),
                                     "nats-py": figure(425, 121.0)},
            "distance_request_concurrent_1ms": {"jsclient": figure(6_767, 12.1), report.SPIN0: figure(6_550, 11.0),
                                                "nats-py": figure(5_705, 26.0), report.CPU_VS_SPIN0: 1.05},
        },
        "errors": [],
    }


def spark_fixture() -> dict[str, Any]:
    replay, publish = report.SPARK_REPLAY, report.SPARK_PUBLISH
    return {
        "benchmark": "spark", "date": "2031-02-03T05:06:07+00:00",
        "machine": {"cpu": "Fixture CPU 9000", "cores": 7, "python": "3.11.99", "platform": "Linux-fixture"},
        "versions": {"jsclient": "9.8.7 (abcdef1)", "pyspark": "4.9.9", "nats-server": "2.77.1", "python": "3.11.99",
                     "java": "17.0.99"},
        "messages": 1_000_000, "writes": 400_000, "size": 100, "rounds": 3,
        "results": {
            replay: {"rate": 200_000.0, "rounds": [190_000.0, 200_000.0, 210_000.0]},
            "spark batch read, 4 partition(s)": {"rate": 456_789.0, "rounds": [456_789.0] * 3, "baseline": replay,
                                                 "ratio": 2.283945, "ratio rounds": [2.2, 2.28, 2.4]},
            publish: {"rate": 100_000.0, "rounds": [100_000.0] * 3},
            "spark write, 2 partitions, message ids": {"rate": 61_000.0, "rounds": [61_000.0] * 3,
                                                       "baseline": publish, "ratio": 0.61,
                                                       "ratio rounds": [0.6, 0.61, 0.62]},
        },
    }


def write(tmp_path: Path, saved: dict[str, Any], name: str = "bench.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(saved))
    return path


def widths(ax: Axes) -> list[float]:
    """The lengths of a bar chart's bars, in its order."""
    return [patch.get_width() for patch in ax.patches if isinstance(patch, Rectangle)]


def rst_of(tmp_path: Path, saved: dict[str, Any], part: str, name: str = "bench.json") -> str:
    return "\n".join(benchdata.rst(write(tmp_path, saved, name), part))


# The committed files.


@pytest.mark.parametrize("name", ["bench.json", "bench-spark.json"])
def test_committed_files_exist_parse_and_say_where_they_come_from(name: str) -> None:
    saved = json.loads((DATA / name).read_text())
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d", saved["date"])
    assert saved["machine"]["cores"] and saved["machine"]["cpu"] and saved["machine"]["python"]
    assert {"jsclient", "nats-server"} <= set(saved["versions"])
    assert saved["results"]
    if name == "bench-spark.json":
        assert saved["benchmark"] == "spark" and {"pyspark", "python"} <= set(saved["versions"])
        for got in saved["results"].values():
            assert got["rate"] and len(got["rounds"]) >= 1
        assert set(saved["results"]) >= {report.SPARK_REPLAY, report.SPARK_PUBLISH}
        return
    assert not report.tiny(saved), "the committed bench.json must come from a full run, not a smoke run"
    assert "nats-py" in saved["versions"] and set(saved["rows"]) == set(saved["results"])
    for key, row in saved["rows"].items():
        for client in row["clients"]:
            got = saved["results"][key][client]
            assert len(got["rounds"]) == saved["repeat"], (key, client)


def test_every_part_of_the_committed_files_renders() -> None:
    for name, parts in (("bench.json", benchdata.BENCH_PARTS), ("bench-spark.json", benchdata.SPARK_PARTS)):
        for part in parts:
            assert benchdata.rst(DATA / name, part), (name, part)
        for part in set(parts) & set(benchdata.CHARTS):
            assert benchdata.figure(DATA / name, part).axes[0].patches, (name, part)


def test_readme_table_is_the_one_make_bench_writes_from_the_committed_file() -> None:
    saved = json.loads((DATA / "bench.json").read_text())
    rows = report.rows_of(saved, ())
    readme = (ROOT / "README.rst").read_text()
    assert report.with_readme_block(readme, report.readme_block(rows, saved)) == readme, (
        "README's performance table differs from docs/_data/bench.json: "
        "python -m benchmarks --from-json docs/_data/bench.json --readme README.rst"
    )


# Tables and charts from a fixture.


def test_tables_show_the_figures_of_the_file(tmp_path: Path) -> None:
    saved = bench_fixture()
    headline = rst_of(tmp_path, saved, "headline")
    assert ".. list-table::" in headline
    # jsclient's and nats-py's rates, the ratio, each one's CPU per operation, the target.
    for cell in ("1,234,567", "363,108", "3.40x", "0.71", "2.61", "2.5x", "16,054", "3.39x", "61.2", "205"):
        assert f"- {cell}\n" in headline + "\n", cell
    assert "direct get batch" not in headline  # feature against feature: a table of its own
    speed = rst_of(tmp_path, saved, "speed")
    assert "- 2,469,134" in speed and "- 50 %" in speed  # raw, and jsclient's share of it
    assert "- 250,000" in rst_of(tmp_path, saved, "features")
    threads = rst_of(tmp_path, saved, "threads")
    assert "- 31,337" in threads and "- 990" in threads and "- 7,000" in threads
    # A missing figure is a dash, escaped so that it is not read as a list.
    assert "- \\-" in speed


def test_distance_table_shows_bounds_spin_wait_and_pipelining_from_the_file(tmp_path: Path) -> None:
    saved = bench_fixture()
    table = rst_of(tmp_path, saved, "distance")
    # The latency bound (what a round trip brings over twice the delay) and jsclient's share of it; each client's
    # rate and CPU; the ratio to nats-py; jsclient's rate and CPU over its own with spin_wait=0: the median of the
    # rounds' ratios where the file has it, else the ratio of the medians.
    for cell in ("500", "8,000", "90 %", "85 %", "451", "44.0", "441", "40.0", "121", "1.06x", "1.02x", "1.10x",
                 "6,767", "5,705", "1.19x", "1.03x", "1.05x"):
        assert f"- {cell}\n" in table, cell
    assert "- spin\\_wait=0\n" in table
    assert "* 16 requests in flight over 1, 1 ms each way: jsclient 15.0x, nats-py 13.4x" in table
    assert "each way" not in rst_of(tmp_path, saved, "speed")  # a table of its own
    # A file from before the distance rows: the part says they were not measured (the page builds all the same).
    older = bench_fixture()
    for key in ("distance_request_1ms", "distance_request_concurrent_1ms"):
        del older["rows"][key], older["results"][key]
    assert rst_of(tmp_path, older, "distance").startswith("Not measured yet")


def test_a_changed_figure_changes_the_tables(tmp_path: Path) -> None:
    saved = bench_fixture()
    before = rst_of(tmp_path, saved, "headline")
    changed = copy.deepcopy(saved)
    changed["results"]["publish"]["jsclient"]["rate"] = 1_815_540
    changed["results"]["publish"]["jsclient"]["cpu_us"] = 0.42
    after = rst_of(tmp_path, changed, "headline")
    assert after != before
    assert "- 1,815,540" in after and "- 5.00x" in after and "- 0.42" in after
    assert "1,234,567" not in after and "3.40x" not in after


def test_about_says_the_date_machine_and_versions_of_the_file(tmp_path: Path) -> None:
    about = rst_of(tmp_path, bench_fixture(), "about")
    for said in ("2031-02-03 04:05:06 UTC", "7 cores", "Fixture CPU 9000", "3.11.99", "jsclient 9.8.7 (abcdef1)",
                 "nats-py 2.99.0", "nats-server 2.77.1", "--repeat 5", "pinned"):
        assert said in about, said
    assert "/opt/bin" not in about  # the binary's path is the measuring machine's, not the reader's
    assert ".. warning::" not in about
    smoke = bench_fixture() | {"smoke": True}
    assert ".. warning::" in rst_of(tmp_path, smoke, "about")
    spark = rst_of(tmp_path, spark_fixture(), "about", "bench-spark.json")
    for said in ("2031-02-03 05:06:07 UTC", "pyspark 4.9.9", "java 17.0.99", "1,000,000 messages", "3 rounds"):
        assert said in spark, said


def test_spark_table_shows_rates_and_ratios_to_the_baselines(tmp_path: Path) -> None:
    table = rst_of(tmp_path, spark_fixture(), "spark", "bench-spark.json")
    for cell in ("456,789", "2.28x", "2.20-2.40 (of ordered consumer replay)", "61,000", "0.61x", "200,000"):
        assert cell in table, cell


def test_charts_are_drawn_from_the_file(tmp_path: Path) -> None:
    saved = bench_fixture()
    ratios = benchdata.figure(saved, "ratios").axes[0]
    assert widths(ratios) == pytest.approx([1_234_567 / 363_108, 16_054 / 4_732])
    assert [label.get_text() for label in ratios.get_yticklabels()] == ["publish msgs/s (128 B)", "kv.get ops/s"]
    assert "2031-02-03" in ratios.get_title()
    cpu = benchdata.figure(saved, "cpu").axes[0]
    assert sorted(widths(cpu)) == pytest.approx([0.71, 2.61, 61.2, 205.0])
    changed = copy.deepcopy(saved)
    changed["results"]["kv_get"]["nats-py"]["rate"] = 8_027
    assert widths(benchdata.figure(changed, "ratios").axes[0])[1] == pytest.approx(2.0)
    spark = benchdata.figure(spark_fixture(), "spark-chart").axes[0]
    assert widths(spark) == [200_000.0, 456_789.0, 100_000.0, 61_000.0]
    # The directive's chart is a plot directive that draws this file's part.
    path = write(tmp_path, saved)
    plot = "\n".join(benchdata.rst(path, "ratios"))
    assert ".. plot::" in plot and f"benchdata.figure({str(path)!r}, 'ratios')" in plot


def test_the_python_each_client_ran_on_and_the_ratio_to_natsio_are_shown(tmp_path: Path) -> None:
    """Each peer runs on the CPython where it does best (benchmarks/pythons.py): the file records which, the about
    part and every client's column heading say it, and jsclient's rate over natsio's has a column of its own."""
    saved = bench_fixture()
    saved["pythons"] = {"jsclient": "3.11.99", "nats-py": "3.11.99", "natsio": "3.13.0", "raw": "3.11.99"}
    saved["rows"]["publish"]["clients"].append("natsio")
    saved["results"]["publish"]["natsio"] = figure(617_283, 1.5)
    speed = rst_of(tmp_path, saved, "speed")
    for cell in ("natsio (py3.13)", "nats-py (py3.11)", "jsclient (py3.11)", "ratio natsio", "617,283", "2.00x"):
        assert f"- {cell}\n" in speed, cell
    about = rst_of(tmp_path, saved, "about")
    assert ":Pythons: 3.11.99: jsclient, nats-py, raw; 3.13.0: natsio (each peer on the CPython" in about, about
    assert "gh-146507" in about
    # A file from before the interpreters were recorded: the headings as they were, no such field.
    assert "(py" not in rst_of(tmp_path, bench_fixture(), "speed")
    assert ":Pythons:" not in rst_of(tmp_path, bench_fixture(), "about")
    # A client the machine had no interpreter for is said to be missing.
    saved["not measured"] = {"natsio": "needs CPython 3.13 or later, and this machine has no Python 3.13"}
    assert ":Not measured: natsio: it needs CPython 3.13 or later" in rst_of(tmp_path, saved, "about")
    # README's sentence names nats-py's interpreter where it is not the runner's.
    rows = report.rows_of(saved, ())
    assert "Python 3.11.99, " in "\n".join(report.readme_block(rows, saved))
    saved["pythons"]["nats-py"] = "3.11.7"
    assert "Python 3.11.99 (nats-py on 3.11.7)," in " ".join(report.readme_block(rows, saved))


def test_an_unknown_part_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no part 'spark'"):
        benchdata.rst(write(tmp_path, bench_fixture()), "spark")


def test_a_site_built_from_a_fixture_shows_its_figures_and_charts(tmp_path: Path) -> None:
    """The extension in a Sphinx build of its own (warnings are errors), over a fixture file."""
    src = tmp_path / "src"
    (src / "data").mkdir(parents=True)
    (src / "data" / "bench.json").write_text(json.dumps(bench_fixture()))
    (src / "conf.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / "docs" / "_ext")!r}]
        extensions = ["matplotlib.sphinxext.plot_directive", "benchdata"]
        bench_data_dir = "data"
        exclude_patterns = ["data"]
        plot_formats = [("png", 60)]
        plot_html_show_formats = False
        plot_html_show_source_link = False
    """))
    (src / "index.rst").write_text(textwrap.dedent("""
        Results
        =======

        .. bench:: bench.json about

        Ratios
        ------

        .. bench:: bench.json ratios

        .. bench:: bench.json headline
    """))
    out = tmp_path / "html"
    run = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-n", "-q", str(src),
                          str(out)], capture_output=True, text=True, timeout=240, check=False, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-4000:]
    html = (out / "index.html").read_text()
    for shown in ("1,234,567", "3.40x", "0.71", "Fixture CPU 9000", "2031-02-03 04:05:06 UTC"):
        assert shown in html, shown
    images = re.findall(r'<img [^>]*src="([^"]+\.png)"', html)
    assert images and all((out / image).is_file() for image in images), images
