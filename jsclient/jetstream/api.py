"""JetStream API models: msgspec Structs with the server's JSON field names.

Pure data and codecs, no I/O, no threads.  Conventions:

* A request field the caller did not set is ``msgspec.UNSET`` and is not
  sent, so the server applies its own default (a Python default the server
  never sees would silently differ from it).
* Durations are float seconds in Python (:class:`Duration`, a ``float``)
  and integer nanoseconds on the wire; plain floats given by callers are
  normalised in ``__post_init__``.
* Times are timezone-aware datetimes.
* Enum-like fields are plain strings (constants below), so a newer server
  never breaks decoding.  A field this module does not know, in a reply,
  is kept on the object it came with (``unknown_fields``) and sent back
  when that object is: ``update_stream(js.stream_info(name).config)``
  changes nothing it did not mean to, whatever the server's version.
  Requests are checked with :func:`validate_stream_config` /
  :func:`validate_consumer_config` before anything is sent.
"""

from __future__ import annotations

import datetime as dt
import enum
import math
import re
from typing import Any, ClassVar, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from ..errors import InvalidArgumentError, JetStreamAPIError, api_error
from ..protocol import ReplyShape, reply_pattern

T = TypeVar("T")
S = TypeVar("S", bound="_Struct")


class Duration(float):
    """Seconds, sent to the server as integer nanoseconds."""

    __slots__ = ()

    def __repr__(self) -> str:
        return float.__repr__(self)

    @property
    def nanoseconds(self) -> int:
        return round(self * 1e9)


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, Duration):
        return obj.nanoseconds
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


def _dec_hook(kind: type, obj: Any) -> Any:
    if kind is Duration and isinstance(obj, (int, float)):
        return Duration(obj / 1e9)
    raise NotImplementedError(f"cannot decode {kind!r}")


_ENCODER = msgspec.json.Encoder(enc_hook=_enc_hook)


def encode(obj: Any) -> bytes:
    return _ENCODER.encode(obj)


def decode(data: bytes, kind: type[T]) -> T:
    return msgspec.json.decode(data, type=kind, dec_hook=_dec_hook)


