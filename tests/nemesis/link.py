"""Link: a controllable TCP link on loopback, between a client and a server or between two cluster routes.

Byte streams pass unchanged (no framing: route protocol, client protocol and
TLS alike), and the nemesis changes how, at any moment:

* ``heal()`` (pass): bytes go through as they come; delayed bytes still queued go at once.
* ``delay(seconds)``: every chunk leaves that long after it arrived (pipelined: latency, not throughput).
* ``blackhole()``: nothing is read or written either way and no socket is closed, like a partition
  that drops packets: both ends keep a half-open connection, and what they send waits in the
  kernel's buffers (as TCP retransmits would) until the link heals or an end gives up.  New
  connections are accepted and held, not connected upstream, until then.
* ``reset()``: every current connection is closed with RST on both sides (SO_LINGER 0), as when
  a middlebox drops its state; the mode is unchanged and new connections come through.
* ``one_way(UP)`` (or ``DOWN``): bytes pass from the dialling side to upstream only (or back only);
  the other way they wait as in a black hole, until ``heal()``.  An asymmetric partition.
* ``withhold(way, prefix)``, on a link made with ``routes=True``: the route protocol's frames whose
  first word (the account, or on an account's own route the subject) starts with ``prefix`` wait,
  going ``way``, while every other frame passes; ``heal()`` sends them on, in order.  ``$NRG.``
  picks Raft's votes and appends (the system account has a route of its own, so its frames name the
  subject first).  What no real network does on demand: it opens the window in
  which a healed server has heard the new leader's interest but not its term.

One thread runs a selector loop for all of a link's connections (no thread
per connection), at most ``max_connections`` of them (more get RST at once),
each direction queueing at most ``buffer_limit`` bytes before it stops
reading.  Control calls come from other threads: each is run by the loop and
returns once applied, so after ``blackhole()`` returns no further byte moves.
"""

from __future__ import annotations

import collections
import contextlib
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable

from ..proxy import listen_loopback

PASS, DELAY, BLACKHOLE = "pass", "delay", "blackhole"
#: The two ways of a connection: from the side that dialled the link to upstream, and back.
UP, DOWN = "up", "down"


def abort(sock: socket.socket) -> None:
    """Close with RST rather than FIN (SO_LINGER on, zero seconds)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class _Half:
    """One direction of a connection: bytes read from ``src`` wait in ``queue`` (with the time they may leave)."""

    __slots__ = ("blocked", "cutter", "dst", "eof", "queue", "queued", "shut", "src", "way", "withheld")

    def __init__(self, src: socket.socket, dst: socket.socket | None, way: str, *, routes: bool = False) -> None:
        self.way = way  # UP or DOWN
        self.cutter = RouteFrames() if routes else None
        self.withheld: list[bytes] = []  # frames a withhold() keeps back, in order
        self.src = src
        self.dst = dst
        self.queue: collections.deque[tuple[float, bytes]] = collections.deque()
        self.queued = 0
        self.eof = False  # src said it sends no more
        self.shut = False  # that end-of-stream was passed on to dst
        self.blocked = False  # dst took only part of what was due: wait until it is writable


class RouteFrames:
    """Cuts a route connection's byte stream into whole frames, each with its first word after the
    operation (an account, or a subject on an account's own route; None for PING, INFO and the like)."""

    _ACCOUNT_OPS = (b"RS+", b"RS-", b"LS+", b"LS-", b"A+", b"A-")

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[bytes | None, bytes]]:
        self._buf += data
        out: list[tuple[bytes | None, bytes]] = []
        while (end := self._buf.find(b"\r\n")) >= 0:
            words = bytes(self._buf[:end]).split()
            op = words[0].upper() if words else b""
            stop = end + 2
            if op in (b"RMSG", b"HMSG"):
                stop += int(words[-1]) + 2
                if len(self._buf) < stop:
                    break
            account = words[1] if len(words) > 1 and (op in (b"RMSG", b"HMSG") or op in self._ACCOUNT_OPS) else None
            out.append((account, bytes(self._buf[:stop])))
            del self._buf[:stop]
        return out


class _Pair:
    """An accepted client socket and its upstream socket (None while held by a black hole)."""

    __slots__ = ("client", "down", "dropped", "routes", "server", "up")

    def __init__(self, client: socket.socket, *, routes: bool) -> None:
        self.client = client
        self.dropped = False
        self.routes = routes
        self.server: socket.socket | None = None
        self.up = _Half(client, None, UP, routes=routes)
        self.down: _Half | None = None

    def connect(self, server: socket.socket) -> None:
        self.server = server
        self.up.dst = server
        self.down = _Half(server, self.client, DOWN, routes=self.routes)

    def halves(self) -> list[_Half]:
        return [self.up] if self.down is None else [self.up, self.down]


