"""Direct get (ADR-31): single messages, batches and multi-subject last values.

Runs on the caller's thread.  A single get is one request over the
connection's shared reply inbox.  Batches use an inbox subscription of their
own because the server answers one request with many messages, ending with a
``204 EOB`` status that carries ``Nats-Num-Pending``/``Nats-Last-Sequence``
(and ``Nats-UpTo-Sequence`` for multi-subject reads, which later requests
pass back as ``up_to_seq`` so a long read is one point in time).

What a server before 2.11 lacks is decided by its release before sending
(:mod:`.features`): it ignores ``batch`` (a batch is then read one get at a
time, within the same limits) and ``start_time`` (refused), and cannot read
``multi_last`` (refused).  A reply without Nats-Num-Pending tells the same
of an older replica behind a newer server (ADR-31).
"""

from __future__ import annotations

import datetime as dt
import enum
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NamedTuple

from ..checks import whole
from ..errors import (
    DirectGetDisabledError,
    FeatureNotSupportedError,
    InvalidArgumentError,
    JetStreamAPIError,
    MessageNotFoundError,
    NoRespondersError,
    StreamNotFoundError,
    TimeoutError,
)
from ..headers import (
    DELIVERY_BLOCK,
    DELIVERY_HEADERS,
    Headers,
    delivery_fields,
    delivery_head,
    delivery_tail,
    parse,
    split_delivery,
    status_of,
)
from ..message import Msg
from ..protocol import R, ReplyShape, check_publish_subject, check_subscribe_subject, remember, reply_pattern
from . import api, features
from .channel import END, TIMED_OUT, Channel
from .manager import DIRECT_BATCH, MessageManager
from .status import MAX_MULTI_SUBJECTS, Kind, Request, classify_header, reply_error

if TYPE_CHECKING:
    from ..core.iface import DeliveryPort
    from .context import JetStream

_GO_TIME = re.compile(r"(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.(\d+))? ([+-]\d{4})")


def parse_timestamp(text: str) -> dt.datetime:
    """``Nats-Time-Stamp``: RFC 3339 (newer servers) or Go's time.String() form (older ones)."""
    if text[-1:] == "Z":
        # The common case, e.g. 2026-11-21T20:13:00.820235495Z: Python 3.11 reads it, keeping microseconds.
        try:
            return dt.datetime.fromisoformat(text)
        except ValueError:
            pass
    m = _GO_TIME.match(text)
    if m:
        date, clock, frac, offset = m.groups()
        text = f"{date}T{clock}.{(frac or '0')[:6]}{offset[:3]}:{offset[3:]}"
    else:
        text = text.replace("Z", "+00:00")
        head, dot, rest = text.partition(".")
        if dot:
            digits = re.match(r"\d+", rest)
            frac = digits.group(0) if digits else "0"
            text = f"{head}.{frac[:6]}{rest[len(frac):]}"
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        raise JetStreamAPIError(0, 0, f"unreadable Nats-Time-Stamp {text!r}") from None


#: A whole direct-get reply whose header block is the one the server writes for a message stored without
#: headers of its own (:data:`jsclient.headers.DELIVERY_BLOCK`), for a caller that reads its own reply (see
#: :class:`~jsclient.protocol.ReplyShape`): groups (header size, total size, block, the block up to the
#: sequence (see :func:`delivery_head`), sequence, time stamp, payload).
DELIVERY_REPLY = reply_pattern(DELIVERY_BLOCK)


class Tail(NamedTuple):
    """What :func:`fixed_tail` reads of a delivery block."""

    seq: int
    time: dt.datetime


class Delivery(NamedTuple):
    """What :func:`fixed_delivery` reads of a delivery block."""

    stream: str
    subject: str
    seq: int
    stamp: str


#: Builds a Tail or a Delivery from all its fields without the Python-level ``__new__`` a NamedTuple has.
_new_tuple = tuple.__new__


@dataclass(frozen=True, slots=True)
class LastRequest(Generic[R]):
    """What reading a subject's last message needs once its names are checked (the entry of a cache).

    ``request`` is the direct-get subject; ``head`` the start of the block its
    answer has when the message was stored without headers of its own
    (:func:`delivery_head`); ``shape`` how the caller reads that answer as it
    arrives.  Slots, not a NamedTuple: read by name on every get, a slot
    costs what a tuple index does.
    """

    request: str
    head: bytes
    shape: ReplyShape[R]


