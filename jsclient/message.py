"""Msg: a received message, its reply helper, and JetStream acks and metadata.

A Msg is created by the connection's reader thread and then belongs to the
thread that takes it from its subscription (``next_msg``, iteration or a
callback).  It is not shared after that, so it has no lock.  Headers and
JetStream metadata are parsed lazily on first access: most hot paths never
look at them.

Acks follow ADR-15: once a terminal ack (+ACK, -NAK, +TERM) has been
published, later ack calls send nothing; with ack policy ``none`` no ack call
sends anything.  An ack raises when it cannot be sent (the connection is
closed, or the reconnect buffer is full), when the message is not a
JetStream message, or for a bad ``nak`` delay or ``term`` reason; ``ack_sync``
is a request and also raises what a request raises (a timeout, say).
"""

from __future__ import annotations

from typing import Protocol

from .checks import seconds
from .deprecation import renamed_keywords
from .errors import BadAckSubjectError, InvalidArgumentError
from .headers import Headers, HeadersInput, parse, status_of
from .jetstream.metadata import MsgMetadata, is_ack_subject, parse_metadata
from .payload import as_bytes as _as_bytes
from .protocol import MsgEvent
from .timeouts import answer_limit


class MessageCore(Protocol):
    """What a message uses of its connection's core (:class:`~jsclient.core.iface.CoreAPI` includes it)."""

    def publish_message(
        self,
        subject: str,
        payload: bytes,
        *,
        reply: str | None = None,
        headers: HeadersInput | None = None,
        send_now: bool = False,
    ) -> None:
        """Publish with everything checked; ``send_now`` for latency (a waiting requester)."""

    def publish_control(self, subject: str, payload: bytes) -> None:
        """Publish to a server-made subject (acks, flow control): no validation, no caching."""


class Attached(Protocol):
    """What a message uses of the connection it came on (a :class:`~jsclient.Connection`): its core, to
    respond and ack, and ``request``, for ``ack_sync``.  Named here, not as the connection, so that
    neither the message's own fields (``inspect.signature(Msg)`` evaluates them) nor the core, which
    attaches every message, name the layer above them."""

    @property
    def core(self) -> MessageCore: ...

    def request(self, subject: str, payload: bytes = b"", timeout: float | None = 2.0) -> Msg: ...


#: Ack states: acks may be sent; a terminal ack was sent; the consumer takes no acks.
ACK_OPEN, ACK_TERMINAL, ACK_DISABLED = 0, 1, 2


