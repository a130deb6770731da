"""Atomic batch publish (ADR-50): every message of a batch is stored, or none is.

Runs on the caller's thread; no state outlives a call, so nothing here is
locked.  A batch is validated whole before its first byte is sent.  Its
members go out as one run of HPUB frames without reply subjects (the server
answers a member only when asked, and the commit's ack is the only answer
that matters); the last message carries ``Nats-Batch-Commit: 1`` and is sent
as a request whose reply is the batch's ack or the error that abandoned it.
An :class:`AtomicBatch` keeps its messages on the client until ``commit()``,
so an abandoned batch costs the server nothing.
"""

from __future__ import annotations

import itertools
import os
import secrets
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from types import TracebackType
from typing import TYPE_CHECKING, Any

import msgspec

from ..deprecation import renamed_keywords
from ..errors import BatchInterruptedError, InvalidArgumentError, JetStreamAPIError, NoRespondersError, TimeoutError
from ..headers import BATCH_MEMBER_BLOCK, Headers, HeadersInput, encode, encode_lines
from ..payload import as_bytes
from ..protocol import check_publish_subject, hpub_frame
from ..timeouts import DEFAULT, Timeout, answer_limit
from . import api
from .status import no_stream

if TYPE_CHECKING:
    from ..message import Msg
    from .context import JetStream

#: The server's default limit of messages per atomic batch (it does not advertise its own).
MAX_BATCH_MESSAGES = 1000
MAX_BATCH_ID = 64
BATCH_ID = "Nats-Batch-Id"
BATCH_SEQUENCE = "Nats-Batch-Sequence"
BATCH_COMMIT = "Nats-Batch-Commit"
_FORBIDDEN = ("Nats-Expected-Last-Msg-Id", BATCH_ID, BATCH_SEQUENCE, BATCH_COMMIT)

_id_count = itertools.count(1)
_id_prefix = secrets.token_hex(8)


def _new_id_prefix() -> None:
    global _id_prefix
    _id_prefix = secrets.token_hex(8)


os.register_at_fork(after_in_child=_new_id_prefix)  # a forked child must not repeat its parent's ids


def new_batch_id() -> str:
    """An id that no batch of this or any other process has: 64 random bits drawn once per process, and a count.

    Made once per batch, and every member carries it, so it is short and
    costs no system call (a uuid4 would cost both).
    """
    return f"{_id_prefix}{next(_id_count):x}"


class BatchAck(msgspec.Struct, kw_only=True, frozen=True):
    """The ack of a committed batch: ``seq`` is its last message's stream sequence.

    Attributes:
        stream: The stream that stored the batch.
        seq: The stream sequence of the batch's last message.
        count: How many messages the batch stored.
        batch: The batch's id.
        domain: The JetStream domain of the stream, if it has one.
    """

    stream: str
    seq: int
    count: int
    batch: str
    domain: str | None = None


class _BatchAckReply(api.AckReply):
    stream: str = ""
    seq: int = 0
    count: int = 0
    batch: str = ""
    domain: str | None = None


def decode_batch_ack(data: bytes) -> BatchAck:
    reply = api.decode_ack(data, _BatchAckReply, "batch ack")
    if not reply.stream or not reply.count:
        raise JetStreamAPIError(0, 0, f"batch ack without a stream or count (not an atomic batch?): {data[:200]!r}")
    return BatchAck(stream=reply.stream, seq=reply.seq, count=reply.count, batch=reply.batch, domain=reply.domain)


class Member(msgspec.Struct, gc=False):
    """One validated batch message."""

    subject: str
    payload: bytes
    headers: Headers | None


def member(entry: Any, index: int) -> Member:
    """One batch entry, validated: ``(subject, data)`` or a mapping with subject, data, headers, msg_id."""
    if isinstance(entry, Mapping):
        unknown = set(entry) - {"subject", "data", "headers", "msg_id"}
        if unknown:
            raise InvalidArgumentError(f"batch message {index}: unknown key(s) {sorted(unknown)}")
        subject, data = entry.get("subject"), entry.get("data", b"")
        headers_in: HeadersInput | None = entry.get("headers")
        msg_id = entry.get("msg_id")
    elif isinstance(entry, tuple) and len(entry) == 2:
        (subject, data), headers_in, msg_id = entry, None, None
    else:
        raise InvalidArgumentError(
            f"batch message {index} must be a (subject, data) pair or a mapping, not {type(entry).__name__}"
        )
    if not isinstance(subject, str):
        raise InvalidArgumentError(f"batch message {index}: subject must be a str, not {subject!r}")
    check_publish_subject(subject)
    headers = Headers(headers_in) if headers_in is not None else None
    if headers is not None:
        for name in _FORBIDDEN:
            if name in headers:
                raise InvalidArgumentError(f"batch message {index}: header {name} cannot be used in an atomic batch")
    if msg_id is not None:
        if not isinstance(msg_id, str) or not msg_id:
            raise InvalidArgumentError(f"batch message {index}: msg_id must be a non-empty str, not {msg_id!r}")
        headers = headers if headers is not None else Headers()
        headers["Nats-Msg-Id"] = msg_id
    return Member(subject, as_bytes(data), headers)


