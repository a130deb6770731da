"""A loopback TCP proxy that can rewrite server-to-client frames (NATS or WebSocket ones).

Used only to inject what a real nats-server will not produce on demand (a
dropped delivery, an unknown status, garbage bytes); every test that uses it
says so.  Server-to-client bytes are split into protocol frames and each
frame goes through ``filter(frame)``, which returns the bytes to forward
(the frame, nothing, or something else).  Client-to-server bytes pass
unchanged unless an ``upstream`` filter is given (a lost publish).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable

Filter = Callable[[bytes], bytes]


class Cut(bytes):
    """Returned by a filter (either way): forward these bytes, then close the client's connection."""


def listen_loopback(backlog: int = 16) -> socket.socket:
    """A TCP listener on 127.0.0.1 at a port the kernel picks, for the tests' proxies (FrameProxy, nemesis links).

    The port stays held for the proxy's life, so no outgoing connection can
    be given it meanwhile (the worry :func:`jsclient.server.free_port` has).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(backlog)
    return sock


def split_ws_frames(buf: bytearray) -> list[bytes]:
    """Remove and return the complete WebSocket frames (masked or not) at the start of ``buf``."""
    frames: list[bytes] = []
    while len(buf) >= 2:
        size, pos = buf[1] & 0x7F, 2
        if size >= 126:
            pos = 4 if size == 126 else 10
            if len(buf) < pos:
                break
            size = int.from_bytes(buf[2:pos], "big")
        end = pos + (4 if buf[1] & 0x80 else 0) + size
        if len(buf) < end:
            break
        frames.append(bytes(buf[:end]))
        del buf[:end]
    return frames


def ws_parse(frame: bytes) -> tuple[int, bytes]:
    """A whole frame's opcode and its payload, unmasked."""
    size, pos = frame[1] & 0x7F, 2
    if size == 126:
        pos = 4
    elif size == 127:
        pos = 10
    if not frame[1] & 0x80:
        return frame[0] & 0x0F, frame[pos:]
    key, payload = frame[pos : pos + 4], frame[pos + 4 :]
    return frame[0] & 0x0F, bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def ws_frame(opcode: int, payload: bytes, *, fin: bool = True) -> bytes:
    """An unmasked frame, as a server sends."""
    size = len(payload)
    if size < 126:
        head = bytes([size])
    elif size < 65536:
        head = bytes([126]) + size.to_bytes(2, "big")
    else:
        head = bytes([127]) + size.to_bytes(8, "big")
    return bytes([(0x80 if fin else 0) | opcode]) + head + payload


def split_frames(buf: bytearray) -> list[bytes]:
    """Remove and return the complete frames at the start of ``buf``."""
    frames: list[bytes] = []
    while True:
        nl = buf.find(b"\r\n")
        if nl < 0:
            return frames
        line = bytes(buf[:nl])
        op = line.split(b" ", 1)[0].upper()
        if op in (b"MSG", b"HMSG", b"PUB", b"HPUB"):
            size = int(line.split()[-1])
            end = nl + 2 + size + 2
            if len(buf) < end:
                return frames
        else:
            end = nl + 2
        frames.append(bytes(buf[:end]))
        del buf[:end]


def rewrite_status(frame: bytes, old: bytes, new: bytes) -> bytes:
    """An HMSG frame with one status line replaced, sizes recomputed."""
    head, _, rest = frame.partition(b"\r\n")
    parts = head.split()
    hlen, total = int(parts[-2]), int(parts[-1])
    header, payload = rest[:hlen], rest[hlen:total]
    header = header.replace(old, new)
    parts[-2], parts[-1] = b"%d" % len(header), b"%d" % (len(header) + len(payload))
    return b" ".join(parts) + b"\r\n" + header + payload + b"\r\n"


class FrameProxy:
    """Listens on 127.0.0.1; each accepted client gets its own upstream connection."""

    def __init__(
        self,
        upstream: tuple[str, int],
        frame_filter: Filter | None = None,
        *,
        upstream_filter: Filter | None = None,
        websocket: bool = False,
    ) -> None:
        #: With ``websocket``, the filter sees the server's WebSocket frames (after the HTTP upgrade answer).
        self.websocket = websocket
        #: Every byte the server sent, for tests that check what went on the wire.
        self.received = bytearray()
        self.upstream = upstream
        self.filter: Filter = frame_filter or (lambda frame: frame)
        self.upstream_filter = upstream_filter
        self._listener = listen_loopback()
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        #: Every byte the clients sent, for tests that check what went on the wire.
        self.sent = bytearray()
        self._sent_by_link: list[bytearray] = []
        self._sent_lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="test-proxy").start()

    def sent_by_link(self) -> list[bytes]:
        """What the clients sent, link by link in the order they were accepted: ``sent`` interleaves the links'
        bytes when a client reconnects."""
        with self._sent_lock:
            return [bytes(link) for link in self._sent_by_link]

    @property
    def url(self) -> str:
        return f"{'ws' if self.websocket else 'nats'}://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self._sockets += [client, server]
            threading.Thread(target=self._pipe_up, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pipe_down, args=(server, client), daemon=True).start()

    def _pipe_up(self, src: socket.socket, dst: socket.socket) -> None:
        buf, link = bytearray(), bytearray()
        with self._sent_lock:
            self._sent_by_link.append(link)
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                with self._sent_lock:
                    self.sent += data
                    link += data
                if self.upstream_filter is None:
                    dst.sendall(data)
                    continue
                buf += data
                for frame in split_frames(buf):
                    out = self.upstream_filter(frame)
                    if out:
                        dst.sendall(out)
                    if isinstance(out, Cut):  # what the client sent after it is lost with the connection
                        for sock in (src, dst):
                            with contextlib.suppress(OSError):
                                sock.shutdown(socket.SHUT_RDWR)
                            sock.close()
                        return
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def _pipe_down(self, src: socket.socket, dst: socket.socket) -> None:
        buf = bytearray()
        upgraded = not self.websocket
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                self.received += data
                buf += data
                if not upgraded:  # the HTTP answer to the upgrade passes as it is
                    end = buf.find(b"\r\n\r\n")
                    if end < 0:
                        continue
                    dst.sendall(bytes(buf[: end + 4]))
                    del buf[: end + 4]
                    upgraded = True
                frames = split_ws_frames(buf) if self.websocket else split_frames(buf)
                for frame in frames:
                    out = self.filter(frame)
                    if out:
                        dst.sendall(out)
                    if isinstance(out, Cut):  # shutdown first: close alone waits for the other pipe's recv
                        for sock in (dst, src):
                            with contextlib.suppress(OSError):
                                sock.shutdown(socket.SHUT_RDWR)
                            sock.close()
                        return
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def __enter__(self) -> FrameProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
