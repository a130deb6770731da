"""Pure classification of JetStream status messages (ADR-15 "Automatic Status Management").

No I/O, no threads: a status message goes in, a :class:`Status` comes out,
and :func:`reply_error` is the one status → error mapping of every
JetStream reply.  The status lines the server sends, and who decides what
each does: docs/guides/internals.rst, "JetStream statuses".
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from ..errors import (
    BadRequestError,
    ConsumerDeletedError,
    ConsumerIsPushBasedError,
    Error,
    JetStreamAPIError,
    JetStreamStatusError,
    LeadershipChangeError,
    MaxBytesExceededError,
    MaxRequestBatchExceededError,
    MaxRequestExpiresExceededError,
    MaxWaitingExceededError,
    MessageNotFoundError,
    NoRespondersError,
    NoRespondersStatusError,
    NoStreamResponseError,
    ServerShutdownError,
    TooManySubjectsError,
)
from ..headers import parse, status_of
from ..protocol import MsgEvent


class Kind(enum.Enum):
    MESSAGE = "message"
    HEARTBEAT = "heartbeat"
    FLOW_CONTROL = "flow_control"
    NO_MESSAGES = "no_messages"  # 404
    REQUEST_TIMEOUT = "request_timeout"  # 408 (Request Timeout, Interest Expired)
    END_OF_BATCH = "end_of_batch"  # 204 (direct get)
    MAX_BYTES = "max_bytes"  # 409 Message Size Exceeds MaxBytes
    BATCH_COMPLETED = "batch_completed"  # 409 Batch Completed
    WRONG_PIN = "wrong_pin"  # 423 Nats-Wrong-Pin-Id
    REQUEST_LOST = "request_lost"  # 409 Leadership Change / Server Shutdown: the request died, the consumer lives
    BUSY = "busy"  # 409 Exceeded MaxWaiting, 503: no room or nobody to answer right now
    CONSUMER_DELETED = "consumer_deleted"  # 409 Consumer Deleted
    ERROR = "error"  # 400, 409 Consumer is push based, 409 Exceeded MaxRequest*, anything unknown


class Status(NamedTuple):
    kind: Kind
    code: int
    description: str
    #: The subject to answer: a flow-control request's reply, or a stalled heartbeat's header.
    flow_control_subject: str | None = None
    last_consumer: int | None = None
    last_stream: int | None = None
    pending_msgs: int | None = None
    pending_bytes: int | None = None


NO_STATUS = Status(Kind.MESSAGE, 0, "")


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def classify(msg: MsgEvent) -> Status:
    """What a delivered message is: a user message or one of the statuses above."""
    return classify_header(msg.header, msg.reply)


def classify_header(header: bytes | None, reply: str | None = None) -> Status:
    """:func:`classify` for a bare header block (and the reply subject it came with)."""
    code = status_of(header)
    if code is None:
        return NO_STATUS
    assert header is not None
    headers = parse(header)
    desc = headers.description
    lowered = desc.lower()
    if code == 100:
        if "flow" in lowered:
            return Status(Kind.FLOW_CONTROL, code, desc, flow_control_subject=reply or None)
        return Status(
            Kind.HEARTBEAT,
            code,
            desc,
            flow_control_subject=headers.get("Nats-Consumer-Stalled") or None,
            last_consumer=_int(headers.get("Nats-Last-Consumer")),
            last_stream=_int(headers.get("Nats-Last-Stream")),
        )
    kind = _conflict(desc)[0] if code == 409 else _BY_CODE.get(code, Kind.ERROR)
    return Status(
        kind, code, desc,
        pending_msgs=_int(headers.get("Nats-Pending-Messages")),
        pending_bytes=_int(headers.get("Nats-Pending-Bytes")),
    )


_BY_CODE = {
    404: Kind.NO_MESSAGES, 408: Kind.REQUEST_TIMEOUT, 204: Kind.END_OF_BATCH, 423: Kind.WRONG_PIN, 503: Kind.BUSY,
}
#: The one table of 409 reasons: what each is to a workflow, and its error when it ends one.
_CONFLICTS: tuple[tuple[str, Kind, type[JetStreamStatusError]], ...] = (
    ("message size exceeds maxbytes", Kind.MAX_BYTES, MaxBytesExceededError),
    ("batch completed", Kind.BATCH_COMPLETED, JetStreamStatusError),
    ("leadership change", Kind.REQUEST_LOST, LeadershipChangeError),
    ("server shutdown", Kind.REQUEST_LOST, ServerShutdownError),
    ("exceeded maxwaiting", Kind.BUSY, MaxWaitingExceededError),
    ("consumer deleted", Kind.CONSUMER_DELETED, ConsumerDeletedError),
    ("consumer is push based", Kind.ERROR, ConsumerIsPushBasedError),
    ("exceeded maxrequestbatch", Kind.ERROR, MaxRequestBatchExceededError),
    ("exceeded maxrequestexpires", Kind.ERROR, MaxRequestExpiresExceededError),
    ("exceeded maxrequestmaxbytes", Kind.ERROR, MaxBytesExceededError),
)


def _conflict(description: str) -> tuple[Kind, type[JetStreamStatusError]]:
    lowered = description.lower()
    return next(((kind, cls) for needle, kind, cls in _CONFLICTS if needle in lowered),
                (Kind.ERROR, JetStreamStatusError))


#: Subjects one multi-subject direct get may name (the server answers more with a 413).
MAX_MULTI_SUBJECTS = 1024


class Request(enum.Enum):
    """What a status answered: one code means something else to each (a 503 to a publish: no stream)."""

    CONSUME = "consume"  # a message a consumer delivers, or the end of a pull
    DIRECT_GET = "direct get"  # a direct get's reply, or the end of its batch
    PUBLISH = "publish"  # a JetStream publish's ack


def reply_error(status: Status, request: Request, target: str) -> Error:
    """The exception for an error status ending ``request`` on ``target`` (a stream, or a publish's subject).

    Every JetStream reply's status goes through here.  A direct get nobody
    answered (:class:`~jsclient.NoRespondersError`, as the core raises it) is
    explained by :func:`.direct.no_direct` where a JetStream is at hand (it
    looks the stream up: I/O this module does not do).
    """
    if request is Request.CONSUME:
        return _consumer_error(status)
    code, description = status.code, status.description
    if request is Request.PUBLISH:
        if code == 503:
            return no_stream(target)
        return JetStreamAPIError(code, 0, f"publish to {target!r}: {description or f'status {code}'}")
    if code == 404:
        return MessageNotFoundError(404, 10037, description or "no message found")
    if code == 408:
        return BadRequestError(408, 10003, f"direct get on {target!r}: {description or 'bad request'}")
    if code == 413:
        return TooManySubjectsError(
            413, 0, f"direct get on {target!r}: {description or 'too many subjects'} (at most {MAX_MULTI_SUBJECTS})"
        )
    if code == 503:  # explained by .direct.no_direct where a JetStream is at hand
        return NoRespondersError(f"no direct get responder for stream {target!r}")
    return JetStreamAPIError(code, 0, f"direct get on {target!r}: {description or f'status {code}'}")


def no_stream(subject: str) -> NoStreamResponseError:
    """The error of a JetStream publish nobody answered (503): no stream stores ``subject`` ("": not known)."""
    to = f" to {subject!r}" if subject else ""
    return NoStreamResponseError(
        f"no stream answered a publish{to}: no stream stores that subject, or JetStream is unavailable"
    )


def _consumer_error(status: Status) -> JetStreamStatusError:
    """The exception for a status that ends a consumer's workflow (:data:`Request.CONSUME`)."""
    if status.code == 503:
        return NoRespondersStatusError(status.code, status.description or "No Responders")
    if status.code == 409:
        return _conflict(status.description)[1](status.code, status.description)
    return JetStreamStatusError(status.code, status.description)
