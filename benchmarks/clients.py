"""One measurement per process: ``python -m benchmarks.clients <client> <row> <url> <n>``.

Prints one JSON line ``{"rate": ops_per_second}``.  Each client is driven the
way its own documentation recommends; subscribe rows receive from the shared
feeder process, request rows talk to the shared responder process.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

PAYLOAD = b"x" * 128
CONCURRENCY = 16


class Feeder:
    """Starts the feeder process; ``go()`` releases its burst."""

    def __init__(self, url: str, subject: str, n: int) -> None:
        if url.startswith("ws"):  # a WebSocket row: the feeder publishes over TCP all the same
            url = os.environ["BENCH_TCP_URL"]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.feeder", url, subject, str(n), str(len(PAYLOAD))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        self.proc.stdout.readline()

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def wait(self) -> None:
        self.proc.wait(60)


def timed(fn: Callable[[], Any], n: int) -> float:
    start = time.perf_counter()
    fn()
    return n / (time.perf_counter() - start)


# -- jsclient -----------------------------------------------------------------


def jsclient_row(row: str, url: str, n: int) -> float:
    import jsclient

    nc = jsclient.connect(url)
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
            feeder = Feeder(url, "bench.sub", n)
            feeder.go()
            sub.next_msg(timeout=30)
            start = time.perf_counter()
            for _ in range(n - 1):
                sub.next_msg(timeout=30)
            rate = (n - 1) / (time.perf_counter() - start)
            feeder.wait()
            return rate
        if row == "callback":
            done = threading.Event()
            count = [0]
            first = [0.0]

            def cb(_msg: Any) -> None:
                count[0] += 1
                if count[0] == 1:
                    first[0] = time.perf_counter()
                elif count[0] == n:
                    done.set()

            nc.subscribe("bench.cb", cb=cb, pending_msgs_limit=n + 1, pending_bytes_limit=1 << 40)
            nc.flush()
            feeder = Feeder(url, "bench.cb", n)
            feeder.go()
            done.wait(60)
            rate = (n - 1) / (time.perf_counter() - first[0])
            feeder.wait()
            return rate
        if row == "request":

            def run() -> None:
                for _ in range(n):
                    nc.request("bench.req", PAYLOAD, timeout=5)

            return timed(run, n)
        if row == "request_concurrent":
            # A window of CONCURRENCY futures from one thread (request_async).
            def run() -> None:
                window: deque[Any] = deque()
                for _ in range(n):
                    if len(window) >= CONCURRENCY:
                        window.popleft().result(timeout=5)
                    window.append(nc.request_async("bench.req", PAYLOAD, timeout=5))
                for fut in window:
                    fut.result(timeout=5)

            return timed(run, n)
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


# -- nats-py (asyncio) --------------------------------------------------------


def natspy_row(row: str, url: str, n: int) -> float:
    import nats

    async def main() -> float:
        nc = await nats.connect(url)
        try:
            if row == "publish":
                start = time.perf_counter()
                for _ in range(n):
                    await nc.publish("bench.pub", PAYLOAD)
                await nc.flush(timeout=60)
                return n / (time.perf_counter() - start)
            if row == "next_msg":
                sub = await nc.subscribe("bench.sub", pending_msgs_limit=n + 1, pending_bytes_limit=1 << 40)
                await nc.flush()
                feeder = Feeder(url, "bench.sub", n)
                feeder.go()
                await sub.next_msg(timeout=30)
                start = time.perf_counter()
                for _ in range(n - 1):
                    await sub.next_msg(timeout=30)
                rate = (n - 1) / (time.perf_counter() - start)
                feeder.wait()
                return rate
            if row == "callback":
                done = asyncio.Event()
                count = [0]
                first = [0.0]

                async def cb(_msg: Any) -> None:
                    count[0] += 1
                    if count[0] == 1:
                        first[0] = time.perf_counter()
                    elif count[0] == n:
                        done.set()

                await nc.subscribe("bench.cb", cb=cb, pending_msgs_limit=n + 1, pending_bytes_limit=1 << 40)
                await nc.flush()
                feeder = Feeder(url, "bench.cb", n)
                feeder.go()
                await asyncio.wait_for(done.wait(), 60)
                rate = (n - 1) / (time.perf_counter() - first[0])
                feeder.wait()
                return rate
            if row == "request":
                start = time.perf_counter()
                for _ in range(n):
                    await nc.request("bench.req", PAYLOAD, timeout=5)
                return n / (time.perf_counter() - start)
            if row == "request_concurrent":

                async def worker() -> None:
                    for _ in range(n // CONCURRENCY):
                        await nc.request("bench.req", PAYLOAD, timeout=5)

                start = time.perf_counter()
                await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
                return n // CONCURRENCY * CONCURRENCY / (time.perf_counter() - start)
        finally:
            await nc.close()
        raise SystemExit(f"unknown row {row}")

    return asyncio.run(main())


# -- pynats2 (threads) ---------------------------------------------------------


def pynats2_row(row: str, url: str, n: int) -> float:
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
            first = [0.0]

            def cb(_msg: Any) -> None:
                with lock:
                    count[0] += 1
                    if count[0] == 1:
                        first[0] = time.perf_counter()
                    elif count[0] == n:
                        done.set()

            nc.subscribe("bench.cb", callback=cb)
            nc.ping()
            feeder = Feeder(url, "bench.cb", n)
            feeder.go()
            done.wait(120)
            rate = (n - 1) / (time.perf_counter() - first[0])
            feeder.wait()
            return rate
        if row == "request":
            return timed(lambda: [nc.request("bench.req", payload=PAYLOAD, timeout=5) for _ in range(n)], n)
    finally:
        nc.close()
    raise SystemExit(f"unsupported row {row} for pynats2")


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


def raw_row(row: str, url: str, n: int) -> float:
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
            feeder.go()
            got = len(sock.recv(262144))
            start = time.perf_counter()
            while got < expected:
                got += len(sock.recv(262144))
            rate = n / (time.perf_counter() - start)
            feeder.wait()
            return rate
        if row == "request":
            sock.sendall(b"SUB _INBOX.raw.* 1\r\nPING\r\n")
            _raw_wait_pong(sock)
            tail = PAYLOAD + b"\r\n"

            def run() -> None:
                for i in range(n):
                    sock.sendall(b"PUB bench.req _INBOX.raw.%d %d\r\n%s\r\n" % (i, len(PAYLOAD), PAYLOAD))
                    buf = b""
                    while not buf.endswith(tail):
                        buf += raw_recv(sock)

            return timed(run, n)
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


CLIENTS = {"jsclient": jsclient_row, "nats-py": natspy_row, "pynats2": pynats2_row, "raw": raw_row}


if __name__ == "__main__":
    client, row, url, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    row = row.removeprefix("ws_")  # the same work; the URL given is the ws:// one
    print(json.dumps({"rate": CLIENTS[client](row, url, count)}))
