"""NATS over WebSocket (``ws://``, ``wss://``): a sans-IO codec and the transport that drives it.

:class:`WebSocketCodec` knows no socket and no thread: the upgrade request,
binary frames out (masked, as a client must), frames in (pings answered,
a close replied to, anything else that is not a binary frame refused with
:class:`ProtocolError`).  It is tested by feeding it bytes, fuzzed included.

:class:`WebSocketTransport` carries it over a plain or TLS transport.
Threads: the reader thread calls ``recv_into``; writers call ``sendall``
one at a time (under the connection's send lock), one WebSocket frame per
call, so a batch of NATS frames the writer gathered leaves as one frame.
Locks (order: ``_send_lock`` before ``_codec_lock``):

- ``_codec_lock`` guards the codec; held only for in-memory framing.
- ``_send_lock`` keeps one frame's bytes together on the socket.  A writer
  holds it over its send; the reader takes it only without blocking, to
  answer a ping or a close: a control frame it cannot send at once waits in
  ``_control`` for the holder, who looks there after releasing the lock.
  The closing thread waits for it (at most ``CLOSE_WAIT``) before it
  changes the socket's timeout, so that no send under way is cut short.
"""

from __future__ import annotations

import builtins
import contextlib
import threading
import time
from collections import deque
from collections.abc import Sequence
from urllib.parse import SplitResult

from ._version import __version__
from .errors import Error, ProtocolError, TimeoutError
from .transport import Transport

try:
    from wsproto import ConnectionType, WSConnection
    from wsproto.connection import ConnectionState
    from wsproto.events import (
        AcceptConnection,
        BytesMessage,
        CloseConnection,
        Ping,
        RejectConnection,
        RejectData,
        Request,
        TextMessage,
    )
    from wsproto.extensions import PerMessageDeflate
    from wsproto.utilities import LocalProtocolError, RemoteProtocolError
except ImportError:  # pragma: no cover - the extra is not installed
    WSConnection = None  # type: ignore[assignment,misc]

#: Close codes after which the server simply went away (normal, going away, no status).
ORDERLY_CLOSE = frozenset({1000, 1001, 1005})
ABNORMAL_CLOSURE = 1006


def require_wsproto() -> None:
    if WSConnection is None:
        raise Error("ws:// and wss:// URLs need wsproto: pip install 'jsclient[websocket]'")


