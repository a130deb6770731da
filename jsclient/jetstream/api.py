"""JetStream API: the replies to its requests and how they are read, and the one place the models
are imported from.

Pure data and codecs, no I/O, no threads.  The models live by topic and are re-exported here, so
``from .api import StreamConfig`` and ``api.X`` keep working:

* :mod:`.apicodec`: :class:`Duration`, the models' base and their JSON codec (:func:`encode`,
  :func:`decode`, :func:`encode_body`, :func:`replace`);
* :mod:`.apienums`: the values of the enum-like fields (:class:`AckPolicy` ...);
* :mod:`.streamtypes` and :mod:`.consumertypes`: the configs and infos of streams and consumers;
* :mod:`.validation`: the checks of requests (:func:`validate_stream_config`,
  :func:`validate_consumer_config`, :func:`check_name` ...).

This module holds the rest: the account's info, publish acks, stored messages, the envelopes and
pages of management replies, and their decoding (:func:`decode_reply` raises the error a reply
carries).  Conventions, for all of them:

* A request field the caller did not set is ``msgspec.UNSET`` and is not
  sent, so the server applies its own default (a Python default the server
  never sees would silently differ from it).
* Durations are float seconds in Python (:class:`Duration`, a ``float``)
  and integer nanoseconds on the wire; plain floats given by callers are
  normalised in ``__post_init__``.
* Times are timezone-aware datetimes.
* Enum-like fields are plain strings (constants in :mod:`.apienums`), so a newer server
  never breaks decoding.  A field the models do not know, in a reply,
  is kept on the object it came with (``unknown_fields``) and sent back
  when that object is: ``update_stream(js.stream_info(name).config)``
  changes nothing it did not mean to, whatever the server's version.
  Requests are checked with :func:`validate_stream_config` /
  :func:`validate_consumer_config` before anything is sent.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from ..errors import JetStreamAPIError, MsgIdInProcessError, RequestOutcome, WrongLastSequenceError, api_error
from ..protocol import MsgEvent, ReplyShape, reply_pattern
from .apicodec import Duration, ReplyStruct, attach_unknown, decode, encode, encode_body, replace
from .apienums import (
    AckPolicy,
    DeliverPolicy,
    DiscardPolicy,
    PersistMode,
    PriorityPolicy,
    ReplayPolicy,
    RetentionPolicy,
    StorageType,
    StoreCompression,
)
from .consumertypes import (
    ConsumerConfig,
    ConsumerInfo,
    ConsumerPause,
    ConsumerResetInfo,
    PriorityGroupState,
    SequenceInfo,
)
from .streamtypes import (
    ClusterInfo,
    ExternalStream,
    LostStreamData,
    PeerInfo,
    Placement,
    RePublish,
    StreamAlternate,
    StreamConfig,
    StreamConsumerLimits,
    StreamConsumerSource,
    StreamInfo,
    StreamSource,
    StreamSourceInfo,
    StreamState,
    SubjectTransform,
)
from .validation import (
    MIN_IDLE_HEARTBEAT,
    MIN_MESSAGE_TTL,
    check_group,
    check_name,
    merge_config,
    validate_consumer_config,
    validate_stream_config,
)

__all__ = [
    "MIN_IDLE_HEARTBEAT",
    "MIN_MESSAGE_TTL",
    "APIErrorBody",
    "APIStats",
    "AccountInfo",
    "AccountLimits",
    "AckPolicy",
    "AckReply",
    "ClusterInfo",
    "ConsumerConfig",
    "ConsumerInfo",
    "ConsumerListPage",
    "ConsumerNamesPage",
    "ConsumerPause",
    "ConsumerResetInfo",
    "DeliverPolicy",
    "DiscardPolicy",
    "Duration",
    "ExternalStream",
    "LostStreamData",
    "MsgGetReply",
    "PeerInfo",
    "PersistMode",
    "Placement",
    "PriorityGroupState",
    "PriorityPolicy",
    "PubAck",
    "PurgeReply",
    "RePublish",
    "ReplayPolicy",
    "RetentionPolicy",
    "SequenceInfo",
    "StorageType",
    "StoreCompression",
    "StoredMsg",
    "StreamAlternate",
    "StreamConfig",
    "StreamConsumerLimits",
    "StreamConsumerSource",
    "StreamInfo",
    "StreamInfoPaged",
    "StreamListPage",
    "StreamNamesPage",
    "StreamSource",
    "StreamSourceInfo",
    "StreamState",
    "SubjectTransform",
    "SuccessReply",
    "check_error",
    "check_group",
    "check_name",
    "decode",
    "decode_ack",
    "decode_counter",
    "decode_pub_ack",
    "decode_reply",
    "encode",
    "encode_body",
    "merge_config",
    "pub_ack_shape",
    "read_pub_ack",
    "replace",
    "validate_consumer_config",
    "validate_stream_config",
]

T = TypeVar("T")


class AccountLimits(ReplyStruct):
    """What JetStream allows the account; -1 means no limit.

    Attributes:
        max_memory: The most bytes all its memory streams may hold.
        max_storage: The most bytes all its file streams may hold.
        max_streams: The most streams it may have.
        max_consumers: The most consumers it may have.
        max_ack_pending: The highest ``max_ack_pending`` a consumer of it may have.
        memory_max_stream_bytes: The highest ``max_bytes`` a memory stream of it may have.
        storage_max_stream_bytes: The highest ``max_bytes`` a file stream of it may have.
        max_bytes_required: Whether every stream of it must set ``max_bytes``.
    """

    max_memory: int = 0
    max_storage: int = 0
    max_streams: int = 0
    max_consumers: int = 0
    max_ack_pending: int = 0
    memory_max_stream_bytes: int = 0
    storage_max_stream_bytes: int = 0
    max_bytes_required: bool = False


class APIStats(ReplyStruct):
    """The account's use of the JetStream API, as counted by the server that answered.

    Attributes:
        total: How many API requests it has made.
        errors: How many of them the server answered with an error.
        level: The JetStream API level of that server (server 2.11+; 0 from older ones): which features it
            has.
    """

    total: int = 0
    errors: int = 0
    level: int = 0


class AccountInfo(ReplyStruct):
    """What JetStream says of the account: what it uses, and what it may use.

    Attributes:
        memory: Bytes held by its memory streams.
        storage: Bytes held by its file streams.
        streams: How many streams it has.
        consumers: How many consumers it has.
        limits: What it may use.
        api: Its use of the JetStream API.
        domain: The JetStream domain that answered, if it has one.
    """

    memory: int = 0
    storage: int = 0
    streams: int = 0
    consumers: int = 0
    limits: AccountLimits = msgspec.field(default_factory=AccountLimits)
    api: APIStats = msgspec.field(default_factory=APIStats)
    domain: str | None = None


class PubAck(msgspec.Struct, kw_only=True, gc=False):
    """The server's acknowledgement of a JetStream publish.

    Attributes:
        stream: The stream that stored the message.
        seq: The sequence it got there.
        duplicate: Whether the stream had already stored a message with the same ``Nats-Msg-Id`` within its
            duplicate window, so did not store this one again; ``seq`` is then the earlier message's.
        domain: The stream's JetStream domain, if it has one.
        val: On a counter stream: the counter's new total, as text (it may exceed 64 bits); else None.
    """

    stream: str
    seq: int
    duplicate: bool = False
    domain: str | None = None
    val: str | None = None


class APIErrorBody(msgspec.Struct):
    code: int = 0
    err_code: int = 0
    description: str = ""


class _ErrorEnvelope(msgspec.Struct):
    error: APIErrorBody | None = None


class AckReply(msgspec.Struct):
    """A reply that is either an error object or an ack (publish, batch commit)."""

    error: APIErrorBody | None = None


AckT = TypeVar("AckT", bound=AckReply)


class _PubAckReply(AckReply, kw_only=True):
    stream: str = ""
    seq: int = 0
    duplicate: bool = False
    domain: str | None = None
    val: str | None = None


class StoredMsg(msgspec.Struct, kw_only=True):
    """A message as STREAM.MSG.GET returns it (headers and data base64-encoded on the wire).

    Attributes:
        subject: The subject it was published on.
        seq: Its sequence in the stream.
        data: Its body.
        hdrs: Its headers, as the raw header block (``NATS/1.0`` and the header lines), or None when it has
            none.
        time: When the stream stored it.
    """

    subject: str
    seq: int
    data: bytes = b""
    hdrs: bytes | None = None
    time: dt.datetime | None = None


# The envelopes of management replies, read by context.py (internal: not exported by jsclient).


class MsgGetReply(msgspec.Struct):
    message: StoredMsg


class SuccessReply(msgspec.Struct):
    success: bool = False


class PurgeReply(msgspec.Struct):
    success: bool = False
    purged: int = 0


class _Page(msgspec.Struct):
    total: int = 0
    offset: int = 0
    limit: int = 0


class StreamNamesPage(_Page):
    streams: list[str] | None = None


class StreamListPage(_Page):
    streams: list[StreamInfo] | None = None


class ConsumerNamesPage(_Page):
    consumers: list[str] | None = None


class ConsumerListPage(_Page):
    consumers: list[ConsumerInfo] | None = None


class StreamInfoPaged(StreamInfo, kw_only=True):
    total: int = 0
    offset: int = 0
    limit: int = 0


def check_error(data: bytes) -> None:
    """Raise the API error a reply carries, if any."""
    if b'"error"' in data:
        envelope = msgspec.json.decode(data, type=_ErrorEnvelope)
        if envelope.error is not None:
            e = envelope.error
            raise api_error(e.code, e.err_code, e.description)


def decode_reply(data: bytes, kind: type[T]) -> T:
    """Decode an API reply, raising its error instead when it has one.

    Fields the models do not declare are kept on the objects they belong to
    (a second, untyped decode: management calls only, never a hot path).
    """
    check_error(data)
    try:
        reply = decode(data, kind)
    except msgspec.ValidationError as exc:
        raise JetStreamAPIError(0, 0, f"unexpected JetStream API reply ({exc}): {data[:200]!r}") from None
    if isinstance(reply, msgspec.Struct):
        attach_unknown(reply, msgspec.json.decode(data))
    return reply


_decode_plain_ack = msgspec.json.Decoder(PubAck).decode


def decode_ack(data: bytes, kind: type[AckT], what: str) -> AckT:
    """An ack-shaped reply (an error object or the fields of ``kind``): raises the server's error by its code."""
    try:
        reply = msgspec.json.decode(data, type=kind)
    except (msgspec.ValidationError, msgspec.DecodeError):
        raise JetStreamAPIError(0, 0, f"unexpected {what}: {data[:200]!r}") from None
    if reply.error is not None:
        e = reply.error
        raise api_error(e.code, e.err_code, e.description)
    return reply


