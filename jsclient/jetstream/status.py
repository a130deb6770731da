"""Pure classification of JetStream status messages (ADR-15 "Automatic Status Management").

No I/O, no threads: a status message goes in, a :class:`Status` comes out,
and :func:`status_error` maps error statuses to exceptions.  The push and
pull workflows decide what to do with each kind.

Status lines seen from the server::

    NATS/1.0 100 Idle Heartbeat      (Nats-Last-Consumer, Nats-Last-Stream, maybe Nats-Consumer-Stalled)
    NATS/1.0 100 FlowControl Request (reply subject = the subject to answer)
    NATS/1.0 404 No Messages         (pull, no_wait)
    NATS/1.0 408 Request Timeout     (pull request expired; Nats-Pending-Messages/-Bytes)
    NATS/1.0 409 <reason>            (consumer deleted, push based, exceeded limits, ...)
    NATS/1.0 503                     (no responders)
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from ..errors import (
    ConsumerDeletedError,
    ConsumerIsPushBasedError,
    JetStreamStatusError,
    LeadershipChangeError,
    MaxBytesExceededError,
    MaxRequestBatchExceededError,
    MaxRequestExpiresExceededError,
    MaxWaitingExceededError,
    NoRespondersStatusError,
    ServerShutdownError,
)
from ..headers import parse, status_of
from ..protocol import MsgEvent


class Kind(enum.Enum):
    MESSAGE = "message"
    HEARTBEAT = "heartbeat"
    FLOW_CONTROL = "flow_control"
    NO_MESSAGES = "no_messages"  # 404
    REQUEST_TIMEOUT = "request_timeout"  # 408
    END_OF_BATCH = "end_of_batch"  # 204 (direct get)
    MAX_BYTES = "max_bytes"  # 409 Message Size Exceeds MaxBytes: a pull ends normally
    ERROR = "error"  # 409, 503, unknown


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


MESSAGE = Status(Kind.MESSAGE, 0, "")


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def classify(msg: MsgEvent) -> Status:
    """What a delivered message is: a user message or one of the statuses above."""
    code = status_of(msg.header)
    if code is None:
        return MESSAGE
    assert msg.header is not None
    headers = parse(msg.header)
    desc = headers.description
    lowered = desc.lower()
    if code == 100:
        if "flow" in lowered:
            return Status(Kind.FLOW_CONTROL, code, desc, flow_control_subject=msg.reply or None)
        return Status(
            Kind.HEARTBEAT,
            code,
            desc,
            flow_control_subject=headers.get("Nats-Consumer-Stalled") or None,
            last_consumer=_int(headers.get("Nats-Last-Consumer")),
            last_stream=_int(headers.get("Nats-Last-Stream")),
        )
    pending = (_int(headers.get("Nats-Pending-Messages")), _int(headers.get("Nats-Pending-Bytes")))
    if code == 404:
        return Status(Kind.NO_MESSAGES, code, desc, pending_msgs=pending[0], pending_bytes=pending[1])
    if code == 408:
        return Status(Kind.REQUEST_TIMEOUT, code, desc, pending_msgs=pending[0], pending_bytes=pending[1])
    if code == 204:
        return Status(Kind.END_OF_BATCH, code, desc, pending_msgs=pending[0], pending_bytes=pending[1])
    if code == 409 and "message size exceeds maxbytes" in lowered:
        return Status(Kind.MAX_BYTES, code, desc, pending_msgs=pending[0], pending_bytes=pending[1])
    return Status(Kind.ERROR, code, desc, pending_msgs=pending[0], pending_bytes=pending[1])


_CONFLICTS: tuple[tuple[str, type[JetStreamStatusError]], ...] = (
    ("consumer deleted", ConsumerDeletedError),
    ("consumer is push based", ConsumerIsPushBasedError),
    ("exceeded maxwaiting", MaxWaitingExceededError),
    ("exceeded maxrequestbatch", MaxRequestBatchExceededError),
    ("exceeded maxrequestexpires", MaxRequestExpiresExceededError),
    ("exceeded maxrequestmaxbytes", MaxBytesExceededError),
    ("leadership change", LeadershipChangeError),
    ("server shutdown", ServerShutdownError),
)


def status_error(status: Status) -> JetStreamStatusError:
    """The exception for an error status (409 reasons, 503, anything unknown)."""
    if status.code == 503:
        return NoRespondersStatusError(status.code, status.description or "No Responders")
    if status.code == 409:
        lowered = status.description.lower()
        for needle, cls in _CONFLICTS:
            if needle in lowered:
                return cls(status.code, status.description)
    return JetStreamStatusError(status.code, status.description)
