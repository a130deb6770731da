"""The models of consumers: a consumer's config (what is sent to create or update one) and its info
(what the server says of one), with the answers to pausing and resetting one.

Pure data, no I/O, no threads; built on :mod:`.apicodec` (unset fields not sent, durations in seconds,
unknown reply fields kept).
"""

from __future__ import annotations

import datetime as dt
from typing import ClassVar

import msgspec
from msgspec import UNSET, UnsetType

from .apicodec import APIStruct, Duration, ReplyStruct
from .streamtypes import ClusterInfo


class ConsumerConfig(APIStruct):
    """A consumer's configuration: what ``add_consumer`` sends, and ``ConsumerInfo.config``.

    The fields are the server's.  A field left unset is not sent, so the server applies its default
    (given below where it matters); durations are seconds, as numbers or ``timedelta`` s.  A consumer
    with a ``deliver_subject`` is a push consumer, one without is a pull consumer; some fields apply to
    one kind only, as said below.

    Attributes:
        name: The consumer's name: no dots, wildcards, whitespace or slashes. A consumer named this way
            without a ``durable_name`` is ephemeral; left unset, the server makes up a name.
        durable_name: Makes the consumer durable, under this name: it stays when nobody reads from it,
            unless ``inactive_threshold`` is set. When ``name`` is set too, they must be equal.
        description: Free text about the consumer.
        deliver_policy: Where in the stream delivery starts (:class:`DeliverPolicy`): ``all`` (default),
            ``last`` (the last message), ``new`` (only what is stored from now on), ``by_start_sequence``
            (``opt_start_seq``), ``by_start_time`` (``opt_start_time``), ``last_per_subject`` (each
            subject's last message, then what follows).
        opt_start_seq: The stream sequence to start from; only with ``deliver_policy``
            ``by_start_sequence``.
        opt_start_time: The (timezone-aware) time to start from; only with ``deliver_policy``
            ``by_start_time``.
        ack_policy: What the server waits for (:class:`AckPolicy`): ``explicit``, an ack per message;
            ``all``, where acknowledging a message acknowledges every one before it; ``none``, no acks: a
            message once sent is done and never redelivered (the server's default, so ``add_consumer``
            sends ``explicit`` when this is unset); ``flow_control`` (server 2.14+), messages count as
            acknowledged when the client answers the server's flow control.
        ack_wait: Seconds the server waits for an ack before it delivers the message again (the server's
            default is 30 seconds).
        max_deliver: The most times a message is delivered, first time included; after that the server
            stops redelivering it. -1 or unset, no limit.
        backoff: Seconds to wait before each redelivery, in turn (the last repeats); it replaces
            ``ack_wait`` for redeliveries, and ``max_deliver`` must be larger than its length.
        filter_subject: Deliver only the messages on subjects matching this one.
        filter_subjects: Deliver only the messages on subjects matching any of these; not together with
            ``filter_subject``.
        replay_policy: The pace of delivery (:class:`ReplayPolicy`): ``instant`` (default), as fast as the
            client takes them; ``original``, at the pace the messages were stored.
        rate_limit_bps: Push consumers: the most bits per second delivered.
        sample_freq: How many acks the server samples for its ack-latency advisories, as a percentage
            (``"50%"`` or ``"50"``); unset, none.
        max_waiting: Pull consumers: the most pull requests waiting at once (the server's default is 512).
        max_ack_pending: The most messages delivered and not yet acknowledged; delivery pauses at it until
            acks come (the server's default is 1000). -1, no limit.
        flow_control: Push consumers: the server paces delivery with flow-control messages, which jsclient
            answers itself; needs ``idle_heartbeat``.
        idle_heartbeat: Push consumers: when nothing was delivered for this many seconds, the server sends
            a heartbeat, so a subscriber can tell a quiet stream from a lost consumer (at least 0.1).
        headers_only: Deliver each message's headers without its body (whose size is in ``Nats-Msg-Size``).
        max_batch: Pull consumers: the most messages one pull request may ask for.
        max_expires: Pull consumers: the longest a pull request may wait, in seconds.
        max_bytes: Pull consumers: the most bytes one pull request may ask for.
        inactive_threshold: Seconds without activity (no pull request, no subscriber) after which the
            server deletes the consumer; an ephemeral consumer's default is 5 seconds, a durable one is
            kept unless this is set.
        num_replicas: How many servers keep the consumer's state; 0 or unset, as many as the stream's.
        mem_storage: Keep the consumer's state in memory, even on a file stream.
        deliver_subject: Makes it a push consumer: the server sends the messages to this subject.
        deliver_group: Push consumers: the queue group the subscribers of ``deliver_subject`` must use,
            to share the messages between them.
        metadata: String keys and values for the consumer's owners; the server adds its own under keys that
            begin with ``_nats.``.
        pause_until: The consumer delivers nothing until this (timezone-aware) time (server 2.11+).
        priority_groups: Pull consumers: the names of its priority groups (1 to 16 characters of A-Z, a-z,
            0-9, ``-``, ``_``, ``/`` and ``=``); every pull request then names one (server 2.11+). Needs
            ``priority_policy``.
        priority_policy: How the pull requests of a group share the messages (:class:`PriorityPolicy`):
            ``overflow``, a request that sets a minimum of pending messages is served only while that many
            are pending; ``pinned_client``, one client gets them all until it stops pulling (or is
            unpinned); ``prioritized`` (server 2.12+), requests with a lower priority number are served
            first.
        priority_timeout: With ``pinned_client``: seconds without a pull after which the pinned client
            loses its pin and another one takes over.
    """

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