class _Struct(msgspec.Struct, kw_only=True, omit_defaults=True, dict=True):
    """Base: keyword-only, unset fields omitted; durations normalised.

    ``dict=True`` gives each object room for the reply fields it does not
    declare (see :func:`decode_reply` and :func:`encode_body`).
    """

    _durations: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        for name in self._durations:
            value = getattr(self, name)
            if value is UNSET or value is None:
                continue
            if isinstance(value, list):
                setattr(self, name, [_as_duration(name, v) for v in value])
            else:
                setattr(self, name, _as_duration(name, value))

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form, with the fields the server sent that this class does not declare."""
        out: dict[str, Any] = msgspec.to_builtins(self, enc_hook=_enc_hook)
        _merge_unknown(self, out)
        return out

    @property
    def unknown_fields(self) -> dict[str, Any]:
        """Fields the server sent that this version of jsclient does not know (sent back unchanged)."""
        return dict(self.__dict__.get(_UNKNOWN, {}))


_UNKNOWN = "_unknown"


def _attach_unknown(obj: Any, raw: Any) -> None:
    """Keep, on each decoded object, the keys of its JSON object that it has no field for."""
    if isinstance(obj, msgspec.Struct):  # a _Struct, or a page or reply holding some
        if not isinstance(raw, dict):
            return
        names = obj.__struct_encode_fields__
        if isinstance(obj, _Struct):
            extra = {key: value for key, value in raw.items() if key not in names}
            if extra:
                obj.__dict__[_UNKNOWN] = extra
        for field, name in zip(obj.__struct_fields__, names, strict=True):
            _attach_unknown(getattr(obj, field), raw.get(name))
    elif isinstance(obj, list) and isinstance(raw, list):
        for item, raw_item in zip(obj, raw, strict=False):
            _attach_unknown(item, raw_item)


def _merge_unknown(obj: Any, out: Any) -> None:
    """Put the kept unknown keys back into ``out``, the builtins form of ``obj``."""
    if isinstance(obj, _Struct):
        if not isinstance(out, dict):
            return
        for key, value in obj.__dict__.get(_UNKNOWN, {}).items():
            out.setdefault(key, value)
        for field, name in zip(obj.__struct_fields__, obj.__struct_encode_fields__, strict=True):
            if name in out:
                _merge_unknown(getattr(obj, field), out[name])
    elif isinstance(obj, list) and isinstance(out, list):
        for item, out_item in zip(obj, out, strict=False):
            _merge_unknown(item, out_item)
    elif isinstance(obj, dict) and isinstance(out, dict):
        for key, value in obj.items():
            if isinstance(key, str) and key in out:
                _merge_unknown(value, out[key])


def replace(obj: S, **fields: Any) -> S:
    """``msgspec.structs.replace`` that keeps the unknown fields ``obj`` came with."""
    new = msgspec.structs.replace(obj, **fields)
    kept = obj.__dict__.get(_UNKNOWN)
    if kept:
        new.__dict__[_UNKNOWN] = dict(kept)
    return new


def encode_body(body: Any) -> bytes:
    """An API request body: like :func:`encode`, plus the unknown fields its objects came with."""
    out = msgspec.to_builtins(body, enc_hook=_enc_hook)
    _merge_unknown(body, out)
    return _ENCODER.encode(out)


class _Reply(_Struct, omit_defaults=False):
    """Base of response models: every field is kept when re-encoded (a zero is information)."""


def _as_duration(name: str, value: Any) -> Duration:
    if isinstance(value, Duration):
        return value
    if isinstance(value, dt.timedelta):
        return Duration(value.total_seconds())
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise InvalidArgumentError(f"{name} must be a number of seconds, not {value!r}")
    return Duration(value)


class _StrEnum(enum.StrEnum):
    pass


class RetentionPolicy(_StrEnum):
    LIMITS = "limits"
    INTEREST = "interest"
    WORK_QUEUE = "workqueue"


class StorageType(_StrEnum):
    FILE = "file"
    MEMORY = "memory"


class DiscardPolicy(_StrEnum):
    OLD = "old"
    NEW = "new"


class StoreCompression(_StrEnum):
    NONE = "none"
    S2 = "s2"


class DeliverPolicy(_StrEnum):
    ALL = "all"
    LAST = "last"
    NEW = "new"
    BY_START_SEQUENCE = "by_start_sequence"
    BY_START_TIME = "by_start_time"
    LAST_PER_SUBJECT = "last_per_subject"


class AckPolicy(_StrEnum):
    NONE = "none"
    ALL = "all"
    EXPLICIT = "explicit"
    FLOW_CONTROL = "flow_control"  # server 2.14+: acked by answering flow control


class PriorityPolicy(_StrEnum):
    """ADR-42 priority groups of a pull consumer (server 2.11+; prioritized 2.12+)."""

    NONE = "none"
    OVERFLOW = "overflow"
    PINNED_CLIENT = "pinned_client"
    PRIORITIZED = "prioritized"


class PersistMode(_StrEnum):
    """When a stream acks a publish: after the write is flushed (default) or before (async, 2.12+)."""

    DEFAULT = "default"
    ASYNC = "async"


class ReplayPolicy(_StrEnum):
    INSTANT = "instant"
    ORIGINAL = "original"


# -- streams -------------------------------------------------------------------


class Placement(_Struct):
    cluster: str | UnsetType = UNSET
    tags: list[str] | UnsetType = UNSET


class SubjectTransform(_Struct):
    src: str
    dest: str


class ExternalStream(_Struct):
    api: str
    deliver: str | UnsetType = UNSET


class StreamConsumerSource(_Struct):
    name: str | UnsetType = UNSET
    deliver_subject: str | UnsetType = UNSET


class StreamSource(_Struct):
    name: str
    opt_start_seq: int | UnsetType = UNSET
    opt_start_time: dt.datetime | UnsetType = UNSET
    filter_subject: str | UnsetType = UNSET
    subject_transforms: list[SubjectTransform] | UnsetType = UNSET
    external: ExternalStream | UnsetType = UNSET
    consumer: StreamConsumerSource | UnsetType = UNSET


class RePublish(_Struct):
    dest: str
    src: str | UnsetType = UNSET
    headers_only: bool | UnsetType = UNSET


class StreamConsumerLimits(_Struct):
    _durations: ClassVar[tuple[str, ...]] = ("inactive_threshold",)
    inactive_threshold: Duration | UnsetType = UNSET
    max_ack_pending: int | UnsetType = UNSET


class StreamConfig(_Struct):
    _durations: ClassVar[tuple[str, ...]] = ("max_age", "duplicate_window", "subject_delete_marker_ttl")
    name: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    subjects: list[str] | UnsetType = UNSET
    retention: str | UnsetType = UNSET
    max_consumers: int | UnsetType = UNSET
    max_msgs: int | UnsetType = UNSET
    max_bytes: int | UnsetType = UNSET
    max_age: Duration | UnsetType = UNSET
    max_msgs_per_subject: int | UnsetType = UNSET
    max_msg_size: int | UnsetType = UNSET
    discard: str | UnsetType = UNSET
    discard_new_per_subject: bool | UnsetType = UNSET
    storage: str | UnsetType = UNSET
    num_replicas: int | UnsetType = UNSET
    no_ack: bool | UnsetType = UNSET
    duplicate_window: Duration | UnsetType = UNSET
    placement: Placement | UnsetType = UNSET
    mirror: StreamSource | UnsetType = UNSET
    sources: list[StreamSource] | UnsetType = UNSET
    sealed: bool | UnsetType = UNSET
    deny_delete: bool | UnsetType = UNSET
    deny_purge: bool | UnsetType = UNSET
    allow_rollup_hdrs: bool | UnsetType = UNSET
    allow_direct: bool | UnsetType = UNSET
    mirror_direct: bool | UnsetType = UNSET
    republish: RePublish | UnsetType = UNSET
    compression: str | UnsetType = UNSET
    first_seq: int | UnsetType = UNSET
    subject_transform: SubjectTransform | UnsetType = UNSET
    consumer_limits: StreamConsumerLimits | UnsetType = UNSET
    metadata: dict[str, str] | UnsetType = UNSET
    # Server 2.11+ (API level 1): ADR-43 per-message TTL and subject delete markers.
    allow_msg_ttl: bool | UnsetType = UNSET
    subject_delete_marker_ttl: Duration | UnsetType = UNSET
    # Server 2.12+ (API level 2): ADR-49 counters, ADR-50 atomic batches, ADR-51 schedules, async persist.
    allow_msg_counter: bool | UnsetType = UNSET
    allow_atomic: bool | UnsetType = UNSET
    allow_msg_schedules: bool | UnsetType = UNSET
    persist_mode: str | UnsetType = UNSET
    # Server 2.14+ (API level 4): ADR-50 fast-ingest batches.
    allow_batched: bool | UnsetType = UNSET


class LostStreamData(_Reply):
    msgs: list[int] | None = None
    bytes: int = 0


class StreamState(_Reply):
    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    first_ts: dt.datetime | None = None
    last_seq: int = 0
    last_ts: dt.datetime | None = None
    consumer_count: int = 0
    deleted: list[int] | None = None
    num_deleted: int = 0
    num_subjects: int = 0
    subjects: dict[str, int] | None = None
    lost: LostStreamData | None = None


class PeerInfo(_Reply):
    _durations: ClassVar[tuple[str, ...]] = ("active",)
    name: str = ""
    current: bool = False
    offline: bool = False
    active: Duration = Duration(0)
    lag: int = 0


class ClusterInfo(_Reply):
    name: str | None = None
    leader: str | None = None
    replicas: list[PeerInfo] | None = None


class StreamSourceInfo(_Reply):
    _durations: ClassVar[tuple[str, ...]] = ("active",)
    name: str = ""
    lag: int = 0
    active: Duration = Duration(0)
    filter_subject: str | None = None
    external: ExternalStream | None = None


class StreamAlternate(_Reply):
    name: str = ""
    domain: str | None = None
    cluster: str = ""


class StreamInfo(_Reply):
    config: StreamConfig
    state: StreamState = msgspec.field(default_factory=StreamState)
    created: dt.datetime | None = None
    ts: dt.datetime | None = None
    domain: str | None = None
    cluster: ClusterInfo | None = None
    mirror: StreamSourceInfo | None = None
    sources: list[StreamSourceInfo] | None = None
    alternates: list[StreamAlternate] | None = None


# -- consumers -----------------------------------------------------------------


class ConsumerConfig(_Struct):
    _durations: ClassVar[tuple[str, ...]] = (
        "ack_wait",
        "idle_heartbeat",
        "max_expires",
        "inactive_threshold",
        "backoff",
        "priority_timeout",
    )
    name: str | UnsetType = UNSET
    durable_name: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    deliver_policy: str | UnsetType = UNSET
    opt_start_seq: int | UnsetType = UNSET
    opt_start_time: dt.datetime | UnsetType = UNSET
    ack_policy: str | UnsetType = UNSET
    ack_wait: Duration | UnsetType = UNSET
    max_deliver: int | UnsetType = UNSET
    backoff: list[Duration] | UnsetType = UNSET
    filter_subject: str | UnsetType = UNSET
    filter_subjects: list[str] | UnsetType = UNSET
    replay_policy: str | UnsetType = UNSET
    rate_limit_bps: int | UnsetType = UNSET
    sample_freq: str | UnsetType = UNSET
    max_waiting: int | UnsetType = UNSET
    max_ack_pending: int | UnsetType = UNSET
    flow_control: bool | UnsetType = UNSET
    idle_heartbeat: Duration | UnsetType = UNSET
    headers_only: bool | UnsetType = UNSET
    max_batch: int | UnsetType = UNSET
    max_expires: Duration | UnsetType = UNSET
    max_bytes: int | UnsetType = UNSET
    inactive_threshold: Duration | UnsetType = UNSET
    num_replicas: int | UnsetType = UNSET
    mem_storage: bool | UnsetType = UNSET
    deliver_subject: str | UnsetType = UNSET
    deliver_group: str | UnsetType = UNSET
    metadata: dict[str, str] | UnsetType = UNSET
    # Server 2.11+ (API level 1): a paused consumer delivers nothing until then (aware datetime).
    pause_until: dt.datetime | UnsetType = UNSET
    # Server 2.11+ (API level 1): ADR-42 priority groups of a pull consumer.
    priority_groups: list[str] | UnsetType = UNSET
    priority_policy: str | UnsetType = UNSET
    priority_timeout: Duration | UnsetType = UNSET  # how long a pin lasts without pulls


class SequenceInfo(_Reply):
    consumer_seq: int = 0
    stream_seq: int = 0
    last_active: dt.datetime | None = None


class PriorityGroupState(_Reply):
    """A priority group of a consumer: who holds its pin, since when (None when nobody does)."""

    group: str = ""
    pinned_client_id: str | None = None
    pinned_ts: dt.datetime | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pinned_ts is not None and self.pinned_ts.year == 1:
            self.pinned_ts = None  # the server sends Go's zero time


class ConsumerInfo(_Reply):
    stream_name: str
    name: str
    config: ConsumerConfig
    created: dt.datetime | None = None
    delivered: SequenceInfo = msgspec.field(default_factory=SequenceInfo)
    ack_floor: SequenceInfo = msgspec.field(default_factory=SequenceInfo)
    num_ack_pending: int = 0
    num_redelivered: int = 0
    num_waiting: int = 0
    num_pending: int = 0
    cluster: ClusterInfo | None = None
    push_bound: bool = False
    paused: bool = False
    pause_remaining: Duration | None = None
    ts: dt.datetime | None = None
    priority_groups: list[PriorityGroupState] | None = None


class ConsumerPause(_Reply):
    """The answer to pausing or resuming a consumer (``pause_until`` None once resumed)."""

    _durations: ClassVar[tuple[str, ...]] = ("pause_remaining",)
    paused: bool = False
    pause_until: dt.datetime | None = None
    pause_remaining: Duration | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.paused:
            self.pause_until = None  # the server sends Go's zero time


class ConsumerResetInfo(ConsumerInfo, kw_only=True):
    """A reset consumer's info, with the stream sequence it delivers from next."""

    reset_seq: int = 0