def member_frame(subject: bytes, header_lines: bytes, batch_id: bytes, seq: int, payload: bytes) -> bytes:
    """One batch member as an HPUB frame; ``header_lines`` are the user's ``Name: value\\r\\n`` lines."""
    return hpub_frame(subject, BATCH_MEMBER_BLOCK % (header_lines, batch_id, seq), payload)


def check_batch_id(batch_id: str) -> bytes:
    if not isinstance(batch_id, str) or not batch_id or len(batch_id) > MAX_BATCH_ID:
        raise InvalidArgumentError(f"batch_id must be a str of 1 to {MAX_BATCH_ID} characters, not {batch_id!r}")
    check_publish_subject(batch_id, "batch_id")  # no whitespace: it travels in a header
    return batch_id.encode()


def send_members(js: JetStream, frames: bytes | memoryview, *, count: int, payload_bytes: int) -> None:
    """Queue members already framed by :func:`member_frame` (none of them commits)."""
    if count:
        js.conn.publish_encoded(frames, messages=count, payload_bytes=payload_bytes, send_now=True)


def send_commit(js: JetStream, last: Member, *, batch_id: str, total: int, timeout: float) -> Future[Msg]:
    """Send the message that commits a batch of ``total``; its reply is the batch's ack or error."""
    commit = Headers(last.headers) if last.headers else Headers()
    commit[BATCH_ID] = batch_id
    commit[BATCH_SEQUENCE] = str(total)
    commit[BATCH_COMMIT] = "1"
    return js.conn.request_async(last.subject, last.payload, timeout=timeout, headers=commit)


def batch_ack(commit: Future[Msg], subject: str, *, js: JetStream | None = None, reconnects: int = 0) -> BatchAck:
    """Wait for a commit's reply (it times out by itself) and return the batch's ack, or raise its error.

    With ``js``: a timeout after the connection reconnected (its count is no
    longer ``reconnects``, taken before the first member was queued) is the
    batch interrupted by the loss, and says so.  A reply that does come, on
    the old link or after members still buffered went out on the new one,
    is the batch's real outcome, so it is waited for all the same.
    """
    try:
        reply = commit.result()
    except NoRespondersError:
        raise no_stream(subject) from None
    except TimeoutError as exc:
        if js is not None and js.conn.reconnects != reconnects:
            raise BatchInterruptedError(
                f"the connection broke during an atomic batch to {subject!r} and its commit was not answered "
                f"({exc}): the server abandons a batch it did not receive whole, so nothing of it is stored, "
                "unless the commit got through before the break (then all of it is); read the stream before "
                "sending it again"
            ) from None
        raise
    return decode_batch_ack(reply.data)


def send_batch(
    js: JetStream,
    members: list[Member],
    *,
    batch_id: str,
    timeout: float,
    encoded: bytes = b"",
    encoded_count: int = 0,
    encoded_bytes: int = 0,
) -> BatchAck:
    """Send ``encoded`` (members 1..encoded_count, already framed) then ``members``; the last commits.

    ``members`` must not be empty: its last one is the commit.
    """
    bid = check_batch_id(batch_id)
    limit = js.conn.max_payload
    total = encoded_count + len(members)
    if total > MAX_BATCH_MESSAGES:
        raise InvalidArgumentError(
            f"an atomic batch holds at most {MAX_BATCH_MESSAGES} messages (the server's default limit), not {total}"
        )
    for m in members:
        size = len(m.payload) + (len(encode(m.headers)) if m.headers else 0) + 80
        if size > limit:
            raise InvalidArgumentError(
                f"batch message to {m.subject!r} of about {size} bytes exceeds the server's max_payload of {limit}"
            )
    reconnects = js.conn.reconnects
    parts = [encoded]
    payload_bytes = encoded_bytes
    for seq, m in enumerate(members[:-1], encoded_count + 1):
        lines = encode_lines(m.headers) if m.headers else b""
        parts.append(member_frame(m.subject.encode(), lines, bid, seq, m.payload))
        payload_bytes += len(m.payload)
    send_members(js, b"".join(parts), count=total - 1, payload_bytes=payload_bytes)
    last = members[-1]
    future = send_commit(js, last, batch_id=batch_id, total=total, timeout=timeout)
    return batch_ack(future, last.subject, js=js, reconnects=reconnects)


