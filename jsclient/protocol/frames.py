"""Encoders: every frame the client sends, and the checks of the subjects that go into them.

The general encoders (``encode_*``) take ``str`` subjects and check nothing;
the ``*_frame`` ones take subjects already checked and encoded, for loops
that frame many messages (batch publish, the Spark sink, bulk reads).  The
``bytes`` templates are for the hottest loops (request(), a fast-ingest
batch), which format a cached head and a few numbers and nothing else.  The
header blocks those frames carry are built in :mod:`jsclient.headers`.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from ..errors import BadSubjectError, MaxPayloadError

CRLF = b"\r\n"
PING = b"PING\r\n"
PONG = b"PONG\r\n"


# -- subjects --------------------------------------------------------------

_WHITESPACE = (" ", "\t", "\r", "\n")


def _check_tokens(subject: str, what: str) -> list[str]:
    if not isinstance(subject, str):
        raise BadSubjectError(f"{what} must be a str, not {type(subject).__name__}")
    if not subject:
        raise BadSubjectError(f"{what} must not be empty")
    for ch in _WHITESPACE:
        if ch in subject:
            raise BadSubjectError(f"{what} {subject!r} contains whitespace")
    tokens = subject.split(".")
    if "" in tokens:
        raise BadSubjectError(f"{what} {subject!r} has an empty token")
    return tokens


def check_publish_subject(subject: str, what: str = "subject") -> None:
    """A subject we may publish to: no wildcard tokens."""
    for token in _check_tokens(subject, what):
        if token == "*" or token == ">":
            raise BadSubjectError(f"{what} {subject!r} contains a wildcard; publish needs a literal subject")


def check_subscribe_subject(subject: str, what: str = "subject") -> None:
    """A subject we may subscribe to: ``*`` tokens anywhere, ``>`` only last."""
    tokens = _check_tokens(subject, what)
    for token in tokens[:-1]:
        if token == ">":
            raise BadSubjectError(f"{what} {subject!r}: '>' must be the last token")


def check_queue_name(queue: str) -> None:
    if not isinstance(queue, str):
        raise BadSubjectError(f"queue must be a str, not {type(queue).__name__}")
    if not queue:
        raise BadSubjectError("queue must not be empty")
    for ch in _WHITESPACE:
        if ch in queue:
            raise BadSubjectError(f"queue {queue!r} contains whitespace")


# -- encoders --------------------------------------------------------------


def encode_connect(options: dict[str, Any]) -> bytes:
    return b"CONNECT " + json.dumps(options, separators=(",", ":")).encode() + CRLF


def encode_sub(subject: str, sid: int, queue: str | None = None) -> bytes:
    if queue:
        return b"SUB %s %s %d\r\n" % (subject.encode(), queue.encode(), sid)
    return b"SUB %s %d\r\n" % (subject.encode(), sid)


def encode_unsub(sid: int, max_msgs: int | None = None) -> bytes:
    if max_msgs:
        return b"UNSUB %d %d\r\n" % (sid, max_msgs)
    return b"UNSUB %d\r\n" % sid


_PUB = b"PUB %s %d\r\n%s\r\n"  # subject, payload size, payload
_PUB_REPLY = b"PUB %s %s %d\r\n%s\r\n"  # subject, reply, payload size, payload


def encode_pub(subject: str, payload: bytes, reply: str | None = None) -> bytes:
    # Not through pub_frame: every ack is framed here, and a call more would cost an ack a sixth more.
    if reply:
        return _PUB_REPLY % (subject.encode(), reply.encode(), len(payload), payload)
    return _PUB % (subject.encode(), len(payload), payload)


def encode_hpub(subject: str, header: bytes, payload: bytes, reply: str | None = None) -> bytes:
    return hpub_frame(subject.encode(), header, payload, reply.encode() if reply else b"")


def pub_frame(subject: bytes, payload: bytes, reply: bytes = b"") -> bytes:
    """A PUB frame of a subject (and reply subject) already checked and encoded."""
    if reply:
        return _PUB_REPLY % (subject, reply, len(payload), payload)
    return _PUB % (subject, len(payload), payload)


def hpub_frame(subject: bytes, header: bytes, payload: bytes, reply: bytes = b"") -> bytes:
    """An HPUB frame of a subject (and reply subject) already checked and encoded; ``header`` is the block."""
    hlen = len(header)
    if reply:
        return b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subject, reply, hlen, hlen + len(payload), header, payload)
    return b"HPUB %s %d %d\r\n%s%s\r\n" % (subject, hlen, hlen + len(payload), header, payload)


#: A request's PUB line in two parts: a head cached per subject, then its reply token and size.
REQUEST_HEAD = b"PUB %s %s"  # subject, reply inbox prefix
REQUEST_LINE = b"%s%d %d\r\n"  # request head, reply token, payload size
REQUEST_FRAME = b"%s%d %d\r\n%s\r\n"  # the same with the payload: a whole frame in one step
#: The start of the reply's control line that :meth:`~jsclient.protocol.Parser.feed_reply` expects.
REPLY_LINE = b"MSG %s%d %d "  # reply inbox prefix, reply token, sid

#: A fast-ingest batch's message (ADR-50) has the batch's state in its reply subject: the batch's
#: reply prefix (``<inbox>.<id>.<flow>.<gaps>.``), the message's batch sequence, the operation, ``$FI``.
FAST_REPLY = b"%s%d.%d.$FI"  # reply prefix, batch sequence, operation
#: The send loop's frame of a plain message appended to the batch (operation 1), after its head
#: (REQUEST_HEAD of its subject and the reply prefix).
FAST_APPEND_FRAME = b"%s%d.1.$FI %d\r\n%s\r\n"  # head, batch sequence, payload size, payload


def encode_fast_ingest(subject: bytes, prefix: bytes, seq: int, op: int, header: bytes, payload: bytes) -> bytes:
    """A fast-ingest batch's message ``seq`` with operation ``op``; ``header`` its block, or empty."""
    reply = FAST_REPLY % (prefix, seq, op)
    return hpub_frame(subject, header, payload, reply) if header else pub_frame(subject, payload, reply)