def fixed_tail(header: bytes, head: bytes) -> Tail | None:
    """Sequence and time from a delivery block that starts with ``head`` (stream and subject known, see
    :func:`jsclient.headers.delivery_tail`): what :func:`fixed_delivery` reads, without matching and
    decoding the two names again."""
    tail = delivery_tail(header, head)
    if tail is None:
        return None
    seq, stamp = tail
    try:
        # A server's RFC 3339 stamp, read in C; any other form (or bytes that are no text) goes the long way.
        return _new_tuple(Tail, (int(seq), dt.datetime.fromisoformat(stamp.decode())))
    except ValueError:  # UnicodeDecodeError included
        pass
    try:
        return _new_tuple(Tail, (int(seq), parse_timestamp(stamp.decode())))
    except (UnicodeDecodeError, JetStreamAPIError):
        return None


def fixed_delivery(header: bytes) -> Delivery | None:
    """Stream, subject, sequence and time stamp of the block the server writes for a message stored without
    headers of its own, in one match (:func:`jsclient.headers.delivery_fields`); None for any other block."""
    fields = delivery_fields(header)
    if fields is None:
        return None
    stream, subject, seq, stamp = fields
    try:
        return _new_tuple(Delivery, (stream.decode(), subject.decode(), int(seq), stamp.decode()))
    except UnicodeDecodeError:
        return None  # the general reading replaces what is not UTF-8


class StoredMessage:
    """A message read straight from a stream: subject, seq, time, user headers, data.

    Built on the caller's thread from a direct-get reply.  Only the delivery
    headers it always needs are read at once, in one pass over the block;
    ``time`` and the user's ``headers`` are parsed when first asked for, so
    a read that looks only at the value does no more work than that.

    Attributes:
        data: The message's body.
        seq: Its stream sequence.
        stream: The stream it was read from.
        subject: The subject it was published to.
    """

    __slots__ = ("_header", "_headers", "_time", "data", "num_pending", "seq", "stream", "subject")
    _time: dt.datetime | str | bytes  # the stamp as the server wrote it until ``time`` is first read

    def __init__(self, msg: Msg) -> None:
        """Read a direct-get reply's delivery headers; the direct gets make these, users do not.

        Args:
            msg: The reply: the stored body, its headers and the server's delivery headers.

        Raises:
            JetStreamAPIError: The reply lacks the delivery headers (it is not a direct-get reply).
        """
        self.data = msg.data
        header = msg.header or b""
        self._headers: Headers | None = None
        self.num_pending: int | None = None  # batched reads only
        fixed = fixed_delivery(header)
        if fixed is not None:
            self.stream, self.subject, self.seq, self._time = fixed
            self._header = b""
            return
        found, own = split_delivery(header)
        try:
            self.stream = found["Nats-Stream"]
            self.subject = found["Nats-Subject"]
            self.seq = int(found["Nats-Sequence"])
            self._time = found["Nats-Time-Stamp"]
            pending = found.get("Nats-Num-Pending")
            #: Messages still matching after this one (batched reads only, else None), as the server
            #: counts: a 2.11 server counts this one too in a plain batch (2.12+ do not).
            self.num_pending = int(pending) if pending is not None else None
        except (KeyError, ValueError) as exc:
            raise JetStreamAPIError(0, 0, f"direct get reply without its delivery headers ({exc})") from None
        self._header = header if own else b""

    @classmethod
    def known(cls, data: bytes, stream: str, subject: str, seq: int, stamp: bytes) -> StoredMessage:
        """One whose reply had only the delivery headers, read by the caller (see :func:`read_last`)."""
        self = cls.__new__(cls)
        self.data = data
        self.stream = stream
        self.subject = subject
        self.seq = seq
        self._time = stamp
        self._header = b""
        self._headers = self.num_pending = None
        return self

    @property
    def time(self) -> dt.datetime:
        """When the stream stored the message (timezone-aware, UTC)."""
        stamp = self._time
        if isinstance(stamp, bytes):
            stamp = stamp.decode("utf-8", "replace")
        if isinstance(stamp, str):
            stamp = self._time = parse_timestamp(stamp)
        return stamp

    def get_header(self, name: str) -> str | None:
        """One user header's value; nothing is parsed when the reply had only delivery headers.

        Args:
            name: The header's name (case-sensitive).

        Returns:
            Its first value, or None when the message has no such header.

        Raises:
            ProtocolError: The stored header block is malformed.
        """
        return self.headers.get(name) if self._header else None

    @property
    def headers(self) -> Headers:
        """The user's headers (the delivery headers moved out into the fields above)."""
        headers = self._headers
        if headers is None:
            headers = self._headers = parse(self._header) if self._header else Headers()
            for name in DELIVERY_HEADERS:
                headers.pop(name, None)
        return headers

    def __repr__(self) -> str:
        return f"<StoredMessage stream={self.stream!r} seq={self.seq} subject={self.subject!r} data={self.data[:32]!r}>"