def publish_batch(
    js: JetStream, messages: Iterable[Any], *, timeout: float, batch_id: str | None = None
) -> BatchAck:
    members = [member(entry, i) for i, entry in enumerate(messages)]
    if not members:
        raise InvalidArgumentError("publish_batch needs at least one message")
    return send_batch(js, members, batch_id=batch_id or new_batch_id(), timeout=timeout)


class AtomicBatch:
    """Messages gathered on the client and published as one atomic batch by :meth:`commit`.

    As a context manager it commits on a clean exit and abandons (sends
    nothing) when the block raises.  One thread at a time.  Make one with
    ``js.atomic_batch()``.

    Args:
        js: The context that publishes the batch.
        timeout: Seconds the commit waits for the batch's ack; left out, the context's; ``None``, no limit
            (see :doc:`/conventions`).

    Raises:
        InvalidArgumentError: A bad ``timeout``.
    """

    def __init__(self, js: JetStream, timeout: Timeout = DEFAULT) -> None:
        self._js = js
        self._timeout = answer_limit(timeout, js.timeout)
        self._members: list[Member] = []
        #: The batch's ack once :meth:`commit` has stored it; None before.
        self.ack: BatchAck | None = None

    @renamed_keywords(data="payload")
    def add(
        self, subject: str, payload: bytes = b"", *, headers: HeadersInput | None = None, msg_id: str | None = None
    ) -> None:
        """Add a message to the batch; it stays on the client until :meth:`commit`.

        Args:
            subject: Where to publish it (no wildcards).
            payload: Its body (bytes-like).
            headers: Headers to send with it (not ``Nats-Expected-Last-Msg-Id`` nor the ``Nats-Batch-*``
                ones, which the batch sets).
            msg_id: Sets ``Nats-Msg-Id``; if the stream holds that id already, the whole batch is refused.

        Raises:
            InvalidArgumentError: A bad subject, header or ``msg_id``, a batch already committed, or a
                1,001st message.
            BadPayloadError: ``payload`` is not bytes-like.
        """
        if self.ack is not None:
            raise InvalidArgumentError("this atomic batch was already committed")
        if len(self._members) >= MAX_BATCH_MESSAGES:
            raise InvalidArgumentError(f"an atomic batch holds at most {MAX_BATCH_MESSAGES} messages")
        entry = {"subject": subject, "data": payload, "headers": headers, "msg_id": msg_id}
        self._members.append(member(entry, len(self._members)))

    def __len__(self) -> int:
        return len(self._members)

    def commit(self) -> BatchAck:
        """Publish the batch: every message of it is stored, or none is.  Called again, the same ack.

        Returns:
            The batch's ack (kept in :attr:`ack` too).

        Raises:
            InvalidArgumentError: No message, or one over the server's ``max_payload``; nothing was sent.
            BatchNotEnabledError: The stream does not take atomic batches (it needs ``allow_atomic``).
            BatchDuplicateMsgIdError: A message's ``msg_id`` is in the stream already.
            BatchTooLargeError: More messages than the server allows.
            BatchTooManyInflightError: The stream or server has too many batches open; try again later.
            BatchIncompleteError: The server abandoned the batch; sending it again is safe.
            BatchPublishError: Any other refusal of the batch (none of its messages was stored).
            BatchInterruptedError: The connection broke during the batch and the commit was not answered in
                time; read the stream before sending it again.
            NoStreamResponseError: No stream stores the subject of the last message.
            TimeoutError: No ack within the batch's timeout; the batch may still have been stored.
            ConnectionClosedError: The connection is closed or draining.
            ReconnectBufferFullError: Reconnecting, and the batch does not fit the reconnect buffer.
        """
        if self.ack is not None:
            return self.ack
        if not self._members:
            raise InvalidArgumentError("an atomic batch needs at least one message to commit")
        js = self._js
        self.ack = send_batch(js, self._members, batch_id=new_batch_id(), timeout=self._timeout)
        return self.ack

    def __enter__(self) -> AtomicBatch:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            self.commit()
        else:
            self._members.clear()  # abandoned: nothing was sent