class WebSocketCodec:
    """The client end of one WebSocket carrying NATS bytes; no socket, no thread (not thread-safe)."""

    def __init__(
        self, host: str, target: str, headers: Sequence[tuple[str, str]] = (), *, compression: bool = False
    ) -> None:
        require_wsproto()
        self._ws = WSConnection(ConnectionType.CLIENT)
        extra = [(b"User-Agent", f"jsclient/{__version__}".encode())]
        extra += [(name.encode(), value.encode()) for name, value in headers]
        #: The HTTP upgrade request, to send first.
        offer = [PerMessageDeflate()] if compression else []
        self.upgrade: bytes = self._ws.send(Request(host=host, target=target, extra_headers=extra, extensions=offer))
        self.accepted = False
        #: Whether the server took permessage-deflate.
        self.compressed = False
        #: Control frames (pong, close reply) to send back, oldest first.
        self.control: deque[bytes] = deque()
        #: Why the WebSocket ended, once it has (ConnectionResetError or ProtocolError); then feed ignores input.
        self.ended: Exception | None = None
        #: Whether the server closed the WebSocket with a close frame (and this end has queued its answer).
        self.server_closed = False
        self._partial = False  # the last data frame seen has more to come
        self._refusal: tuple[int, bytearray] | None = None
        self._head = b""  # the first bytes of the answer to the upgrade, to recognise a NATS port

    def feed(self, data: bytes | None) -> bytes:
        """Bytes from the server (None at end of stream) in; the NATS bytes they carried out.

        Data that came before an ending is returned first; the ending is left
        in :attr:`ended` (and raised by the handshake while not yet accepted).
        """
        if self.ended is not None:
            return b""
        if not self.accepted and len(self._head) < 4:
            self._head += (data or b"")[: 4 - len(self._head)]
        try:
            self._ws.receive_data(data)
        except RemoteProtocolError as exc:  # the HTTP answer to the upgrade was not HTTP, or cut short
            if self._head == b"INFO":
                raise ProtocolError("the server answered the WebSocket upgrade with a NATS INFO: that is a "
                                    "nats:// port, not a WebSocket one") from None
            if data is None:
                if self._refusal is not None:
                    self._refuse()
                raise ProtocolError("the server closed the connection during the WebSocket upgrade") from None
            raise ProtocolError(f"the server's answer to the WebSocket upgrade is not valid HTTP: {exc}") from None
        out: list[bytes | bytearray] = []
        for event in self._ws.events():
            if isinstance(event, BytesMessage):
                out.append(event.data)
                self._partial = not event.message_finished
            elif isinstance(event, Ping):
                self.control.append(self._ws.send(event.response()))
            elif isinstance(event, AcceptConnection):
                self.accepted = True
                self.compressed = any(isinstance(ext, PerMessageDeflate) for ext in event.extensions)
            elif isinstance(event, CloseConnection):
                self.ended = self._closed(event)
                break
            elif isinstance(event, TextMessage):
                self.ended = ProtocolError("the server sent a WebSocket text frame (NATS uses binary frames)")
                break
            elif isinstance(event, RejectConnection):
                self._refusal = (event.status_code, bytearray())
                if not event.has_body:
                    self._refuse()
            elif isinstance(event, RejectData) and self._refusal is not None:
                self._refusal[1].extend(event.data[:200])
                if event.body_finished:
                    self._refuse()
            # a server pong (we send no pings) needs nothing
        if not self.accepted and data is None and self.ended is None:
            self.ended = ProtocolError("the server closed the connection during the WebSocket upgrade")
        if not self.accepted and self.ended is not None:
            raise self.ended
        return b"".join(out)

    def _refuse(self) -> None:
        assert self._refusal is not None
        status, body = self._refusal
        text = bytes(body).decode("utf-8", "replace").strip()
        hint = " (a wss:// listener? use a wss:// URL)" if "HTTPS" in text else ""
        raise ProtocolError(f"the server refused the WebSocket upgrade: HTTP {status} {text[:120]}{hint}".rstrip())

    def _closed(self, event: CloseConnection) -> Exception:
        code, reason = event.code, event.reason or ""
        if self._ws.state is ConnectionState.REMOTE_CLOSING:  # a close frame from the server: reply in kind
            with contextlib.suppress(LocalProtocolError):
                self.control.append(self._ws.send(event.response()))
            self.server_closed = True
            if code in ORDERLY_CLOSE:
                return ConnectionResetError(f"the server closed the WebSocket ({code} {reason})".rstrip(" )") + ")")
            return ProtocolError(f"the server closed the WebSocket with code {code}: {reason}".rstrip(": "))
        if code == ABNORMAL_CLOSURE:  # end of stream without a close frame
            if self._partial:
                return ProtocolError("the server closed the connection in the middle of a WebSocket frame")
            return ConnectionResetError("the server closed the connection")
        if self._ws.state is ConnectionState.CLOSED:  # the answer to our own close frame
            return ConnectionResetError("the WebSocket is closed")
        return ProtocolError(f"bad WebSocket frame from the server: {reason or code}")

    def encode(self, data: bytes | bytearray | memoryview) -> bytes:
        """One binary frame carrying ``data``; ConnectionResetError once the WebSocket is closing.

        An OSError, so a writer that meets it keeps its bytes and reports the
        link lost, as for any failed send (wsproto's own error would escape it).
        """
        if self._ws.state is not ConnectionState.OPEN:
            raise ConnectionResetError("the WebSocket is closing; nothing more can be sent on it")
        return self._ws.send(BytesMessage(data=bytes(data)))

    def close_frame(self) -> bytes:
        """A normal-closure frame, or nothing when the WebSocket is no longer open."""
        if self._ws.state is not ConnectionState.OPEN:
            return b""
        return self._ws.send(CloseConnection(code=1000))


#: Seconds :meth:`WebSocketTransport.close` waits for a send under way, and then for its answer to a close frame.
CLOSE_WAIT = 1.0


