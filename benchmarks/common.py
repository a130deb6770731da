"""What every measurement process shares: its figure (rate and CPU per operation), the timer, helper processes.

A measurement process prints one JSON line, :meth:`Figure.line`.  CPU is
``time.process_time()`` (user + sys of every thread of the process: reader
threads, event-loop threads and executors included), taken around the timed
part only, so a client that hands its work to a thread pays for it all the
same, and setup, churn and teardown count for nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Figure:
    """One run of one (row, client): operations per second and the process's CPU per operation."""

    rate: float  # per second, in the row's unit (messages, calls, MiB; for the watchdog % of a core)
    cpu_us: float  # microseconds of this process's CPU per unit
    p50_us: float | None = None  # latency of one call, for the threads rows
    p99_us: float | None = None

    def line(self) -> str:
        return json.dumps({key: value for key, value in asdict(self).items() if value is not None})


class Meter:
    """Wall-clock and CPU summed over the timed parts only (start/stop may come in pairs, or ``with``)."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self._since = (0.0, 0.0)

    def start(self) -> None:
        self._since = (time.perf_counter(), time.process_time())

    def stop(self) -> None:
        wall, cpu = self._since
        self.wall += time.perf_counter() - wall
        self.cpu += time.process_time() - cpu

    def __enter__(self) -> Meter:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def figure(self, ops: float, latencies_ns: list[int] | None = None) -> Figure:
        p50 = p99 = None
        if latencies_ns:
            ordered = sorted(latencies_ns)
            p50 = ordered[len(ordered) // 2] / 1000
            p99 = ordered[min(len(ordered) - 1, len(ordered) * 99 // 100)] / 1000
        return Figure(ops / self.wall, self.cpu * 1e6 / ops, p50, p99)


def timed(fn: Callable[[], object], ops: float) -> Figure:
    with Meter() as meter:
        fn()
    return meter.figure(ops)


@contextlib.contextmanager
def raw_socket(url: str, inbox: bytes = b"_INBOX.raw") -> Iterator[socket.socket]:
    """A bare socket, connected, subscribed to ``<inbox>.*`` (the replies of its requests), PONG read.

    Helpers that run beside a measured raw client (the churner, setup's API calls) name an inbox of their
    own: on a shared one, each would be sent the other's replies.
    """
    host, _, port = url.split("//", 1)[-1].rpartition(":")
    sock = socket.create_connection((host, int(port)))
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.recv(65536)  # INFO
        sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nSUB %s.* 1\r\nPING\r\n' % inbox)
        buf = b""
        while b"PONG\r\n" not in buf:
            buf += sock.recv(65536)
        yield sock
    finally:
        sock.close()


class Helper:
    """A helper process on the infrastructure core (a feeder, a churner): it prints a line once ready."""

    def __init__(self, module: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self._expect(b"ready")

    def _expect(self, word: bytes) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != word:
            raise RuntimeError(f"{self.proc.args[2]} said {line!r}, not {word!r} (exit {self.proc.poll()})")

    def tell(self, word: bytes = b"go") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(word + b"\n")
        self.proc.stdin.flush()

    def wait(self) -> None:
        self.proc.wait(60)


def pin_helper() -> None:
    """Called by a helper process itself: off the measured client's core (see benchmarks/__main__.py)."""
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {0})


class Churner(Helper):
    """Writes every key of a bucket anew when asked (``benchmarks.churn``), so no read sees a value twice."""

    def __init__(self, url: str, bucket: str, keys: int) -> None:
        super().__init__("benchmarks.churn", url, bucket, str(keys))
        self.keys = keys

    def churn(self) -> None:
        self.tell()
        self._expect(b"done")


def parts(n: int, churn: Churner | None) -> Iterator[tuple[bool, range]]:
    """The calls of a round-trip row, as (timed, indexes); with ``churn``, every value changes before a read.

    Then every key is read once untimed first, and each later pass over the keys follows a churn (untimed),
    so each timed read is of a key this process has read before whose value has changed since.
    """
    if churn is None:
        yield True, range(n)
        return
    size = min(n, churn.keys)
    yield False, range(size)
    for first in range(0, n, size):
        churn.churn()
        yield True, range(first, min(n, first + size))


def each(op: Callable[[int], object], n: int, churn: Churner | None = None) -> Figure:
    """``op(i)`` for i in range(n), one at a time, timed (see :func:`parts`)."""
    meter = Meter()
    for timing, indexes in parts(n, churn):
        with meter if timing else contextlib.nullcontext():
            for i in indexes:
                op(i)
    return meter.figure(n)


async def each_async(op: Callable[[int], Awaitable[object]], n: int, churn: Churner | None = None) -> Figure:
    """:func:`each` for a coroutine function (nats-py on its own loop, awaited in place)."""
    meter = Meter()
    for timing, indexes in parts(n, churn):
        with meter if timing else contextlib.nullcontext():
            for i in indexes:
                await op(i)
    return meter.figure(n)


class LoopThread:
    """nats-py as a sync program shares it: one asyncio loop in a background thread, one connection on it,
    every call from the program's threads through ``asyncio.run_coroutine_threadsafe(...).result()``."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def close_sync(ctx: Any) -> None:
    """Close a nats-py-sync context: it has no close(), so its nats-py connection, on its own loop."""
    ctx._loop.run_until_complete(ctx._nc.close())


def windowed(submit: Callable[[], Any], n: int, size: int) -> None:
    """``n`` calls of ``submit()``, each returning a future, at most ``size`` of them outstanding; all awaited."""
    window: deque[Any] = deque()
    for _ in range(n):
        if len(window) >= size:
            window.popleft().result(timeout=30)
        window.append(submit())
    for fut in window:
        fut.result(timeout=30)


# What a run's --json file records beside its figures (make bench and make bench-spark alike): when, on what
# machine, with which versions.  The docs show it with the tables and charts drawn from the file.


def now() -> str:
    """The date and time of a run, in UTC (ISO 8601, seconds)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
    }


def git_head(tree: Path | str) -> str:
    """The commit a tree is at, "+ changes" if its package (jsclient/, what is measured) differs from it; read only
    (no index refresh)."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        head = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=30, env=env, check=True).stdout.strip()
        changed = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--", "jsclient"],
                                 capture_output=True, text=True, timeout=30, env=env, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "not a git checkout"
    return f"{head} + changes" if changed else head


def versions(dists: tuple[str, ...], extra: dict[str, str] | None = None) -> dict[str, str]:
    """jsclient's version (and commit), each distribution's in ``dists``, nats-server's, as measured."""
    from importlib import metadata

    import jsclient
    from jsclient.server import binary_version, find_server_binary

    out = {"jsclient": f"{jsclient.__version__} ({git_head(ROOT)})"}
    for dist in dists:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    binary = find_server_binary()
    out["nats-server"] = f"{binary_version(binary)} ({binary})"
    return {**out, **(extra or {})}
