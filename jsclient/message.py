"""Msg: a received message, and the reply helper.

A Msg is created by the connection's reader thread and then belongs to the
thread that takes it from its subscription (``next_msg``, iteration or a
callback).  It is not shared after that, so it has no lock.  Headers are
parsed lazily on first access: most hot paths never look at them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import InvalidArgumentError
from .headers import Headers, HeadersInput, parse, status_of
from .payload import as_bytes as _as_bytes

if TYPE_CHECKING:
    from .connection import Connection


class Msg:
    """A message as delivered: subject, reply, data and headers."""

    __slots__ = ("_conn", "_header", "_headers", "data", "reply", "sid", "subject")

    def __init__(
        self,
        subject: str,
        reply: str | None,
        data: bytes,
        header: bytes | None = None,
        conn: Connection | None = None,
        sid: int = 0,
    ) -> None:
        self.subject = subject
        self.reply = reply
        self.data = data
        self.sid = sid
        self._header = header
        self._headers: Headers | None = None
        self._conn = conn

    @property
    def headers(self) -> Headers:
        """The message's headers (empty when it had none)."""
        h = self._headers
        if h is None:
            h = parse(self._header) if self._header else Headers()
            self._headers = h
        return h

    @property
    def status(self) -> int | None:
        """The inline status code (``NATS/1.0 503``), or None for ordinary messages."""
        return status_of(self._header)

    def respond(self, data: bytes = b"", headers: HeadersInput | None = None) -> None:
        """Publish ``data`` to this message's reply subject."""
        if not self.reply:
            raise InvalidArgumentError(f"message on {self.subject!r} has no reply subject to respond to")
        if self._conn is None:
            raise InvalidArgumentError("message is not attached to a connection")
        # Sent at once, not via the flusher: a requester is waiting on it.
        if type(data) is not bytes:
            data = _as_bytes(data)
        self._conn._publish_full(self.reply, data, None, headers, True)

    def __repr__(self) -> str:
        data = self.data if len(self.data) <= 64 else self.data[:64] + b"..."
        return f"<Msg subject={self.subject!r} reply={self.reply!r} data={data!r}>"