def read_pub_ack(data: bytes) -> PubAck | None:
    """The one quick check of a publish ack, for readers that run as it arrives and must not raise: the
    common plain ack, decoded at once; None for anything else, which :func:`decode_pub_ack` names."""
    if b'"error"' in data:
        return None
    try:
        ack = _decode_plain_ack(data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    return None if ack.duplicate and not ack.seq else ack


#: A publish ack's frame: a plain MSG (a status, with headers, goes the general way).
_PUB_ACK_FRAME = reply_pattern(None)


def _read_pub_ack_frame(groups: tuple[bytes, ...]) -> PubAck | None:
    return read_pub_ack(groups[1])  # a MSG frame's groups: (size, payload)


def pub_ack_shape(decode: Callable[[MsgEvent], PubAck]) -> ReplyShape[PubAck]:
    """A publish ack as its publisher reads it on arrival, with :func:`read_pub_ack`; ``decode`` takes
    what that leaves (:func:`decode_pub_ack`, and whatever the publisher adds)."""
    return ReplyShape(_PUB_ACK_FRAME, _read_pub_ack_frame, decode=decode, headers=False)


def decode_pub_ack(data: bytes) -> PubAck:
    """A publish's ack, or the server's error by its code: :func:`read_pub_ack`, and what it leaves named.

    A duplicate of sequence 0 stored nothing: nats-server before 2.11
    answers so a publish whose ``Nats-Msg-Id`` an earlier try still holds
    (proposed, not yet stored, and it may never be), where 2.11 and newer
    refuse it with 10158.  Both raise :class:`~jsclient.MsgIdInProcessError`:
    taken as an ack, it would call stored a message that may be lost.
    """
    ack = read_pub_ack(data)
    if ack is not None:
        return ack
    if b'"error"' not in data:  # refused by the quick check: bytes that are no ack, or a duplicate of sequence 0
        try:
            ack = _decode_plain_ack(data)
        except (msgspec.ValidationError, msgspec.DecodeError):
            raise JetStreamAPIError(0, 0, f"unexpected publish ack: {data[:200]!r}") from None
    else:
        reply = decode_ack(data, _PubAckReply, "publish ack")
        if not reply.stream:
            raise JetStreamAPIError(0, 0, f"publish ack without a stream: {data[:200]!r}")
        ack = PubAck(stream=reply.stream, seq=reply.seq, duplicate=reply.duplicate, domain=reply.domain,
                     val=reply.val)
    if ack.duplicate and not ack.seq:
        raise MsgIdInProcessError(
            409, 10158, "duplicate message id is in process (a duplicate ack of sequence 0, as nats-server before "
            "2.11 answers while an earlier publish with this id is not yet stored)"
        )
    return ack


def conditional_refusal(exc: WrongLastSequenceError, server_info: dict[str, Any]) -> None:
    """Give ``exc``, a refused expectation (10071, 10164), the outcome it really has from this server.

    In a cluster a leader cut off from its peers goes on answering for
    seconds after the others have elected a new one (nats-server steps a
    leader down only once it has missed its quorum for 10 s; followers vote
    after 4 to 9 s).  A publish it receives also reaches the new leader over
    the routes: the deposed one refuses it from its stale state while the new
    one stores it, and whichever answer comes first is the one a client sees.
    So a refusal is definite only from a server outside any cluster.
    """
    if server_info.get("cluster"):
        exc.outcome = RequestOutcome.UNKNOWN


class _CounterValue(msgspec.Struct):
    val: str


_COUNTER_DECODER = msgspec.json.Decoder(_CounterValue)


def decode_counter(data: bytes, subject: str) -> int:
    """A counter's total from its last message's body, {"val": "<digits>"} (ADR-49: text, so any size)."""
    try:
        return int(_COUNTER_DECODER.decode(data).val)
    except (msgspec.ValidationError, msgspec.DecodeError, ValueError):
        raise JetStreamAPIError(0, 0, f"{subject!r} does not hold a counter: {data[:200]!r}") from None