# -- account, acks, messages -----------------------------------------------------


class AccountLimits(_Reply):
    max_memory: int = 0
    max_storage: int = 0
    max_streams: int = 0
    max_consumers: int = 0
    max_ack_pending: int = 0
    memory_max_stream_bytes: int = 0
    storage_max_stream_bytes: int = 0
    max_bytes_required: bool = False


class APIStats(_Reply):
    total: int = 0
    errors: int = 0
    level: int = 0


class AccountInfo(_Reply):
    memory: int = 0
    storage: int = 0
    streams: int = 0
    consumers: int = 0
    limits: AccountLimits = msgspec.field(default_factory=AccountLimits)
    api: APIStats = msgspec.field(default_factory=APIStats)
    domain: str | None = None


class PubAck(msgspec.Struct, kw_only=True, gc=False):
    """The server's acknowledgement of a JetStream publish (``val``: a counter's new total, as text)."""

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
    """A message as STREAM.MSG.GET returns it (headers and data base64-encoded on the wire)."""

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
        _attach_unknown(reply, msgspec.json.decode(data))
    return reply


PUB_ACK_DECODER = msgspec.json.Decoder(PubAck)


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


def _read_pub_ack(groups: tuple[bytes, ...]) -> PubAck | None:
    """A plain publish ack decoded at once; an error or anything else goes the general way, where
    decode_pub_ack names it."""
    data = groups[1]
    if b'"error"' in data:
        return None
    try:
        return PUB_ACK_DECODER.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None


