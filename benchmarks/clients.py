"""One measurement per process: ``python -m benchmarks.clients <client> <row> <url> <n>``.

Prints one JSON line, a :class:`benchmarks.common.Figure` (rate and CPU per
operation).  Each client is driven the way its own documentation
recommends, on its fastest path for the row (each function says which);
subscribe rows receive from the shared feeder process, request rows talk to
the shared responder process.  Clients: jsclient, nats-py (asyncio),
nats-py-sync (its blocking wrapper: each call runs nats-py's loop until it
is done), nats-py-thread (nats-py on a loop thread, see
:class:`benchmarks.common.LoopThread`), pynats2, natsio (asyncio, sans-IO
core; Python 3.13 and later only, so the runner starts its processes on a
3.13 interpreter, see :mod:`benchmarks.pythons`) and the raw socket.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from benchmarks.common import Figure, Helper, LoopThread, Meter, close_sync, each, each_async, timed, windowed

PAYLOAD = b"x" * 128
CONCURRENCY = 16
#: nats-py-thread's publishes in flight to its loop at most (a publish has no reply to wait for).
PUBLISH_WINDOW = 1024


class Feeder(Helper):
    """Starts the feeder process; ``tell()`` releases its burst."""

    def __init__(self, url: str, subject: str, n: int) -> None:
        if url.startswith("ws"):  # a WebSocket row: the feeder publishes over TCP all the same
            url = os.environ["BENCH_TCP_URL"]
        super().__init__("benchmarks.feeder", url, subject, str(n), str(len(PAYLOAD)))


def counting(n: int, meter: Meter, done: threading.Event | asyncio.Event) -> Callable[[Any], None]:
    """The callback row's callback (one thread at a time): starts ``meter`` at the first message, sets ``done``
    at the n-th."""
    count = [0]

    def cb(_msg: Any) -> None:
        count[0] += 1
        if count[0] == 1:
            meter.start()
        elif count[0] == n:
            done.set()

    return cb


def fed(url: str, subject: str, n: int, next_msg: Callable[[], object]) -> Figure:
    """The next_msg row of a blocking client: the feeder's burst, the first message untimed, n - 1 timed."""
    feeder = Feeder(url, subject, n)
    feeder.tell()
    next_msg()

    def rest() -> None:
        for _ in range(n - 1):
            next_msg()

    figure = timed(rest, n - 1)
    feeder.wait()
    return figure


# -- jsclient -----------------------------------------------------------------