class WebSocketTransport:
    """A :class:`~jsclient.transport.Transport` over another one, NATS bytes in binary frames."""

    def __init__(self, inner: Transport, codec: WebSocketCodec) -> None:
        self._inner = inner
        self._codec = codec
        self._codec_lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._control: deque[bytes] = deque()  # guarded by _send_lock (appended from any thread)
        self._raw = bytearray(256 * 1024)  # reader thread only
        self._pending = memoryview(b"")  # reader thread only: decoded bytes not yet handed out

    def upgrade(self, timeout: float) -> None:
        """Send the upgrade request and read until the server accepts it; raises on refusal or timeout."""
        deadline = time.monotonic() + timeout
        try:
            self._inner.settimeout(timeout)
            self._inner.sendall(self._codec.upgrade)
            while not self._codec.accepted:
                self._inner.settimeout(max(deadline - time.monotonic(), 0.001))
                self._fill()
        except builtins.TimeoutError:
            raise TimeoutError(f"the WebSocket upgrade did not complete within {timeout} s") from None

    def _fill(self) -> None:
        """Read once from the socket and decode; EOF and errors end up in the codec's ``ended``."""
        n = self._inner.recv_into(self._raw)
        with self._codec_lock:
            data = self._codec.feed(bytes(memoryview(self._raw)[:n]) if n else None)
            control = list(self._codec.control)
            self._codec.control.clear()
        if data:
            self._pending = memoryview(data)
        if control:
            self._control.extend(control)
            self._send_control()

    def recv_into(self, buffer: bytearray) -> int:
        while True:
            pending = self._pending
            if pending:
                n = min(len(buffer), len(pending))
                buffer[:n] = pending[:n]
                self._pending = pending[n:]
                return n
            ended = self._codec.ended
            if ended is not None:
                if isinstance(ended, ProtocolError):
                    raise ended
                return 0
            self._fill()

    def sendall(self, data: bytes | bytearray) -> None:
        try:
            with self._send_lock:
                with self._codec_lock:
                    frame = self._codec.encode(data)
                self._inner.sendall(frame)
        finally:  # a send refused because the server's close came meanwhile still hands on the answer to it
            if self._control:
                self._send_control()

    def _send_control(self) -> None:
        """Send queued control frames if no one is sending; else the sender will, after releasing."""
        while self._control and self._send_lock.acquire(False):
            try:
                while self._control:
                    self._inner.sendall(self._control.popleft())
            except OSError:
                self._control.clear()  # the link is failing; the reader will see it
            finally:
                self._send_lock.release()

    def settimeout(self, timeout: float | None) -> None:
        self._inner.settimeout(timeout)

    def shutdown(self) -> None:
        """Say goodbye with a close frame when that cannot block, then shut the socket down."""
        if self._send_lock.acquire(False):
            try:
                with self._codec_lock:
                    frame = self._codec.close_frame()
                if frame:
                    with contextlib.suppress(OSError, ValueError):
                        self._inner.settimeout(0)
                        self._inner.sendall(frame)
            finally:
                self._send_lock.release()
        self._inner.shutdown()

    def close(self) -> None:
        """After the server's close frame, read away what it sent since: a socket closed with unread bytes is
        reset, and the reset can overtake our answer to its close frame.  The reader has stopped reading then;
        a writer still sending (a frame begun before the close came) finishes first, within CLOSE_WAIT, so
        that no timeout changed under it cuts its frame short; then the answer still queued goes out."""
        if self._codec.server_closed and self._send_lock.acquire(True, CLOSE_WAIT):
            try:
                with contextlib.suppress(OSError, ValueError):
                    self._inner.settimeout(CLOSE_WAIT)
                    while self._control:
                        self._inner.sendall(self._control.popleft())
                    self._inner.settimeout(0)
                    for _ in range(64):  # bounded: a server still sending gets its reset after all
                        if not self._inner.recv_into(self._raw):
                            break
            finally:
                self._send_lock.release()
        self._inner.close()


def open_websocket(inner: Transport, parts: SplitResult, headers: Sequence[tuple[str, str]], *,
                   compression: bool, timeout: float) -> WebSocketTransport:
    """Upgrade a connected transport to a WebSocket at the URL's path."""
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    host = parts.hostname or "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    if parts.port and parts.port != (443 if parts.scheme == "wss" else 80):
        host += f":{parts.port}"
    transport = WebSocketTransport(inner, WebSocketCodec(host, target, headers, compression=compression))
    transport.upgrade(timeout)
    return transport