#: A publish ack as its publisher reads it on arrival (a status, with headers, goes the general way).
PUB_ACK_REPLY = ReplyShape(reply_pattern(None), _read_pub_ack, headers=False)


def decode_pub_ack(data: bytes) -> PubAck:
    if b'"error"' not in data:
        try:
            return PUB_ACK_DECODER.decode(data)
        except (msgspec.ValidationError, msgspec.DecodeError):
            raise JetStreamAPIError(0, 0, f"unexpected publish ack: {data[:200]!r}") from None
    reply = decode_ack(data, _PubAckReply, "publish ack")
    if not reply.stream:
        raise JetStreamAPIError(0, 0, f"publish ack without a stream: {data[:200]!r}")
    return PubAck(stream=reply.stream, seq=reply.seq, duplicate=reply.duplicate, domain=reply.domain, val=reply.val)


class _CounterValue(msgspec.Struct):
    val: str


_COUNTER_DECODER = msgspec.json.Decoder(_CounterValue)


def decode_counter(data: bytes, subject: str) -> int:
    """A counter's total from its last message's body, {"val": "<digits>"} (ADR-49: text, so any size)."""
    try:
        return int(_COUNTER_DECODER.decode(data).val)
    except (msgspec.ValidationError, msgspec.DecodeError, ValueError):
        raise JetStreamAPIError(0, 0, f"{subject!r} does not hold a counter: {data[:200]!r}") from None


