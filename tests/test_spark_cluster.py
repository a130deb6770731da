"""jsclient.spark on a Spark standalone cluster: a master and two workers on loopback, started as a user would.

The pyspark wheel has no sbin/, so the master and workers are started with
``spark-class``; executors take the driver's PYSPARK_PYTHON.  Marked
``spark_cluster`` (``make test`` runs it; ``-m "not spark_cluster"`` skips it).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import jsclient
from jsclient.server import NatsServer, free_port

pyspark = pytest.importorskip("pyspark", reason="install the spark extra: pip install -e '.[spark]'")
pytestmark = pytest.mark.spark_cluster

HERE = Path(__file__).parent


def _wait_port(port: int, what: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the {what} exited with {proc.returncode}"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"the {what} did not listen on {port} within {timeout} s")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """spark://127.0.0.1:PORT with two one-core workers; every process stopped at the end."""
    spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
    work = tmp_path_factory.mktemp("spark-standalone")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, "SPARK_LOG_DIR": str(work)}
    port = free_port()
    procs: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> subprocess.Popen[bytes]:
        log = open(work / f"{len(procs)}.log", "wb")  # noqa: SIM115 - closed with the process group
        proc = subprocess.Popen([spark_class, *args], env=env, stdout=log, stderr=log, start_new_session=True)
        procs.append(proc)
        return proc

    try:
        master = start("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                       "--webui-port", str(free_port()))
        _wait_port(port, "master", master)
        for i in range(2):
            start("org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                  "--webui-port", str(free_port()), "--work-dir", str(work / f"worker{i}"), f"spark://127.0.0.1:{port}")
        yield f"spark://127.0.0.1:{port}"
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


@pytest.mark.needs_server("2.12")  # the atomic sink
def test_read_aggregate_write_and_kv_udf_on_a_standalone_cluster(
    standalone: str, server: NatsServer, js: jsclient.JetStream
) -> None:
    js.add_stream(name="CLICKS", subjects=["clicks.*"], allow_direct=True)
    js.add_stream(name="TOTALS", subjects=["totals.*", "_jsclient.commits.TOTALS.>"], allow_atomic=True,
                  allow_direct=True)
    for i in range(3000):
        js.publish_async(f"clicks.{('eu', 'us', 'apac')[i % 3]}", b"%d" % i)
    js.publish_async_completed(timeout=30)
    kv = js.create_key_value("regions")
    kv.put("eu", b"Europe")
    kv.put("us", b"Americas")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, str(HERE / "spark_cluster_child.py"), standalone, server.url],
        env=env, capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["executors"] == 2  # both workers gave an executor: the work ran outside the driver
    assert result["driver_pid"] not in result["udf_pids"]
    assert result["rows"] == 3000
    assert result["counts"] == {"clicks.eu": 1000, "clicks.us": 1000, "clicks.apac": 1000}
    assert result["regions"] == ["-", "Americas", "Europe"]
    totals = {m.subject: int(m.data) for m in js.direct_get_batch("TOTALS", "totals.*", max_messages=10)}
    assert totals == {"totals.eu": 1000, "totals.us": 1000, "totals.apac": 1000}