def no_direct(js: JetStream, stream: str) -> JetStreamAPIError:
    """Explain a direct get nobody answered: no such stream, or allow_direct is off."""
    try:
        info = js.stream_info(stream)
    except StreamNotFoundError:
        return StreamNotFoundError(404, 10059, f"stream {stream!r} not found")
    if not info.config.allow_direct:
        return DirectGetDisabledError(
            503, 0, f"stream {stream!r} does not allow direct get (create it with allow_direct=True)"
        )
    return JetStreamAPIError(503, 0, f"no direct get responder for stream {stream!r}")


def direct_get(
    js: JetStream,
    stream: str,
    *,
    seq: int | None = None,
    last_by_subj: str | None = None,
    next_by_subj: str | None = None,
    start_time: dt.datetime | None = None,
    timeout: float,
) -> StoredMessage:
    """A get by request body (``last_by_subj`` alone takes :func:`read_last`)."""
    api.check_name("stream", stream)
    body: dict[str, Any] = {}
    if seq is not None:
        body["seq"] = whole("seq", seq)
    if next_by_subj is not None:
        check_subscribe_subject(next_by_subj, "next_by_subj")
        body["next_by_subj"] = next_by_subj
    if start_time is not None:
        body["start_time"] = _rfc3339(start_time, "start_time")
        if seq is not None:
            raise InvalidArgumentError("start_time and seq are mutually exclusive")
    if last_by_subj is not None:  # alone it took read_last
        raise InvalidArgumentError("last_by_subj cannot be combined with seq, next_by_subj or start_time")
    if not body:
        raise InvalidArgumentError("direct_get needs seq, last_by_subj, next_by_subj or start_time")
    if start_time is not None:
        js.require(features.START_TIME_GET)  # a 2.10 server ignores start_time: the wrong message
    return read_direct(js, stream, f"{js.prefix}.DIRECT.GET.{stream}", api.encode(body), timeout)


def read_last(js: JetStream, stream: str, subject: str, timeout: float) -> StoredMessage:
    """The last message on ``subject``: its request subject checked once, then remembered.

    The hot path of ``direct_get(last_by_subj=...)``: a message stored without
    headers of its own comes back in a block that starts with what the cache
    already knows (:func:`delivery_head`), so only its sequence and time are
    read, by the caller in one match as the reply arrives (:func:`last_shape`).
    """
    known = js.last_requests.get((stream, subject)) if type(stream) is str and type(subject) is str else None
    if known is None:
        api.check_name("stream", stream)
        check_publish_subject(subject, "last_by_subj")
        head = delivery_head(stream, subject)
        known = remember(
            js.last_requests,
            (stream, subject),
            LastRequest(f"{js.prefix}.DIRECT.GET.{stream}.{subject}", head, last_shape(stream, subject, head)),
        )
    try:
        return js.conn.core.request(known.request, b"", timeout, None, known.shape)
    except NoRespondersError:
        raise no_direct(js, stream) from None


def last_shape(stream: str, subject: str, head: bytes) -> ReplyShape[StoredMessage]:
    """How read_last's caller reads its own reply: the message, when stored without headers of its own
    (else read in full, or the error its status means)."""

    def read(groups: tuple[bytes, ...]) -> StoredMessage | None:
        _, _, _, block_head, seq, stamp, data = groups
        return StoredMessage.known(data, stream, subject, int(seq), stamp) if block_head == head else None

    def decode(reply: Msg) -> StoredMessage:
        tail = delivery_tail(reply.header, head) if reply.header else None
        if tail is not None:
            return StoredMessage.known(reply.data, stream, subject, int(tail[0]), tail[1])
        return stored_reply(reply, stream)

    # A new StoredMessage each time: it is mutable.
    return ReplyShape(DELIVERY_REPLY, read, decode=decode, headers=True, repeats=True)