# -- validation of requests ------------------------------------------------------

_NAME_FORBIDDEN = set(" \t\r\n.*>/\\")
_NAME_FORBIDDEN_RE = re.compile(f"[{re.escape(''.join(_NAME_FORBIDDEN))}]")  # one C-level scan on the hot path
#: The server refuses shorter consumer heartbeats.
MIN_IDLE_HEARTBEAT = 0.1

_CHOICES = {
    "retention": {e.value for e in RetentionPolicy},
    "storage": {e.value for e in StorageType},
    "discard": {e.value for e in DiscardPolicy},
    "compression": {e.value for e in StoreCompression},
    "deliver_policy": {e.value for e in DeliverPolicy},
    "ack_policy": {e.value for e in AckPolicy},
    "replay_policy": {e.value for e in ReplayPolicy},
    "priority_policy": {e.value for e in PriorityPolicy},
    "persist_mode": {e.value for e in PersistMode},
}


def check_name(what: str, name: Any) -> str:
    """Stream, consumer and durable names: non-empty, no dots, wildcards, whitespace or slashes."""
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"{what} must be a non-empty str, not {name!r}")
    if _NAME_FORBIDDEN_RE.search(name) is not None:
        bad = sorted(set(name) & _NAME_FORBIDDEN)
        raise InvalidArgumentError(f"{what} {name!r} contains forbidden character(s) {''.join(bad)!r}")
    return name


