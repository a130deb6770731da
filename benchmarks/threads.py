"""Calls from many threads of one process (the WSGI and executor case), one measurement per process:
``python -m benchmarks.threads <client> threads_<request|kv_get>_<threads> <url> <n>``.

Every thread makes ``n // threads`` calls (at least 2), all released together;
the figure is the rate of all of them, the process's CPU per call and the
latency of one call (p50, p99 over every call of every thread).  Each client
as a threaded program would use it: jsclient, one connection shared by every
thread (as documented); nats-py-thread, one nats-py connection on one loop
thread, each call through ``run_coroutine_threadsafe``; nats-py-sync, a
context (its own event loop and connection) per thread, since its loop runs
only inside its calls and so cannot be shared; pynats2, a connection per
thread (its socket is not shared).  ``kv.get`` reads the unchanged bucket
``bench`` (the ``kv_get`` row's).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from benchmarks.clients import PAYLOAD, run_main
from benchmarks.common import Figure, LoopThread, Meter, close_sync
from benchmarks.js_clients import KEYS, keys

#: A thread's call, given its index; and what closes what the thread opened (or None).
Call = Callable[[int], object]
Opened = tuple[Call, Callable[[], object] | None]


def run_threads(open_call: Callable[[], Opened], threads: int, per_thread: int) -> Figure:
    """Each thread opens its call (untimed), waits for the others, then calls ``per_thread`` times.

    A thread that fails breaks the barrier and its error is raised here: a run with a thread missing
    would report a figure for less work than it did.
    """
    barrier = threading.Barrier(threads + 1)
    latencies: list[list[int]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        closer = None
        try:
            call, closer = open_call()
            out, clock = latencies[k], time.perf_counter_ns
            barrier.wait()
            for i in range(per_thread):
                start = clock()
                call(i * threads + k)  # the threads together walk the keys in order
                out.append(clock() - start)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
            barrier.abort()
        finally:
            if closer is not None:
                closer()

    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for worker in workers:
        worker.start()
    meter = Meter()
    meter.start()
    with contextlib.suppress(threading.BrokenBarrierError):  # a thread failed: its error is raised below
        barrier.wait()
    for worker in workers:
        worker.join()
    meter.stop()
    if errors:
        raise errors[0]
    return meter.figure(threads * per_thread, [t for thread in latencies for t in thread])


def parse(row: str) -> tuple[str, int]:
    """``threads_kv_get_8`` -> ("kv_get", 8)."""
    what, _, threads = row.removeprefix("threads_").rpartition("_")
    return what, int(threads)


def jsclient_row(row: str, url: str, n: int) -> Figure:
    import jsclient

    what, threads = parse(row)
    nc = jsclient.connect(url)
    try:
        names = keys()
        kv = nc.jetstream().key_value("bench")
        call: Call = (
            (lambda _i: nc.request("bench.req", PAYLOAD, timeout=5)) if what == "request"
            else (lambda i: kv.get(names[i % KEYS]))
        )
        return run_threads(lambda: (call, None), threads, max(2, n // threads))
    finally:
        nc.close()


def natspythread_row(row: str, url: str, n: int) -> Figure:
    import nats

    what, threads = parse(row)
    lt = LoopThread()
    nc = lt.call(nats.connect(url))
    try:
        names = keys()
        kv = lt.call(nc.jetstream().key_value("bench"))
        call: Call = (
            (lambda _i: lt.call(nc.request("bench.req", PAYLOAD, timeout=5))) if what == "request"
            else (lambda i: lt.call(kv.get(names[i % KEYS])))
        )
        return run_threads(lambda: (call, None), threads, max(2, n // threads))
    finally:
        lt.call(nc.close())
        lt.close()


def natspysync_row(row: str, url: str, n: int) -> Figure:
    import nats_sync

    what, threads = parse(row)
    names = keys()

    def open_call() -> Opened:
        ctx = nats_sync.connect(url)
        if what == "request":
            return (lambda _i: ctx.request("bench.req", PAYLOAD, timeout=5)), lambda: close_sync(ctx)
        kv = ctx.jetstream().key_value("bench")
        assert kv is not None
        return (lambda i: kv.get(names[i % KEYS])), lambda: close_sync(ctx)

    return run_threads(open_call, threads, max(2, n // threads))


def pynats2_row(row: str, url: str, n: int) -> Figure:
    from pynats2 import NATSClient

    what, threads = parse(row)
    if what != "request":
        raise SystemExit("pynats2 has no JetStream")

    def open_call() -> Opened:
        nc = NATSClient(url, socket_timeout=30)
        nc.connect()
        return (lambda _i: nc.request("bench.req", payload=PAYLOAD, timeout=5)), nc.close

    return run_threads(open_call, threads, max(2, n // threads))


CLIENTS: dict[str, Callable[[str, str, int], Figure]] = {
    "jsclient": jsclient_row,
    "nats-py-thread": natspythread_row,
    "nats-py-sync": natspysync_row,
    "pynats2": pynats2_row,
}

if __name__ == "__main__":
    run_main(CLIENTS)