def read_direct(js: JetStream, stream: str, subject: str, payload: bytes, timeout: float) -> StoredMessage:
    """One direct get, its request already checked: the message, or the error its status means."""
    try:
        reply = js.conn.request(subject, payload, timeout)
    except NoRespondersError:
        raise no_direct(js, stream) from None
    return stored_reply(reply, stream)


def stored_reply(reply: Msg, stream: str) -> StoredMessage:
    """A direct get's reply read in full: the message, or the error its status means."""
    if reply.header and status_of(reply.header) is not None:
        raise reply_error(classify_header(reply.header), Request.DIRECT_GET, stream)
    return StoredMessage(reply)


def _rfc3339(value: Any, name: str) -> str:
    if not isinstance(value, dt.datetime) or value.tzinfo is None:
        raise InvalidArgumentError(f"{name} must be a timezone-aware datetime, not {value!r}")
    return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


class Asking(enum.Enum):
    """How a :class:`DirectBatch` asks the server for its messages."""

    BATCH = "batch"  # batched requests, each ended by a 204 EOB (2.11+; one get per message before)
    MULTI_LAST = "multi_last"  # the last message of each subject, continued at one point in time (2.11+)


class DirectBatch:
    """Iterator over one or more batched direct gets; ``num_pending``/``last_sequence`` after each EOB.

    A server before 2.11 ignores ``batch`` and answers with the first
    message alone (ADR-31), which would make a short read: there the same
    messages are read one direct get at a time, with the same limits.

    Iterating sends the requests, on the iterating thread; nothing matching
    is an empty iteration, not an error.

    Raises:
        FeatureNotSupportedError: While iterating: the read needs a server 2.11 or newer (a multi-subject
            read, or one from a start time), refused before sending; or an older server of the stream answered.
        TimeoutError: While iterating: no reply within the call's timeout.
        StreamNotFoundError: While iterating: there is no such stream.
        DirectGetDisabledError: While iterating: the stream does not allow direct gets.
        TooManySubjectsError: While iterating: the subjects match more than the server allows in one read.
        JetStreamAPIError: While iterating: any other error status.
        ConnectionClosedError: While iterating: the connection is closed.
    """

    def __init__(self, js: JetStream, stream: str, body: dict[str, Any], *, asking: Asking, timeout: float) -> None:
        """Keep the request; iterating sends it.  ``js.direct_get_batch`` and its kin make these.

        Args:
            js: The context whose connection it reads through.
            stream: The stream to read.
            body: The direct-get request, already checked (``batch``, ``seq``, ``next_by_subj``, ``multi_last``, ...).
            asking: How the server is asked: batches, or the last message of each subject.
            timeout: Seconds to wait for each reply.

        Raises:
            : Nothing; it only keeps what it is given.
        """
        self._js = js
        self.stream = stream
        self._body = body
        self._asking = asking
        self._timeout = timeout
        #: Messages still matching after the last end of batch (None where a server before 2.11 cannot
        #: count them).
        self.num_pending: int | None = None
        #: The stream sequence of the last message read, as the server last gave it (None before that).
        self.last_sequence: int | None = None
        #: The stream sequence a multi-subject read stands at (its point in time), once the server gives it.
        self.up_to_sequence: int | None = None

    def __iter__(self) -> Iterator[StoredMessage]:
        """Decided before anything is sent, by the server connected now (it may have changed since the call)."""
        if self._asking is Asking.MULTI_LAST:
            self._js.require(features.MULTI_LAST_DIRECT_GET)
        elif "start_time" in self._body:
            self._js.require(features.START_TIME_GET)
        elif not features.supports(self._js.conn.server_info, features.BATCHED_DIRECT_GET):
            return self._one_by_one(self._body["seq"], self._body["batch"], 0)
        return self._batches()

    def _batches(self) -> Iterator[StoredMessage]:
        js = self._js
        conn = js.conn
        subject = f"{js.prefix}.DIRECT.GET.{self.stream}"
        inbox = conn.new_inbox()
        sub: DeliveryPort = conn.subscribe(inbox, pending_msgs_limit=1 << 22, pending_bytes_limit=1 << 34)
        channel = Channel(sub, MessageManager(conn.core), DIRECT_BATCH, request=Request.DIRECT_GET, target=self.stream)
        body = dict(self._body)
        multi = self._asking is Asking.MULTI_LAST
        try:
            while True:
                conn.core.publish_message(subject, api.encode(body), reply=inbox, send_now=True)
                first = True
                got = 0
                while True:
                    msg = channel.take(self._timeout)
                    if not isinstance(msg, Msg):
                        step = msg
                        if step.verdict is TIMED_OUT:
                            raise TimeoutError(
                                f"direct get batch on {self.stream!r}: no reply within {self._timeout} s"
                            )
                        if step.verdict is END:
                            if step.status.kind is Kind.NO_MESSAGES:
                                self.num_pending = 0
                                return
                            self._ended(step.msg)
                            break
                        status = step.status  # the table has no other verdict than an error
                        if multi and status.code == 408 and "empty request" in status.description.lower():
                            raise _older_responder(features.MULTI_LAST_DIRECT_GET, self.stream)
                        if isinstance(step.error, NoRespondersError):
                            raise no_direct(js, self.stream)
                        raise step.error or AssertionError(step.verdict)
                    stored = StoredMessage(msg)
                    if first and stored.num_pending is None and not multi:
                        # A replica older than 2.11 answered (ADR-31: no Nats-Num-Pending): it sends this
                        # message alone.  The rest is read one get at a time, within the same limits.
                        sub.unsubscribe()
                        yield stored
                        yield from self._one_by_one(
                            stored.seq + 1, self._body["batch"] - 1, stored_size(msg.header, stored.subject, msg.data),
                            last_sequence=stored.seq,
                        )
                        return
                    first = False
                    got += 1
                    yield stored
                if not (multi and self.last_sequence and self._more(got)):
                    return
                # Continue the multi-subject read at the same point in time.
                body = {**self._body, "seq": self.last_sequence + 1}
                if self.up_to_sequence:
                    body["up_to_seq"] = self.up_to_sequence
                    body.pop("up_to_time", None)
        finally:
            sub.unsubscribe()

    def _ended(self, eob: Msg | None) -> None:
        """A batch's end of batch (204): what it says remains, and where the read stands."""
        assert eob is not None and eob.header is not None
        headers = parse(eob.header)
        self.num_pending = int(headers.get("Nats-Num-Pending", "0"))
        last = headers.get("Nats-Last-Sequence")
        self.last_sequence = int(last) if last else None
        upto = headers.get("Nats-UpTo-Sequence")
        if upto:
            self.up_to_sequence = int(upto)

    def _more(self, got: int) -> bool:
        """Whether a multi-subject read goes on after a batch of ``got`` messages.

        A 2.11 server's end of batch counts one message fewer than remain
        (it says 0 with one to go), so a full batch that did not reach the
        read's point in time asks once more: the answer is the rest, or 404.
        """
        if self.num_pending:
            return True
        limit = self._body.get("batch")
        return bool(limit and got >= limit and self.up_to_sequence and self.last_sequence
                    and self.last_sequence < self.up_to_sequence)

    def _one_by_one(
        self, seq: int, left: int, counted: int, *, last_sequence: int | None = None
    ) -> Iterator[StoredMessage]:
        """Up to ``left`` messages from ``seq`` on, one direct get each, until ``max_bytes`` (less ``counted``)
        is reached or nothing more matches (404): what a batch would have sent."""
        js = self._js
        subject = self._body["next_by_subj"]
        max_bytes = self._body.get("max_bytes", 0)
        request = f"{js.prefix}.DIRECT.GET.{self.stream}"
        self.last_sequence = last_sequence
        self.num_pending = None  # not known unless the end is reached
        while left > 0 and not (max_bytes and counted >= max_bytes):
            try:
                reply = js.conn.request(request, api.encode({"seq": seq, "next_by_subj": subject}), self._timeout)
            except NoRespondersError:
                raise no_direct(js, self.stream) from None
            try:
                stored = stored_reply(reply, self.stream)
            except MessageNotFoundError:
                self.num_pending = 0
                return
            counted += stored_size(reply.header, stored.subject, reply.data)
            left -= 1
            seq = stored.seq + 1
            self.last_sequence = stored.seq
            yield stored