def _check_choices(obj: _Struct) -> None:
    for field, allowed in _CHOICES.items():
        value = getattr(obj, field, UNSET)
        if value is not UNSET and str(value) not in allowed:
            raise InvalidArgumentError(f"{field} must be one of {', '.join(sorted(allowed))}; not {value!r}")


def _check_non_negative(obj: _Struct, fields: tuple[str, ...]) -> None:
    for field in fields:
        value = getattr(obj, field)
        if value is UNSET:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidArgumentError(f"{field} must be a number, not {value!r}")
        if value < 0 and not (value == -1 and isinstance(value, int)):
            raise InvalidArgumentError(f"{field} must be >= 0 (or -1 for unlimited), not {value!r}")


def _check_bools(obj: _Struct, fields: tuple[str, ...]) -> None:
    for field in fields:
        value = getattr(obj, field)
        if value is not UNSET and not isinstance(value, bool):
            raise InvalidArgumentError(f"{field} must be True or False, not {value!r}")


_STREAM_FLAGS = (
    "no_ack", "discard_new_per_subject", "sealed", "deny_delete", "deny_purge", "allow_rollup_hdrs",
    "allow_direct", "mirror_direct", "allow_msg_ttl", "allow_msg_counter", "allow_atomic",
    "allow_msg_schedules", "allow_batched",
)
#: The server's minimum for a per-message TTL and for subject_delete_marker_ttl (ADR-43).
MIN_MESSAGE_TTL = 1.0
#: ADR-42: a priority group's name.
_GROUP_NAME = re.compile(r"[A-Za-z0-9\-_/=)+]{1,16}")


def validate_stream_config(config: StreamConfig) -> StreamConfig:
    check_name("stream name", config.name)
    _check_choices(config)
    _check_bools(config, _STREAM_FLAGS)
    marker_ttl = config.subject_delete_marker_ttl
    if isinstance(marker_ttl, float) and 0 < marker_ttl < MIN_MESSAGE_TTL:
        raise InvalidArgumentError(
            f"subject_delete_marker_ttl must be at least {MIN_MESSAGE_TTL:g} s (server minimum), not {marker_ttl}"
        )
    if config.allow_msg_counter is True:
        for other in ("allow_msg_ttl", "mirror"):
            if getattr(config, other) not in (UNSET, None, False):
                raise InvalidArgumentError(f"allow_msg_counter cannot be combined with {other} (ADR-49)")
    _check_non_negative(
        config,
        ("max_consumers", "max_msgs", "max_bytes", "max_age", "max_msgs_per_subject", "max_msg_size",
         "duplicate_window", "first_seq"),
    )
    if config.num_replicas is not UNSET and not (
        isinstance(config.num_replicas, int) and 1 <= config.num_replicas <= 5
    ):
        raise InvalidArgumentError(f"num_replicas must be 1 to 5, not {config.num_replicas!r}")
    if config.subjects is not UNSET:
        subjects: Any = config.subjects
        if not isinstance(subjects, list):
            raise InvalidArgumentError(f"subjects must be a list of subjects, not {subjects!r}")
        from ..protocol import check_subscribe_subject

        for subject in config.subjects:
            check_subscribe_subject(subject, "stream subject")
    return config


