"""Delivery metadata parsed from a JetStream ack reply subject (ADR-15, "JSAck").

Pure functions over strings; any thread.  Two forms exist:

* v1, exactly 9 tokens:
  ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>``
* v2, 11 or more tokens (later servers may append more):
  ``$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>...``

The domain token ``_`` means "no domain" and is exposed as ``None``.
"""

from __future__ import annotations

import datetime as dt
from typing import NamedTuple

from ..errors import BadAckSubjectError

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class SequencePair(NamedTuple):
    """A message's two sequence numbers: in its stream, and in its consumer's deliveries."""

    #: The message's sequence in the stream (the first message stored is 1).
    stream: int
    #: The consumer's delivery sequence, which counts every delivery of the consumer, redeliveries included.
    consumer: int


class MsgMetadata(NamedTuple):
    """Where a JetStream message sits in its stream and consumer."""

    #: Its stream sequence and its consumer's delivery sequence.
    sequence: SequencePair
    #: How many times the consumer has delivered it, this delivery included (1 the first time).
    num_delivered: int
    #: How many messages the consumer still has to deliver after this one.
    num_pending: int
    #: When the stream stored it, in nanoseconds since the Unix epoch (see :attr:`timestamp`).
    timestamp_ns: int
    #: The stream's name.
    stream: str
    #: The consumer's name.
    consumer: str
    #: The JetStream domain, or None when the ack subject names none.
    domain: str | None

    @property
    def timestamp(self) -> dt.datetime:
        """When the stream stored the message (UTC, microsecond precision)."""
        return _EPOCH + dt.timedelta(microseconds=self.timestamp_ns // 1000)


def is_ack_subject(reply: str | None) -> bool:
    return reply is not None and reply.startswith("$JS.ACK.")


def ack_sequences(reply: str | None) -> tuple[int, int] | None:
    """(consumer sequence, stream sequence) of an ack subject, or None; cheap enough for the reader thread."""
    if reply is None or not reply.startswith("$JS.ACK."):
        return None
    tokens = reply.split(".")
    n = len(tokens)
    base = 2 if n == 9 else 4 if n >= 11 else -1  # where <stream> sits
    if base < 0:
        return None
    try:
        return int(tokens[base + 4]), int(tokens[base + 3])
    except ValueError:
        return None


def _number(reply: str, token: str, what: str) -> int:
    if not token.isdigit() or not token.isascii():
        raise BadAckSubjectError(f"ack subject {reply!r}: {what} {token!r} is not a number")
    return int(token)


def parse_metadata(reply: str | None) -> MsgMetadata:
    """Parse an ack subject; raise BadAckSubjectError for anything else."""
    if not isinstance(reply, str) or not reply.startswith("$JS.ACK."):
        raise BadAckSubjectError(f"not a JetStream message: reply subject {reply!r} is not a $JS.ACK subject")
    tokens = reply.split(".")
    n = len(tokens)
    if n == 9:
        domain: str | None = None
        fields = tokens[2:9]
    elif n >= 11:
        domain = tokens[2]
        if not domain:
            raise BadAckSubjectError(f"ack subject {reply!r} has an empty domain token")
        if domain == "_":
            domain = None
        fields = tokens[4:11]
    else:
        raise BadAckSubjectError(f"ack subject {reply!r} has {n} tokens; expected 9, or 11 or more")
    stream, consumer, delivered, sseq, cseq, ts, pending = fields
    if not stream or not consumer:
        raise BadAckSubjectError(f"ack subject {reply!r} has an empty stream or consumer name")
    return MsgMetadata(
        sequence=SequencePair(_number(reply, sseq, "stream sequence"), _number(reply, cseq, "consumer sequence")),
        num_delivered=_number(reply, delivered, "delivery count"),
        num_pending=_number(reply, pending, "pending count"),
        timestamp_ns=_number(reply, ts, "timestamp"),
        stream=stream,
        consumer=consumer,
        domain=domain,
    )