def _older_responder(feature: features.Feature, stream: str) -> FeatureNotSupportedError:
    return FeatureNotSupportedError(
        description=(
            f"{feature.name} needs nats-server {feature.version} or newer: a server of stream {stream!r} older "
            "than that answered (it did not understand the request)"
        )
    )


def stored_size(header: bytes | None, subject: str, data: bytes) -> int:
    """What a message counts against a batch's ``max_bytes``, as the server counts it: its subject, the
    headers it was stored with (the reply's block less the delivery lines) and its payload."""
    own = split_delivery(header)[1] if header else 0
    return len(subject) + (len(b"NATS/1.0\r\n\r\n") + own if own else 0) + len(data)


def eob_counts(header: bytes) -> tuple[int, int]:
    """Nats-Num-Pending and Nats-Last-Sequence of a ``204 EOB`` status header block."""
    headers = parse(header)
    return int(headers.get("Nats-Num-Pending", "0")), int(headers.get("Nats-Last-Sequence") or 0)


def count_matching(js: JetStream, stream: str, subject: str, seq: int) -> int | None:
    """How many stored messages from ``seq`` on match ``subject`` (0 when none; allow_direct streams).

    One batch of one message: that message and the count its end (204 EOB)
    gives of those after it.  Not the message's own Nats-Num-Pending, which
    a 2.11 server counts with the message itself and 2.12+ without.  None
    where the server cannot count (before 2.11 a direct get carries no
    pending count): that server is not asked.
    """
    if not features.supports(js.conn.server_info, features.BATCHED_DIRECT_GET):
        return None
    body = {"batch": 1, "seq": whole("seq", seq), "next_by_subj": subject}
    reading = DirectBatch(js, stream, body, asking=Asking.BATCH, timeout=js.timeout)
    got = sum(1 for _ in reading)
    return None if reading.num_pending is None else got + reading.num_pending


