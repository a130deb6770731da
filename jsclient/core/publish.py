"""A session's publishing calls: a message, a control reply, and flush (a PING behind what was sent).

Callers' threads run them; so does the reader, for a flow-control answer
from a subscription's arrival hook.  No lock of their own: they append
through the writer (its ``write_lock``, and ``send_lock`` when a buffer
goes out inline; their order: :mod:`jsclient.core`), and flush waits for
its PONG through the reader (or reads it itself:
:func:`jsclient.core.fastpath.await_reply`).  The session binds them as
its own, so nothing stands between a caller and these calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import Error, TimeoutError
from ..headers import HeadersInput
from ..headers import encode as encode_headers
from ..protocol import PubEncoder, encode_pub
from .fastpath import await_reply
from .state import Waiter

if TYPE_CHECKING:
    from .reader import Reader
    from .writer import Writer


class Publisher:
    """One session's publishing calls (see the module docstring)."""

    def __init__(self, encoder: PubEncoder, writer: Writer, reader: Reader, refusal: Callable[[], Error]) -> None:
        self._encoder = encoder
        self._writer = writer
        self._reader = reader
        self._refusal = refusal  # the error for a call refused now (closed, forked)

    def publish_message(
        self,
        subject: str,
        payload: bytes,
        *,
        reply: str | None = None,
        headers: HeadersInput | None = None,
        send_now: bool = False,
    ) -> None:
        header = encode_headers(headers) if headers is not None else b""
        frame = self._encoder.frame(subject, payload, reply, header)
        self._writer.append(frame, send_now=send_now, payload_size=len(payload))

    def publish_control(self, subject: str, payload: bytes) -> None:
        self._writer.append(encode_pub(subject, payload), payload_size=len(payload))

    def flush(self, timeout: float) -> None:
        """Return once the server has processed everything sent before this call.

        While reconnecting, the PING waits in the buffer and the wait goes on
        within ``timeout``; if the connection breaks after the PING left,
        ConnectionLostError says the server may not have seen everything.
        """
        waiter = Waiter()
        if not self._writer.queue_ping(waiter):
            raise self._refusal()
        self._writer.send_pending()
        if not await_reply(self._reader, waiter, timeout):
            raise TimeoutError(f"flush: no PONG from the server within {timeout} s")
        if waiter.error is not None:
            raise waiter.error