class Msg(MsgEvent):
    """A message as delivered: subject, reply, data, headers (and JetStream metadata).

    Built by the reader's parser (see :class:`MsgEvent` for the fields);
    ``_conn`` is set before the message is handed out.  ``_headers`` and
    ``_metadata`` stay None until first asked for, and ``ack_state`` is
    ACK_OPEN until an ack is sent, so a message that is only read costs
    nothing for them.  ``ack_state`` is internal, not part of the public API:
    it has no underscore because the JetStream workflows set it
    (ACK_DISABLED for a consumer that takes no acks).

    Attributes:
        subject: The subject it was published to.
        sid: The id of the subscription it was delivered to (0 for a message the library built).
        reply: The subject to answer to (the requester's inbox, or a JetStream ack subject); None if none.
        header: The raw NATS/1.0 header block, or None; :attr:`headers` is it parsed.
        data: The message body.
        _conn: Internal: the connection it came on, for :meth:`respond` and the acks.
        _headers: Internal: :attr:`headers` once parsed.
        _metadata: Internal: :attr:`metadata` once parsed.
        ack_state: Internal: whether an ack may still be sent (see above).

    Every call may raise:
        InvalidArgumentError: The message is not attached to a connection (one the library built), or an
            argument its Args do not allow.
        BadAckSubjectError: An ack of a message that is not a JetStream message (its reply is no ``$JS.ACK``
            subject).
        BadPayloadError: A payload that is not bytes-like.
        ConnectionClosedError: The connection is closed, or draining and no longer takes messages.
        ReconnectBufferFullError: While reconnecting, the answer or ack does not fit in ``reconnect_buf_size``.
        ForkedConnectionError: Called in a process forked from the one that connected (unless
            ``reconnect_after_fork``).
    """

    _conn: Attached | None = None
    _headers: Headers | None = None
    _metadata: MsgMetadata | None = None
    ack_state: int = ACK_OPEN

    @classmethod
    def make(
        cls,
        subject: str,
        data: bytes,
        *,
        reply: str | None = None,
        header: bytes | None = None,
        conn: Attached | None = None,
        sid: int = 0,
    ) -> Msg:
        """A message built by library code rather than the parser.

        Args:
            subject: Its subject.
            data: Its body.
            reply: Its reply subject.
            header: Its raw NATS/1.0 header block.
            conn: The connection it belongs to (for :meth:`respond` and the acks).
            sid: The id of the subscription it is for.

        Returns:
            The message.

        Raises:
            : Nothing.
        """
        msg = cls(subject, sid, reply, header, data)
        msg._conn = conn
        return msg

    @property
    def headers(self) -> Headers:
        """The message's headers (empty when it had none)."""
        h = self._headers
        if h is None:
            h = self._headers = parse(self.header) if self.header else Headers()
        return h

    @property
    def status(self) -> int | None:
        """The inline status code (``NATS/1.0 503``), or None for ordinary messages."""
        return status_of(self.header)

    @renamed_keywords(data="payload")
    def respond(self, payload: bytes = b"", headers: HeadersInput | None = None) -> None:
        """Publish ``payload`` to this message's reply subject.

        Sent at once, not left to the flusher thread: the requester is waiting.

        Args:
            payload: The answer's body (bytes-like).
            headers: A mapping of names to a value or a list of values, or a :class:`jsclient.Headers`.

        Raises:
            InvalidArgumentError: The message has no reply subject or no connection, a bad header
                (BadHeaderError), an answer over the server's max_payload (MaxPayloadError), or ``data=``
                beside ``payload=``; nothing is sent.
        """
        if not self.reply:
            raise InvalidArgumentError(f"message on {self.subject!r} has no reply subject to respond to")
        conn = self._conn
        if conn is None:
            raise InvalidArgumentError("message is not attached to a connection")
        # Sent at once, not via the flusher: a requester is waiting on it.
        if type(payload) is not bytes:
            payload = _as_bytes(payload)
        conn.core.publish_message(self.reply, payload, headers=headers, send_now=True)

    # -- JetStream -------------------------------------------------------------
    @property
    def metadata(self) -> MsgMetadata:
        """Stream/consumer sequences, delivery count, pending, timestamp, domain."""
        meta = self._metadata
        if meta is None:
            meta = self._metadata = parse_metadata(self.reply)
        return meta

    @property
    def is_acked(self) -> bool:
        """A terminal ack has been sent (or acks are disabled for its consumer)."""
        return self.ack_state != ACK_OPEN

    def ack(self) -> None:
        """Acknowledge: the message is done.

        Sends nothing after a terminal ack (or for a consumer that takes no acks).
        """
        self._ack(b"+ACK", True)

    def nak(self, delay: float | None = None) -> None:
        """Negative ack: redeliver, after ``delay`` seconds if given.

        Args:
            delay: Seconds the server waits before it redelivers; left out, a plain ``-NAK`` is sent.

        Raises:
            InvalidArgumentError: ``delay`` is not a number of seconds >= 0.
        """
        if delay is None:
            self._ack(b"-NAK", True)
            return
        self._ack(b'-NAK {"delay":%d}' % int(seconds("nak delay", delay, allow_zero=True) * 1e9), True)

    def term(self, reason: str | None = None) -> None:
        """Terminate: never redeliver this message.

        Args:
            reason: Why, sent along with the ``+TERM`` (one line of text).

        Raises:
            InvalidArgumentError: ``reason`` is not a single-line str, or the message is not attached to a
                connection.
        """
        if reason is None:
            self._ack(b"+TERM", True)
            return
        if not isinstance(reason, str) or "\r" in reason or "\n" in reason:
            raise InvalidArgumentError(f"term reason must be a single-line str, not {reason!r}")
        self._ack(b"+TERM " + reason.encode(), True)

    def in_progress(self) -> None:
        """Working on it: reset the ack wait timer (not terminal).
        """
        self._ack(b"+WPI", False)

    def ack_sync(self, timeout: float | None = 5.0) -> None:
        """Acknowledge and wait until the server confirms it.

        Returns at once after a terminal ack (or for a consumer that takes no acks).

        Args:
            timeout: Seconds to wait for the confirmation; ``None``, no limit; ``0`` is refused (see
                :doc:`/conventions`).

        Raises:
            InvalidArgumentError: A bad ``timeout``, or the message is not attached to a connection.
            TimeoutError: No confirmation within ``timeout``; the ack may still have been taken.
            NoRespondersError: Nothing answers on the ack subject (the consumer was deleted, for example).
            ConnectionClosedError: The connection is closed, or draining and no longer takes messages, or it
                closed while waiting.
        """
        wait = answer_limit(timeout)
        if self.ack_state != ACK_OPEN:
            return
        conn = self._ack_target()
        conn.request(self.reply, b"+ACK", timeout=wait)  # type: ignore[arg-type]
        self.ack_state = ACK_TERMINAL

    def _ack(self, payload: bytes, terminal: bool) -> None:
        if self.ack_state != ACK_OPEN:
            return
        conn = self._ack_target()
        conn.core.publish_control(self.reply, payload)  # type: ignore[arg-type]
        if terminal:
            self.ack_state = ACK_TERMINAL

    def _ack_target(self) -> Attached:
        if not is_ack_subject(self.reply):
            raise BadAckSubjectError(
                f"message on {self.subject!r} is not a JetStream message (reply {self.reply!r}); it cannot be acked"
            )
        conn = self._conn
        if conn is None:
            raise InvalidArgumentError("message is not attached to a connection")
        return conn

    def __repr__(self) -> str:
        data = self.data if len(self.data) <= 64 else self.data[:64] + b"..."
        return f"<Msg subject={self.subject!r} reply={self.reply!r} data={data!r}>"