class Link:
    """Listens on 127.0.0.1 and forwards each accepted connection to ``upstream``, as the mode says."""

    def __init__(
        self,
        upstream: tuple[str, int],
        *,
        name: str = "link",
        max_connections: int = 64,
        buffer_limit: int = 1 << 20,
        routes: bool = False,
    ) -> None:
        self.upstream = upstream
        self.routes = routes  # cut what passes into route frames, so that withhold() can pick some
        self.name = name
        self.max_connections = max_connections
        self.buffer_limit = buffer_limit
        self.mode = PASS
        self.latency = 0.0
        self.held: frozenset[str] = frozenset()  # ways whose bytes wait (one_way)
        self.withholding: tuple[str, bytes] | None = None  # (way, prefix) of the route frames that wait
        #: Counters the link's own tests read: connections accepted, refused (over the cap or no
        #: upstream), reset by reset(), bytes forwarded each way.
        self.stats = collections.Counter[str]()
        self._listener = listen_loopback(backlog=64)
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._interest: dict[socket.socket, int] = {}
        self._owner: dict[socket.socket, _Pair] = {}
        self._pairs: list[_Pair] = []
        self._commands: collections.deque[tuple[Callable[[], None], threading.Event]] = collections.deque()
        self._lock = threading.Lock()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"nemesis-{name}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def route_url(self) -> str:
        return f"nats-route://127.0.0.1:{self.port}"

    @property
    def connections(self) -> int:
        return len(self._pairs)

    def __repr__(self) -> str:
        return f"<Link {self.name} :{self.port}->{self.upstream[1]} {self.mode}>"

    # -- control (any thread) ---------------------------------------------------------
    def heal(self) -> None:
        """Pass bytes through again, queued delayed ones at once; held connections go upstream."""
        self._call(lambda: self._set_mode(PASS, 0.0))

    def delay(self, seconds: float) -> None:
        """Every chunk from now on leaves ``seconds`` after it arrived."""
        self._call(lambda: self._set_mode(DELAY, seconds))

    def blackhole(self) -> None:
        """Stop moving bytes both ways, closing nothing (half-open connections)."""
        self._call(lambda: self._set_mode(BLACKHOLE, self.latency))

    def one_way(self, way: str) -> None:
        """Pass bytes only ``way`` (UP: from the dialling side; DOWN: back to it); the rest wait until heal()."""
        assert way in (UP, DOWN), way
        held = frozenset({DOWN if way == UP else UP})
        self._call(lambda: self._set_mode(PASS, 0.0, held))

    def withhold(self, way: str, prefix: str) -> None:
        """Route frames going ``way`` whose first word starts with ``prefix`` wait until heal(); all else passes."""
        assert self.routes and way in (UP, DOWN), (self.routes, way)
        self._call(lambda: self._withhold(way, prefix.encode()))

    def reset(self) -> None:
        """RST both sides of every current connection."""
        self._call(self._reset_all)

    def close(self) -> None:
        """Stop the loop and close every socket (politely: FIN, not RST)."""
        if self._thread.is_alive():
            with contextlib.suppress(TimeoutError):
                self._call(self._stop, timeout=5.0)
            self._thread.join(5.0)
        for pair in list(self._pairs):
            self._drop(pair, rst=False)
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()
        self._selector.close()

    def __enter__(self) -> Link:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, fn: Callable[[], None], timeout: float = 10.0) -> None:
        done = threading.Event()
        with self._lock:
            if self._stopping:
                return
            self._commands.append((fn, done))
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if not done.wait(timeout):
            raise TimeoutError(f"{self!r}: the loop did not apply a command within {timeout} s")

    # -- the loop's own ---------------------------------------------------------------
    def _withhold(self, way: str, prefix: bytes) -> None:
        self._set_mode(PASS, 0.0)
        self.withholding = (way, prefix)

    def _set_mode(self, mode: str, latency: float, held: frozenset[str] = frozenset()) -> None:
        self.mode, self.latency, self.held = mode, latency, held
        self.withholding = None
        for pair in self._pairs:  # what was withheld goes now, after what is queued
            for half in pair.halves():
                for frame in half.withheld:
                    half.queue.append((0.0, frame))
                    half.queued += len(frame)
                half.withheld.clear()
        if mode == PASS:  # what waits for its time goes now, in order
            for pair in self._pairs:
                for half in pair.halves():
                    half.queue = collections.deque((0.0, data) for _, data in half.queue)
        if mode != BLACKHOLE:
            for pair in [p for p in self._pairs if p.server is None]:
                self._connect(pair)
        for pair in list(self._pairs):  # a black hole reads and writes nothing: no interest at all
            self._update(pair)

    def _reset_all(self) -> None:
        for pair in list(self._pairs):
            self._drop(pair, rst=True)
            self.stats["reset"] += 1

    def _stop(self) -> None:
        with self._lock:
            self._stopping = True

    def _run(self) -> None:
        while True:
            timeout = self._next_due()
            for key, _ in self._selector.select(timeout):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._wake_r:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                elif sock is self._listener:
                    self._accept()
                elif sock in self._owner:
                    self._service(self._owner[sock], sock)
            while True:
                with self._lock:
                    if not self._commands:
                        break
                    fn, done = self._commands.popleft()
                fn()
                done.set()
            if self._stopping:
                with self._lock:  # a command queued after the stop: its caller must not wait in vain
                    for _, done in self._commands:
                        done.set()
                return
            self._flush_all()

    def _next_due(self) -> float | None:
        if self.mode == BLACKHOLE:
            return None
        dues = [
            half.queue[0][0] for pair in self._pairs for half in pair.halves()
            if half.queue and not half.blocked and half.way not in self.held
        ]
        if not dues:
            return None
        return max(0.0, min(dues) - time.monotonic())

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            self.stats["accepted"] += 1
            if len(self._pairs) >= self.max_connections:
                self.stats["refused"] += 1
                abort(client)
                continue
            client.setblocking(False)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = _Pair(client, routes=self.routes)
            self._pairs.append(pair)
            self._owner[client] = pair
            if self.mode != BLACKHOLE:
                self._connect(pair)
            else:
                self._update(pair)

    def _connect(self, pair: _Pair) -> None:
        """Dial upstream for ``pair``; a server that is down gets the client an RST (as a refused dial would)."""
        try:
            server = socket.create_connection(self.upstream, timeout=2.0)
        except OSError:
            self.stats["refused"] += 1
            self._drop(pair, rst=True)
            return
        server.setblocking(False)
        server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pair.connect(server)
        self._owner[server] = pair
        self._update(pair)

    def _service(self, pair: _Pair, sock: socket.socket) -> None:
        """``sock`` is readable or writable: read a chunk into its half's queue, or write what is due to it."""
        if self.mode == BLACKHOLE:
            return
        reading = pair.up if sock is pair.client else pair.down
        if (
            reading is not None and not reading.eof and reading.dst is not None
            and reading.queued < self.buffer_limit and reading.way not in self.held
        ):
            try:
                data = sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:  # reset by its end: pass the reset on
                self._drop(pair, rst=True)
                return
            if data == b"":
                reading.eof = True
            elif data and reading.cutter is not None:
                due = time.monotonic() + self.latency
                keep = self.withholding
                for first, frame in reading.cutter.feed(data):
                    if keep is not None and reading.way == keep[0] and first is not None and first.startswith(keep[1]):
                        reading.withheld.append(frame)
                    else:
                        reading.queue.append((due, frame))
                        reading.queued += len(frame)
            elif data:
                reading.queue.append((time.monotonic() + self.latency, data))
                reading.queued += len(data)
        self._flush(pair)

    def _flush_all(self) -> None:
        if self.mode == BLACKHOLE:
            return
        for pair in list(self._pairs):
            self._flush(pair)

    def _flush(self, pair: _Pair) -> None:
        """Write each half's due chunks (in order), pass a finished stream's end on, drop a finished pair."""
        if self.mode == BLACKHOLE or pair.dropped:
            return
        now = time.monotonic()
        for half in pair.halves():
            dst = half.dst
            if dst is None or half.way in self.held:
                continue
            half.blocked = False
            while half.queue and half.queue[0][0] <= now:
                due, data = half.queue[0]
                try:
                    sent = dst.send(data)
                except (BlockingIOError, InterruptedError):
                    half.blocked = True
                    break
                except OSError:
                    self._drop(pair, rst=True)
                    return
                self.stats["up" if half is pair.up else "down"] += sent
                half.queued -= sent
                if sent < len(data):
                    half.queue[0] = (due, data[sent:])
                    half.blocked = True
                    break
                half.queue.popleft()
            if half.eof and not half.queue and not half.shut:
                half.shut = True
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
        if all(half.shut for half in pair.halves()) and pair.down is not None:
            self._drop(pair, rst=False)
            return
        self._update(pair)

    def _update(self, pair: _Pair) -> None:
        """Register each socket of ``pair`` for what it waits for now (nothing in a black hole)."""
        if pair.dropped:
            return
        for sock in (pair.client, pair.server):
            if sock is None:
                continue
            events = 0
            if self.mode != BLACKHOLE:
                reading = pair.up if sock is pair.client else pair.down
                writing = pair.down if sock is pair.client else pair.up
                if (
                    reading is not None and reading.dst is not None and not reading.eof
                    and reading.queued < self.buffer_limit and reading.way not in self.held
                ):
                    events |= selectors.EVENT_READ
                if writing is not None and writing.blocked:
                    events |= selectors.EVENT_WRITE
            self._register(sock, events, pair)

    def _register(self, sock: socket.socket, events: int, pair: _Pair) -> None:
        old = self._interest.get(sock, 0)
        if events == old:
            return
        if old and events:
            self._selector.modify(sock, events, pair)
        elif events:
            self._selector.register(sock, events, pair)
        else:
            self._selector.unregister(sock)
        if events:
            self._interest[sock] = events
        else:
            self._interest.pop(sock, None)

    def _drop(self, pair: _Pair, *, rst: bool) -> None:
        pair.dropped = True
        for sock in (pair.client, pair.server):
            if sock is None:
                continue
            if self._interest.pop(sock, 0):
                with contextlib.suppress(KeyError, ValueError, OSError):
                    self._selector.unregister(sock)
            self._owner.pop(sock, None)
            if rst:
                abort(sock)
            else:
                sock.close()
        if pair in self._pairs:
            self._pairs.remove(pair)