#: Subjects remembered by a :class:`PubEncoder` (and the request heads beside it)
#: before the cache starts again: every request has a reply subject of its own,
#: and a responder must not keep one entry per request.
PREFIX_CACHE_MAX = 4096
K = TypeVar("K")
V = TypeVar("V")


def remember(cache: dict[K, V], key: K, value: V) -> V:
    """Keep ``value`` in a cache of checked subjects (or what is built of them), started again when full."""
    if len(cache) >= PREFIX_CACHE_MAX:
        cache.clear()
    cache[key] = value
    return value


class PubEncoder:
    """PUB/HPUB frames for one connection, with the caches that make a repeated subject cost one dict lookup.

    ``lines`` maps a subject to ``(payload size, PUB line)`` of its last
    plain publish (size -1: validated, no line yet); a subject is in it only
    once it passed :func:`check_publish_subject`.  Any thread may use it:
    dict reads and writes are atomic, and a race only builds a line twice.
    """

    __slots__ = ("lines", "max_payload", "own_inbox")

    def __init__(self) -> None:
        self.lines: dict[str, tuple[int, bytes]] = {}
        self.max_payload = 1024 * 1024
        self.own_inbox = "\0"  # replies under our own request inbox need no check

    def set_max_payload(self, max_payload: int) -> None:
        if max_payload != self.max_payload:
            self.max_payload = max_payload
            self.lines.clear()  # cached lines were checked against the old limit

    def check_once(self, subject: str) -> None:
        """Validate a subject not seen lately and remember it (at most PREFIX_CACHE_MAX of them)."""
        if subject not in self.lines:
            check_publish_subject(subject)
            remember(self.lines, subject, (-1, b""))

    def pub_line(self, subject: str, size: int) -> bytes:
        """The ``PUB <subject> <size>`` line, validated (once per subject) and cached for this size."""
        self.check_once(subject)
        if size > self.max_payload:
            raise MaxPayloadError(
                f"payload of {size} bytes exceeds the server's max_payload of {self.max_payload} bytes"
            )
        line = b"PUB %s %d\r\n" % (subject.encode(), size)
        self.lines[subject] = (size, line)
        return line

    def frame(self, subject: str, payload: bytes, reply: str | None, header: bytes) -> bytes:
        """A whole PUB (or HPUB, with an encoded ``header``) frame, everything checked."""
        if subject not in self.lines:
            self.check_once(subject)
        if reply is not None and reply not in self.lines and not reply.startswith(self.own_inbox):
            check_publish_subject(reply, "reply subject")
        size = len(payload) + len(header)
        if size > self.max_payload:
            raise MaxPayloadError(
                f"message of {size} bytes (headers included) exceeds the server's "
                f"max_payload of {self.max_payload} bytes"
            )
        if header:
            return encode_hpub(subject, header, payload, reply)
        return encode_pub(subject, payload, reply)