def direct_get_batch(
    js: JetStream,
    stream: str,
    subject: str,
    *,
    batch: int,
    seq: int | None = None,
    start_time: dt.datetime | None = None,
    max_bytes: int | None = None,
    timeout: float,
) -> DirectBatch:
    """Up to ``batch`` messages matching ``subject``; one get at a time on a server before 2.11."""
    api.check_name("stream", stream)
    check_subscribe_subject(subject, "subject")
    body: dict[str, Any] = {"batch": whole("batch", batch), "next_by_subj": subject}
    if seq is not None and start_time is not None:
        raise InvalidArgumentError("seq and start_time are mutually exclusive")
    if start_time is not None:
        body["start_time"] = _rfc3339(start_time, "start_time")
        js.require(features.START_TIME_GET)  # a 2.10 server ignores start_time: the wrong messages
    else:
        body["seq"] = 1 if seq is None else whole("seq", seq)
    if max_bytes is not None:
        body["max_bytes"] = whole("max_bytes", max_bytes)
    return DirectBatch(js, stream, body, asking=Asking.BATCH, timeout=timeout)


def direct_get_last_for_subjects(
    js: JetStream,
    stream: str,
    subjects: list[str],
    *,
    up_to_seq: int | None = None,
    up_to_time: dt.datetime | None = None,
    batch: int | None = None,
    timeout: float,
) -> DirectBatch:
    """The last message of each subject (server 2.11+: refused before sending on an older one)."""
    api.check_name("stream", stream)
    listed: Any = subjects
    if not isinstance(listed, (list, tuple)) or not listed:
        raise InvalidArgumentError(f"subjects must be a non-empty list of subjects, not {listed!r}")
    for s in subjects:
        check_subscribe_subject(s, "subject")
    if len(subjects) > MAX_MULTI_SUBJECTS:
        raise InvalidArgumentError(f"at most {MAX_MULTI_SUBJECTS} subjects per multi-subject get, not {len(subjects)}")
    body: dict[str, Any] = {"multi_last": list(subjects)}
    if up_to_seq is not None and up_to_time is not None:
        raise InvalidArgumentError("up_to_seq and up_to_time are mutually exclusive")
    if up_to_seq is not None:
        body["up_to_seq"] = whole("up_to_seq", up_to_seq)
    if up_to_time is not None:
        body["up_to_time"] = _rfc3339(up_to_time, "up_to_time")
    if batch is not None:
        body["batch"] = whole("batch", batch)
    js.require(features.MULTI_LAST_DIRECT_GET)  # a 2.10 server answers 408 Empty Request
    return DirectBatch(js, stream, body, asking=Asking.MULTI_LAST, timeout=timeout)