def jsclient_row(row: str, url: str, n: int, **options: Any) -> Figure:
    """jsclient: publish then one flush; ``next_msg``; a callback; ``request``; 16 in flight as a window of
    ``request_async`` futures from one thread; 16 threads sharing the connection.  ``options`` go to
    ``connect`` (the distance rows' ``spin_wait=0``)."""
    import jsclient

    nc = jsclient.connect(url, **options)
    try:
        if row == "publish":

            def run() -> None:
                pub = nc.publish
                for _ in range(n):
                    pub("bench.pub", PAYLOAD)
                nc.flush(timeout=60)

            return timed(run, n)
        if row == "next_msg":
            sub = nc.subscribe("bench.sub", pending_msgs_limit=n + 1, pending_bytes_limit=1 << 40)
            nc.flush()
            return fed(url, "bench.sub", n, partial(sub.next_msg, timeout=30))
        if row == "callback":
            done = threading.Event()
            meter = Meter()
            cb = counting(n, meter, done)
            nc.subscribe("bench.cb", None, cb, pending_msgs_limit=n + 1, pending_bytes_limit=1 << 40)
            nc.flush()
            feeder = Feeder(url, "bench.cb", n)
            feeder.tell()
            done.wait(60)
            meter.stop()
            feeder.wait()
            return meter.figure(n - 1)
        if row == "request":
            return each(lambda _i: nc.request("bench.req", PAYLOAD, timeout=5), n)
        if row == "request_concurrent":
            # A window of CONCURRENCY futures from one thread (request_async).
            return timed(lambda: windowed(lambda: nc.request_async("bench.req", PAYLOAD, timeout=5), n, CONCURRENCY), n)
        if row == "request_threads":

            def worker() -> None:
                for _ in range(n // CONCURRENCY):
                    nc.request("bench.req", PAYLOAD, timeout=5)

            def run_threads() -> None:
                threads = [threading.Thread(target=worker) for _ in range(CONCURRENCY)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()

            return timed(run_threads, n // CONCURRENCY * CONCURRENCY)
    finally:
        nc.close()
    raise SystemExit(f"unknown row {row}")


# -- what the asyncio clients (nats-py, natsio) do alike ---------------------------------------------------------
async def fed_next_msgs(url: str, n: int, sub: Any) -> Figure:
    """The next_msg row once subscribed to bench.sub: ``n`` messages fed, timed from the second."""
    feeder = Feeder(url, "bench.sub", n)
    feeder.tell()
    await sub.next_msg(timeout=30)
    figure = await each_async(lambda _i: sub.next_msg(timeout=30), n - 1)
    feeder.wait()
    return figure


async def fed_callbacks(url: str, n: int, done: asyncio.Event, meter: Meter) -> Figure:
    """The callback row's end, once subscribed: ``n`` messages fed, timed from the first to ``done``."""
    feeder = Feeder(url, "bench.cb", n)
    feeder.tell()
    await asyncio.wait_for(done.wait(), 60)
    meter.stop()
    feeder.wait()
    return meter.figure(n - 1)


async def asyncio_requests(nc: Any, row: str, n: int) -> Figure | None:
    """The request rows (one in flight, or CONCURRENCY tasks each with one) of a client whose ``request`` is
    awaited alike; None for any other row."""
    if row == "request":
        return await each_async(lambda _i: nc.request("bench.req", PAYLOAD, timeout=5), n)
    if row != "request_concurrent":
        return None

    async def worker() -> None:
        for _ in range(n // CONCURRENCY):
            await nc.request("bench.req", PAYLOAD, timeout=5)

    with Meter() as meter:
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return meter.figure(n // CONCURRENCY * CONCURRENCY)


# -- nats-py (asyncio) --------------------------------------------------------


def natspy_row(row: str, url: str, n: int) -> Figure:
    """nats-py awaited in its own loop: publish then one flush; ``next_msg``; a callback; ``request``; 16 requests
    in flight as 16 tasks."""
    import nats

    async def main() -> Figure:
        nc = await nats.connect(url)
        try:
            if row == "publish":

                async def run() -> None:
                    for _ in range(n):
                        await nc.publish("bench.pub", PAYLOAD)
                    await nc.flush(timeout=60)

                with Meter() as meter:
                    await run()
                return meter.figure(n)
            if row == "next_msg":
                sub = await nc.subscribe("bench.sub", pending_msgs_limit=n + 1, pending_bytes_limit=1 << 40)
                await nc.flush()
                return await fed_next_msgs(url, n, sub)
            if row == "callback":
                done = asyncio.Event()
                meter = Meter()
                tick = counting(n, meter, done)

                async def cb(msg: Any) -> None:
                    tick(msg)

                await nc.subscribe("bench.cb", cb=cb, pending_msgs_limit=n + 1, pending_bytes_limit=1 << 40)
                await nc.flush()
                return await fed_callbacks(url, n, done, meter)
            figure = await asyncio_requests(nc, row, n)
            if figure is not None:
                return figure
        finally:
            await nc.close()
        raise SystemExit(f"unknown row {row}")

    return asyncio.run(main())


# -- nats-py-sync (a blocking wrapper that runs nats-py's loop inside each call) -------------------------


def natspysync_row(row: str, url: str, n: int) -> Figure:
    """nats-py-sync's whole API for these rows: ``publish``, ``subscribe().recv()``, ``request``.

    It has no flush: a request round trip on the same connection (ordered after every earlier frame) shows
    that what came before it has reached the server, both after the publishes and before the feeder starts.
    It has no callback API and no way to keep requests in flight, so it is in neither row.
    """
    import nats_sync

    ctx = nats_sync.connect(url)
    try:
        if row == "publish":

            def run() -> None:
                pub = ctx.publish
                for _ in range(n):
                    pub("bench.pub", PAYLOAD)
                ctx.request("bench.req", b"", timeout=60)

            return timed(run, n)
        if row == "next_msg":
            sub = ctx.subscribe("bench.sub")
            ctx.request("bench.req", b"", timeout=5)
            return fed(url, "bench.sub", n, partial(sub.recv, timeout=30))
        if row == "request":
            return each(lambda _i: ctx.request("bench.req", PAYLOAD, timeout=5), n)
    finally:
        close_sync(ctx)
    raise SystemExit(f"unsupported row {row} for nats-py-sync")


# -- nats-py on a loop thread (run_coroutine_threadsafe) -----------------------------------------------


def natspythread_row(row: str, url: str, n: int) -> Figure:
    """nats-py on a loop thread, called from this thread: each call ``run_coroutine_threadsafe(...).result()``.

    Publishes are handed over without waiting for each (a publish has no reply; at most PUBLISH_WINDOW
    outstanding), then one flush; 16 requests in flight are a window of 16 such futures, as jsclient's
    ``request_async`` window.
    """
    import nats

    lt = LoopThread()
    nc = lt.call(nats.connect(url))
    try:
        if row == "publish":

            def run() -> None:
                windowed(lambda: asyncio.run_coroutine_threadsafe(nc.publish("bench.pub", PAYLOAD), lt.loop), n,
                         PUBLISH_WINDOW)
                lt.call(nc.flush(timeout=60))

            return timed(run, n)
        if row == "next_msg":
            sub = lt.call(nc.subscribe("bench.sub", pending_msgs_limit=n + 1, pending_bytes_limit=1 << 40))
            lt.call(nc.flush())
            return fed(url, "bench.sub", n, lambda: lt.call(sub.next_msg(timeout=30)))
        if row == "request":
            return each(lambda _i: lt.call(nc.request("bench.req", PAYLOAD, timeout=5)), n)
        if row == "request_concurrent":

            def submit() -> Any:
                return asyncio.run_coroutine_threadsafe(nc.request("bench.req", PAYLOAD, timeout=5), lt.loop)

            return timed(lambda: windowed(submit, n, CONCURRENCY), n)
    finally:
        lt.call(nc.close())
        lt.close()
    raise SystemExit(f"unsupported row {row} for nats-py-thread")


# -- pynats2 (threads) ---------------------------------------------------------


def pynats2_row(row: str, url: str, n: int) -> Figure:
    """pynats2: ``publish`` then a ping; callbacks only (it has no next_msg); ``request``."""
    from pynats2 import NATSClient

    nc = NATSClient(url, socket_timeout=30)
    nc.connect()
    try:
        if row == "publish":

            def run() -> None:
                for _ in range(n):
                    nc.publish("bench.pub", payload=PAYLOAD)
                nc.ping()

            return timed(run, n)
        if row in ("callback", "next_msg"):
            # pynats2 has no next_msg: it delivers through callbacks only.
            done = threading.Event()
            lock = threading.Lock()
            count = [0]
            meter = Meter()

            def cb(_msg: Any) -> None:
                with lock:
                    count[0] += 1
                    if count[0] == 1:
                        meter.start()
                    elif count[0] == n:
                        done.set()

            nc.subscribe("bench.cb", callback=cb)
            nc.ping()
            feeder = Feeder(url, "bench.cb", n)
            feeder.tell()
            done.wait(120)
            meter.stop()
            feeder.wait()
            return meter.figure(n - 1)
        if row == "request":
            return each(lambda _i: nc.request("bench.req", payload=PAYLOAD, timeout=5), n)
    finally:
        nc.close()
    raise SystemExit(f"unsupported row {row} for pynats2")


# -- natsio (asyncio, Python 3.13+) ---------------------------------------------


def natsio_row(row: str, url: str, n: int) -> Figure:
    """natsio awaited in its own loop, as nats-py: publish then one flush; ``next_msg``; a callback (a plain
    function, which natsio calls without a task); ``request``; 16 requests in flight as 16 tasks.  A ws:// URL
    is its WebSocket transport."""
    import natsio

    async def main() -> Figure:
        nc = await natsio.connect(url)
        try:
            if row == "publish":
                with Meter() as meter:
                    for _ in range(n):
                        await nc.publish("bench.pub", PAYLOAD)
                    await nc.flush(timeout=60)
                return meter.figure(n)
            if row == "next_msg":
                sub = nc.subscribe("bench.sub", pending_msgs_limit=n + 1, pending_bytes_limit=1 << 40)
                await nc.flush()
                return await fed_next_msgs(url, n, sub)
            if row == "callback":
                done = asyncio.Event()
                meter = Meter()
                cb = counting(n, meter, done)
                nc.subscribe("bench.cb", cb=cb, pending_msgs_limit=n + 1, pending_bytes_limit=1 << 40)
                await nc.flush()
                return await fed_callbacks(url, n, done, meter)
            figure = await asyncio_requests(nc, row, n)
            if figure is not None:
                return figure
        finally:
            await nc.close()
        raise SystemExit(f"unsupported row {row} for natsio")

    return asyncio.run(main())


# -- raw socket bound ----------------------------------------------------------


def _raw_connect(url: str) -> socket.socket:
    host, _, port = url.split("//", 1)[-1].rpartition(":")
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.recv(65536)
    sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n')
    return sock


#: The raw rows poll this long before a blocking recv, as jsclient's request()
#: does by default (``spin_wait``), so the raw bound stays a bound.
RAW_SPIN = 0.0002


def raw_recv(sock: socket.socket, size: int = 65536) -> bytes:
    """The next bytes from ``sock``, polling for RAW_SPIN before blocking."""
    end = time.perf_counter() + RAW_SPIN
    while time.perf_counter() < end:
        try:
            return sock.recv(size, socket.MSG_DONTWAIT)
        except BlockingIOError:
            pass
    return sock.recv(size)


def _raw_wait_pong(sock: socket.socket) -> None:
    buf = b""
    while not buf.endswith(b"PONG\r\n"):
        buf = (buf + sock.recv(65536))[-16:]


def raw_row(row: str, url: str, n: int) -> Figure:
    """What a socket can do with pre-encoded frames and no parsing: the ceiling."""
    sock = _raw_connect(url)
    try:
        if row == "publish":
            frame = b"PUB bench.pub %d\r\n%s\r\n" % (len(PAYLOAD), PAYLOAD)
            per = 65536 // len(frame)
            chunk = frame * per

            def run() -> None:
                for _ in range(n // per):
                    sock.sendall(chunk)
                sock.sendall(frame * (n % per) + b"PING\r\n")
                _raw_wait_pong(sock)

            return timed(run, n)
        if row in ("next_msg", "callback"):
            subject = b"bench.sub" if row == "next_msg" else b"bench.cb"
            sock.sendall(b"SUB %s 1\r\nPING\r\n" % subject)
            _raw_wait_pong(sock)
            expected = n * len(b"MSG %s 1 %d\r\n%s\r\n" % (subject, len(PAYLOAD), PAYLOAD))
            feeder = Feeder(url, subject.decode(), n)
            feeder.tell()
            got = [len(sock.recv(262144))]

            def drain() -> None:
                while got[0] < expected:
                    got[0] += len(sock.recv(262144))

            figure = timed(drain, n)
            feeder.wait()
            return figure
        if row == "request":
            sock.sendall(b"SUB _INBOX.raw.* 1\r\nPING\r\n")
            _raw_wait_pong(sock)
            tail = PAYLOAD + b"\r\n"

            def one(i: int) -> None:
                sock.sendall(b"PUB bench.req _INBOX.raw.%d %d\r\n%s\r\n" % (i, len(PAYLOAD), PAYLOAD))
                buf = b""
                while not buf.endswith(tail):
                    buf += raw_recv(sock)

            return each(one, n)
        if row == "request_concurrent":
            sock.sendall(b"SUB _INBOX.raw.* 1\r\nPING\r\n")
            _raw_wait_pong(sock)
            reply = len(b"MSG _INBOX.raw.0 1 %d\r\n%s\r\n" % (len(PAYLOAD), PAYLOAD))

            def run() -> None:
                # Keep CONCURRENCY requests in flight, pipelined on one socket.
                frame = b"PUB bench.req _INBOX.raw.0 %d\r\n%s\r\n" % (len(PAYLOAD), PAYLOAD)
                sock.sendall(frame * CONCURRENCY)
                sent, got = CONCURRENCY, 0
                while got < n * reply:
                    before = got // reply
                    got += len(sock.recv(262144))
                    more = min(got // reply - before, n - sent)
                    if more > 0:
                        sock.sendall(frame * more)
                        sent += more

            return timed(run, n)
    finally:
        sock.close()
    raise SystemExit(f"unknown row {row}")


CLIENTS: dict[str, Callable[[str, str, int], Figure]] = {
    "jsclient": jsclient_row,
    "nats-py": natspy_row,
    "nats-py-sync": natspysync_row,
    "nats-py-thread": natspythread_row,
    "pynats2": pynats2_row,
    "natsio": natsio_row,
    "raw": raw_row,
}


def run_main(clients: dict[str, Callable[[str, str, int], Figure]]) -> None:
    """A measurement module's entry point: ``<client> <row> <url> <n>`` -> one JSON line."""
    client, row, url, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    print(clients[client](row, url, count).line())


if __name__ == "__main__":
    sys.argv[2] = sys.argv[2].removeprefix("ws_")  # the same work; the URL given is the ws:// one
    run_main(CLIENTS)
