"""Transports: a TCP socket, or TLS over it, with recv/sendall/close.

Threads: the reader thread calls ``recv_into`` (into one buffer it reuses, so
a read allocates nothing); writers call ``sendall`` (one at
a time, under the connection's send lock).  A plain socket allows that as is.
An ``ssl.SSLSocket`` does not promise it (OpenSSL forbids concurrent use of
one SSL object), so :class:`TLSTransport` drives an ``ssl.SSLObject`` over
memory BIOs: ``_tls_lock`` guards the SSL object and is held only for the
in-memory crypto, never while waiting on the network.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Protocol, cast

from .errors import TimeoutError

RECV_CHUNK = 256 * 1024


class Transport(Protocol):
    def recv_into(self, buffer: bytearray) -> int: ...

    def sendall(self, data: bytes | bytearray) -> None: ...

    def settimeout(self, timeout: float | None) -> None: ...

    def shutdown(self) -> None: ...

    def close(self) -> None: ...


class PlainTransport:
    """The socket itself: its own recv_into and sendall, bound once, so a send or read costs no Python frame."""

    __slots__ = ("recv_into", "sendall", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.recv_into: Callable[[bytearray], int] = sock.recv_into
        self.sendall: Callable[[bytes | bytearray], None] = sock.sendall

    def settimeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    def shutdown(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.sock.close()


class TLSTransport:
    """TLS via ssl.SSLObject and memory BIOs, safe for one reader and one writer thread."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, hostname: str | None) -> None:
        self.sock = sock
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = context.wrap_bio(self._in, self._out, server_side=False, server_hostname=hostname)
        self._tls_lock = threading.Lock()
        self._raw = bytearray(RECV_CHUNK)

    def handshake(self, timeout: float) -> None:
        """Complete the TLS handshake (raises ssl.SSLError, e.g. on a hostname mismatch)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._obj.do_handshake()
                self._flush_out()
                return
            except ssl.SSLWantReadError:
                self._flush_out()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"TLS handshake did not complete within {timeout} s") from None
                self.sock.settimeout(remaining)
                if not self._read_socket():
                    raise ConnectionResetError("server closed the connection during the TLS handshake") from None

    def _flush_out(self) -> None:
        data = self._out.read()
        if data:
            self.sock.sendall(data)

    def _read_socket(self) -> bool:
        """Move what the socket has into the TLS input BIO; False at end of stream."""
        n = self.sock.recv_into(self._raw)
        if not n:
            return False
        with self._tls_lock:
            self._in.write(memoryview(self._raw)[:n])
        return True

    def recv_into(self, buffer: bytearray) -> int:
        while True:
            with self._tls_lock:
                try:
                    # Given a buffer, read() fills it and returns a count (typeshed says bytes).
                    return cast(int, self._obj.read(len(buffer), buffer))
                except ssl.SSLWantReadError:
                    pending_out = self._out.read()
                except ssl.SSLZeroReturnError:
                    return 0
            if pending_out:
                self.sock.sendall(pending_out)
            if not self._read_socket():
                return 0

    def sendall(self, data: bytes | bytearray) -> None:
        view = memoryview(data)
        while view:
            with self._tls_lock:
                written = self._obj.write(view)
                out = self._out.read()
            view = view[written:]
            if out:
                self.sock.sendall(out)

    def settimeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    def shutdown(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.sock.close()


def dial(host: str, port: int, timeout: float) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def default_tls_context(ca_file: str | None, cert_file: str | None, key_file: str | None) -> ssl.SSLContext:
    """Verifying client context; optional private CA and client certificate."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_file)
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file)
    return ctx
