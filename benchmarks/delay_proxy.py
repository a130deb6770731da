"""A loopback TCP proxy that holds every chunk for a fixed time each way: a server that is not on loopback.

``python -m benchmarks.delay_proxy HOST:PORT DELAY`` listens on 127.0.0.1 at
a port the kernel picks, prints ``ready PORT``, and forwards each connection
to HOST:PORT until it is killed.  Each chunk read from one side is written
to the other DELAY seconds after it was read, in the order read, so a stream
of chunks is delayed, not serialised: a long link, with loopback's
bandwidth.  One thread and ``select``, whose timeout has microsecond
resolution (epoll's and poll's are whole milliseconds), with the timer slack
cut to a nanosecond where Linux allows and each wake-up aimed early by how
late they have been coming (:func:`serve`), so that a chunk leaves when it
is due.  It runs in a process of its own on the infrastructure core
(:func:`benchmarks.common.pin_helper`), so its CPU is never the measured
client's.
"""

from __future__ import annotations

import contextlib
import ctypes
import select
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Iterator

from benchmarks.common import ROOT, pin_helper

#: The most bytes read at once.
CHUNK = 256 * 1024
#: A side is not read while this many of its bytes wait to be written to the other, as a link's buffers fill.
BACKLOG = 8 << 20
#: The most a wake-up counts as late: a stall of the whole machine says nothing of select's timers.
MAX_LATE = 0.0001
PR_SET_TIMERSLACK = 29


class Pipe:
    """One direction of one connection: the chunks read from ``src``, each with the time it is due at ``dst``."""

    __slots__ = ("dst", "eof", "held", "out", "queue", "src")

    def __init__(self, src: socket.socket, dst: socket.socket) -> None:
        self.src, self.dst = src, dst
        self.queue: deque[tuple[float, bytes]] = deque()
        self.out = b""  # due, not yet taken by ``dst``
        self.held = 0  # bytes in ``queue`` and ``out``
        self.eof = False

    def read(self, delay: float) -> None:
        data = self.src.recv(CHUNK)
        if not data:
            self.eof = True
            return
        self.queue.append((time.monotonic() + delay, data))
        self.held += len(data)

    def write(self, now: float) -> bool:
        """Send what is due, as much as ``dst`` takes now; True once ``src`` ended and everything is sent."""
        queue = self.queue
        if queue and queue[0][0] <= now:
            parts = [self.out]
            while queue and queue[0][0] <= now:
                parts.append(queue.popleft()[1])
            self.out = b"".join(parts)
        if self.out:
            with contextlib.suppress(BlockingIOError):
                sent = self.dst.send(self.out)
                self.out = self.out[sent:]
                self.held -= sent
        return self.eof and not self.held


class Connection:
    """A client's connection and its own upstream one: a pipe each way."""

    def __init__(self, client: socket.socket, upstream: tuple[str, int]) -> None:
        server = socket.create_connection(upstream)
        for sock in (client, server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
        self.pipes = (Pipe(client, server), Pipe(server, client))
        self.ended = [False, False]

    def write(self, now: float) -> bool:
        """Send what is due both ways, passing on an end once what came before it is sent; False once closed."""
        for k, pipe in enumerate(self.pipes):
            if pipe.write(now) and not self.ended[k]:
                self.ended[k] = True
                pipe.dst.shutdown(socket.SHUT_WR)
        return not all(self.ended)

    def close(self) -> None:
        for pipe in self.pipes:
            pipe.src.close()


def serve(listener: socket.socket, upstream: tuple[str, int], delay: float) -> None:
    """Accept and forward until killed; a connection that fails either way is closed both ways.

    ``select`` wakes later than asked (tens of microseconds on a virtual
    machine whose core was idle), so chunks are sent that much before they
    are due, the lateness learnt from the wake-ups themselves: on average a
    chunk leaves when due, and the proxy never spins.
    """
    conns: list[Connection] = []
    late = 0.0  # how late select's timeouts wake, smoothed
    while True:
        now = time.monotonic()
        live = []
        for conn in conns:
            try:
                alive = conn.write(now + late)
            except OSError:
                alive = False
            if alive:
                live.append(conn)
            else:
                conn.close()
        conns = live
        pipes = {pipe.src: (conn, pipe) for conn in conns for pipe in conn.pipes}
        readers = [listener, *(p.src for _, p in pipes.values() if not p.eof and p.held < BACKLOG)]
        writers = [p.dst for _, p in pipes.values() if p.out]
        due = [p.queue[0][0] for _, p in pipes.values() if p.queue]
        timeout = max(0.0, min(due) - late - time.monotonic()) if due else None
        wanted = time.monotonic() + (timeout or 0.0)
        readable, writable, _ = select.select(readers, writers, [], timeout)
        if timeout and not readable and not writable:
            late += (min(time.monotonic() - wanted, MAX_LATE) - late) / 8
        for sock in readable:
            if sock is listener:
                client, _ = listener.accept()
                conns.append(Connection(client, upstream))
                continue
            conn, pipe = pipes[sock]
            if conn not in conns:
                continue  # closed just now, through its other side
            try:
                pipe.read(delay)
            except OSError:
                conn.close()
                conns.remove(conn)


@contextlib.contextmanager
def delay_proxy(url: str, delay: float) -> Iterator[str]:
    """The proxy in front of the server at ``url``, in a process of its own until the block ends: its URL."""
    hostport = url.split("//", 1)[-1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.delay_proxy", hostport, repr(delay)], cwd=ROOT, stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        said = proc.stdout.readline().split()
        if said[:1] != [b"ready"]:
            raise RuntimeError(f"the delay proxy said {said!r} (exit {proc.poll()})")
        yield f"nats://127.0.0.1:{int(said[1])}"
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    host, _, port = sys.argv[1].rpartition(":")
    delay = float(sys.argv[2])
    pin_helper()
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the default slack (tens of microseconds)
        ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(f"ready {listener.getsockname()[1]}", flush=True)
    serve(listener, (host, int(port)), delay)


if __name__ == "__main__":
    main()