class SequenceInfo(ReplyStruct):
    """A position of a consumer: its ``delivered`` or its ``ack_floor``.

    Attributes:
        consumer_seq: The consumer's own sequence: it counts deliveries, redeliveries included.
        stream_seq: The stream sequence of the message at that position.
        last_active: For ``delivered``, when the consumer last delivered; for ``ack_floor``, when it last
            had an ack; None if never.
    """

    consumer_seq: int = 0
    stream_seq: int = 0
    last_active: dt.datetime | None = None


class PriorityGroupState(ReplyStruct):
    """A priority group of a consumer: who holds its pin, since when (None when nobody does).

    Attributes:
        group: The group's name.
        pinned_client_id: The ID the server gave the client it pinned, which that client's pull requests
            carry; None when nobody holds the pin.
        pinned_ts: When that client was pinned; None when nobody holds the pin.
    """

    group: str = ""
    pinned_client_id: str | None = None
    pinned_ts: dt.datetime | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pinned_ts is not None and self.pinned_ts.year == 1:
            self.pinned_ts = None  # the server sends Go's zero time


class ConsumerInfo(ReplyStruct):
    """What the server says of a consumer: its configuration and how far it has got.

    Attributes:
        stream_name: The stream it reads.
        name: Its name.
        config: Its configuration, with the server's defaults filled in.
        created: When it was created.
        delivered: The last message it delivered.
        ack_floor: The last message that, with every one before it, has been acknowledged.
        num_ack_pending: How many messages are delivered and not yet acknowledged.
        num_redelivered: How many of those have been delivered more than once.
        num_waiting: Pull consumers: how many pull requests are waiting.
        num_pending: How many messages of the stream, matching its filter, it has still to deliver.
        cluster: The cluster and the replicas that hold it.
        push_bound: Push consumers: whether something is subscribed to its ``deliver_subject``.
        paused: Whether it is paused (server 2.11+).
        pause_remaining: While paused: seconds until it resumes; else None.
        ts: The server's time when it answered.
        priority_groups: The state of each of its priority groups, when it has any.
    """

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


class ConsumerPause(ReplyStruct):
    """The answer to pausing or resuming a consumer (``pause_until`` None once resumed).

    Attributes:
        paused: Whether the consumer is now paused.
        pause_until: When it resumes by itself; None once resumed.
        pause_remaining: Seconds until it resumes by itself; None when not paused.
    """

    _durations: ClassVar[tuple[str, ...]] = ("pause_remaining",)
    paused: bool = False
    pause_until: dt.datetime | None = None
    pause_remaining: Duration | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.paused:
            self.pause_until = None  # the server sends Go's zero time


class ConsumerResetInfo(ConsumerInfo, kw_only=True):
    """A reset consumer's info, with the stream sequence it delivers from next.

    Attributes:
        stream_name: The stream it reads.
        name: Its name.
        config: Its configuration.
        created: When it was created.
        delivered: The last message it delivered.
        ack_floor: The last message that, with every one before it, has been acknowledged.
        num_ack_pending: How many messages are delivered and not yet acknowledged.
        num_redelivered: How many of those have been delivered more than once.
        num_waiting: Pull consumers: how many pull requests are waiting.
        num_pending: How many messages of the stream, matching its filter, it has still to deliver.
        cluster: The cluster and the replicas that hold it.
        push_bound: Push consumers: whether something is subscribed to its ``deliver_subject``.
        paused: Whether it is paused.
        pause_remaining: While paused: seconds until it resumes; else None.
        ts: The server's time when it answered.
        priority_groups: The state of each of its priority groups, when it has any.
        reset_seq: The stream sequence it delivers from next.
    """

    reset_seq: int = 0