def validate_consumer_config(config: ConsumerConfig) -> ConsumerConfig:
    for field in ("name", "durable_name"):
        value = getattr(config, field)
        if value is not UNSET:
            check_name(field, value)
    if (
        config.name is not UNSET
        and config.durable_name is not UNSET
        and config.name != config.durable_name
    ):
        raise InvalidArgumentError(
            f"name {config.name!r} and durable_name {config.durable_name!r} must match when both are set"
        )
    _check_choices(config)
    _check_non_negative(
        config,
        ("ack_wait", "max_deliver", "max_waiting", "max_ack_pending", "idle_heartbeat", "max_batch",
         "max_expires", "max_bytes", "inactive_threshold", "opt_start_seq", "rate_limit_bps",
         "priority_timeout"),
    )
    _check_bools(config, ("flow_control", "headers_only", "mem_storage"))
    _check_priority(config)
    pause = config.pause_until
    if pause is not UNSET and not (isinstance(pause, dt.datetime) and pause.utcoffset() is not None):
        raise InvalidArgumentError(f"pause_until must be a timezone-aware datetime, not {pause!r}")
    hb = config.idle_heartbeat
    if isinstance(hb, float) and 0 < hb < MIN_IDLE_HEARTBEAT:
        raise InvalidArgumentError(f"idle_heartbeat must be at least {MIN_IDLE_HEARTBEAT} s (server limit), not {hb}")
    if config.filter_subject is not UNSET and config.filter_subjects is not UNSET:
        raise InvalidArgumentError("set filter_subject or filter_subjects, not both")
    from ..protocol import check_subscribe_subject

    if config.filter_subject is not UNSET and config.filter_subject:
        check_subscribe_subject(config.filter_subject, "filter_subject")
    if config.filter_subjects is not UNSET:
        for subject in config.filter_subjects:
            check_subscribe_subject(subject, "filter_subjects entry")
    if config.deliver_policy == DeliverPolicy.BY_START_SEQUENCE and config.opt_start_seq is UNSET:
        raise InvalidArgumentError("deliver_policy by_start_sequence needs opt_start_seq")
    if config.deliver_policy == DeliverPolicy.BY_START_TIME and config.opt_start_time is UNSET:
        raise InvalidArgumentError("deliver_policy by_start_time needs opt_start_time")
    if config.opt_start_seq is not UNSET and config.deliver_policy != DeliverPolicy.BY_START_SEQUENCE:
        raise InvalidArgumentError("opt_start_seq needs deliver_policy by_start_sequence")
    if config.opt_start_time is not UNSET and config.deliver_policy != DeliverPolicy.BY_START_TIME:
        raise InvalidArgumentError("opt_start_time needs deliver_policy by_start_time")
    return config


def _check_priority(config: ConsumerConfig) -> None:
    """ADR-42's rules, so a bad combination is named before the server refuses it."""
    groups: Any = config.priority_groups
    if groups is not UNSET:
        if not isinstance(groups, list) or not groups:
            raise InvalidArgumentError(f"priority_groups must be a non-empty list of names, not {groups!r}")
        for group in groups:
            check_group(group)
    policy = config.priority_policy
    grouped = policy is not UNSET and policy != PriorityPolicy.NONE
    if grouped and groups is UNSET:
        raise InvalidArgumentError(f"priority_policy {policy!r} needs priority_groups")
    if groups is not UNSET and not grouped:
        raise InvalidArgumentError("priority_groups need a priority_policy (overflow, pinned_client or prioritized)")
    if config.priority_timeout is not UNSET and policy != PriorityPolicy.PINNED_CLIENT:
        raise InvalidArgumentError("priority_timeout needs priority_policy pinned_client")


def check_group(group: Any) -> str:
    """A priority group name: 1 to 16 of A-Z a-z 0-9 - _ / = ) +."""
    if not isinstance(group, str) or _GROUP_NAME.fullmatch(group) is None:
        raise InvalidArgumentError(
            f"priority group {group!r} must be 1 to 16 characters of A-Z, a-z, 0-9 and -_/=)+"
        )
    return group


def merge_config(kind: type[T], config: T | None, overrides: dict[str, Any]) -> T:
    """A config from an optional base object plus keyword overrides (unknown keys rejected)."""
    fields = set(kind.__struct_fields__)  # type: ignore[attr-defined]
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise InvalidArgumentError(f"unknown {kind.__name__} field(s): {', '.join(unknown)}")
    if config is None:
        return kind(**overrides)
    if not isinstance(config, kind):
        raise InvalidArgumentError(f"config must be a {kind.__name__}, not {type(config).__name__}")
    if not overrides:
        return config
    return replace(config, **overrides)  # type: ignore[type-var]
