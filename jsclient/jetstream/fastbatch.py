"""Fast-ingest batch publish (ADR-50, server 2.14+): a stream of messages under server flow control.

Runs on the caller's thread; no state outlives a call, so nothing here is
locked.  The batch's control channel is a plain subscription on an inbox of
its own (``<inbox>.>``, not the shared reply mux: once the call ends its
interest goes, and the server stops answering).  Every message carries the
batch's state in its reply subject,
``<inbox>.<id>.<flow>.<gaps>.<batch seq>.<operation>.$FI``; the server
answers with flow acks (``{"type":"ack","seq":N,"msgs":M}``: everything up
to N is in, and it will ack every M messages from now on), gap and error
reports, and at the end one publish ack for the whole batch.

The publisher sends up to ``outstanding_acks`` acks ahead of the last ack,
then waits; while it waits without an answer it pings the batch (operation
4), which keeps it alive on the server and brings back the latest flow ack,
should one have been lost.  With ``gaps="fail"`` a gap or a refused message
ends the batch on the server: the call stops sending and raises
:class:`~jsclient.errors.FastBatchError` with the final ack, which says how
many messages were stored (the first ``count``, in order).  With
``gaps="ok"`` the batch goes on and the final ack lists what was reported.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import (
    BadPayloadError,
    FastBatchError,
    InvalidArgumentError,
    JetStreamAPIError,
    TimeoutError,
    api_error,
)
from ..headers import encode
from ..protocol import FAST_APPEND_FRAME, REQUEST_HEAD, encode_fast_ingest
from . import api, features
from .batch import member, new_batch_id
from .channel import MESSAGE, TIMED_OUT, Channel, Step
from .manager import ACKS, MessageManager
from .status import Request

if TYPE_CHECKING:
    from ..core.iface import DeliveryPort
    from ..message import Msg
    from .context import JetStream

#: Operations of the reply subject (ADR-50).
START, APPEND, COMMIT, COMMIT_EOB, PING = 0, 1, 2, 3, 4  # APPEND is FAST_APPEND_FRAME's
#: The flow a publisher asks for: an ack every this many messages at most (the server may ask for fewer).
DEFAULT_FLOW = 500
#: The largest flow the ADR's ack message can carry (a uint16).
MAX_FLOW = 65535
#: Messages queued for the socket in one piece while no ack is due.
CHUNK = 256
#: A wait without any answer sends a ping after this long.
PING_AFTER = 1.0


class FastBatchAck(msgspec.Struct, kw_only=True, frozen=True):
    """The end of a fast-ingest batch: ``count`` messages, the last stored at ``seq``.

    ``gaps`` are the (first lost, next received) batch sequences the server
    reported, ``errors`` the (batch sequence, error) of messages it refused:
    both stay empty unless ``gaps="ok"`` let the batch go on past them, and
    then ``count`` is the batch's last sequence, those messages included.

    Attributes:
        stream: The stream that stored the batch.
        seq: The stream sequence of the last message stored.
        count: How many messages the batch had: every one stored, unless ``gaps`` or ``errors`` name some.
        batch: The batch's id.
        gaps: The (first lost, next received) batch sequences of each gap the server reported.
        errors: The (batch sequence, error) of each message the stream refused.
        domain: The JetStream domain of the stream, if it has one.
    """

    stream: str
    seq: int
    count: int
    batch: str
    gaps: list[tuple[int, int]] = []
    errors: list[tuple[int, JetStreamAPIError]] = []
    domain: str | None = None


class _Reply(msgspec.Struct, kw_only=True):
    """Any answer on the control channel: a flow ack, a gap, an error report, or the final ack."""

    type: str = ""
    seq: int = 0
    msgs: int = 0
    last_seq: int = 0
    error: api.APIErrorBody | None = None
    stream: str = ""
    count: int = 0
    batch: str = ""
    domain: str | None = None


_DECODER = msgspec.json.Decoder(_Reply)


def _check_options(gaps: Any, flow: Any, outstanding_acks: Any) -> None:
    if gaps not in ("ok", "fail"):
        raise InvalidArgumentError(f"gaps must be 'ok' or 'fail', not {gaps!r}")
    if isinstance(flow, bool) or not isinstance(flow, int) or not 1 <= flow <= MAX_FLOW:
        raise InvalidArgumentError(f"flow must be an int from 1 to {MAX_FLOW}, not {flow!r}")
    if isinstance(outstanding_acks, bool) or outstanding_acks not in (1, 2, 3):
        raise InvalidArgumentError(f"outstanding_acks must be 1, 2 or 3 (ADR-50), not {outstanding_acks!r}")


class _Publisher:
    """One batch: frames out, answers in, on the caller's thread."""

    def __init__(self, js: JetStream, gaps: str, flow: int, outstanding: int, timeout: float) -> None:
        self.js = js
        self.conn = js.conn
        self.gaps = gaps
        self.outstanding = outstanding
        self.timeout = timeout
        self.batch_id = new_batch_id()
        inbox = self.conn.new_inbox()
        self.sub: DeliveryPort = self.conn.subscribe(
            f"{inbox}.>", pending_msgs_limit=1 << 24, pending_bytes_limit=1 << 40
        )
        # Any status on the control channel ends the batch (a 503: no stream stores the subject).
        self.answers = Channel(self.sub, MessageManager(self.conn.core), ACKS, request=Request.PUBLISH)
        self.prefix = f"{inbox}.{self.batch_id}.{flow}.{gaps}.".encode()
        self.acked = 0  # the highest batch sequence a flow ack covered
        self.started = False  # the server answered the first message (with a flow ack for sequence 0)
        self.every = 1  # the server acks every this many messages (until it says otherwise)
        self.final: _Reply | None = None
        self.stopped = False  # the server ended the batch early (gaps="fail")
        self.gap_reports: list[tuple[int, int]] = []
        self.error_reports: list[tuple[int, JetStreamAPIError]] = []
        self.last_subject = b""
        self.frames: list[bytes] = []
        self.payload_bytes = 0

    # -- sending -------------------------------------------------------------------
    def add(self, subject: bytes, header: bytes, payload: bytes, seq: int, op: int) -> None:
        self.frames.append(encode_fast_ingest(subject, self.prefix, seq, op, header, payload))
        self.payload_bytes += len(payload)
        self.last_subject = subject

    def flush(self) -> None:
        if self.frames:
            frames, count = b"".join(self.frames), len(self.frames)
            self.conn.publish_encoded(frames, messages=count, payload_bytes=self.payload_bytes)
            self.frames.clear()  # the same list: the send loop holds its append
            self.payload_bytes = 0

    def ping(self, seq: int) -> None:
        """Keep the batch alive and have the server send its latest flow ack again."""
        self.add(self.last_subject, b"", b"", seq, PING)
        self.flush()

    # -- answers ---------------------------------------------------------------------
    def take(self, msg: Msg) -> None:
        try:
            reply = _DECODER.decode(msg.data)
        except (msgspec.ValidationError, msgspec.DecodeError):
            raise JetStreamAPIError(0, 0, f"unexpected fast-batch answer: {msg.data[:200]!r}") from None
        if reply.type == "ack":
            self.started = True
            if reply.seq >= self.acked:
                self.acked = reply.seq
                self.every = max(1, reply.msgs)
        elif reply.type == "gap":
            self.gap_reports.append((reply.last_seq, reply.seq))
            self.stopped = self.stopped or self.gaps == "fail"
        elif reply.type == "err":
            e = reply.error
            error = api_error(e.code, e.err_code, e.description) if e else JetStreamAPIError(0, 0, "refused")
            self.error_reports.append((reply.seq, error))
            self.stopped = self.stopped or self.gaps == "fail"
        else:
            self.final = reply
            self.stopped = True

    def drain(self) -> None:
        """Take the answers already here, without waiting."""
        ready = self.answers.ready
        while (step := ready()) is not None:
            self.take(self._answer(step))

    def _answer(self, step: Step) -> Msg:
        if step.verdict is not MESSAGE:
            raise step.error or AssertionError(step.verdict)  # ACKS has no other verdict than an error
        assert step.msg is not None
        return step.msg

    def wait(self, done: Any, seq: int) -> None:
        """Flush, then take answers until ``done()``; pings while nothing comes, TimeoutError after ``timeout``."""
        self.flush()
        deadline = time.monotonic() + self.timeout
        while not done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"fast batch {self.batch_id}: no answer from the stream for {self.timeout:g} s "
                    f"(messages up to batch sequence {self.acked} were acked)"
                )
            step = self.answers.step(min(PING_AFTER, remaining))
            if step.verdict is TIMED_OUT:
                self.ping(seq)
            else:
                self.take(self._answer(step))

    def close(self) -> None:
        self.sub.unsubscribe()


def publish_stream(
    js: JetStream,
    messages: Iterable[Any],
    *,
    gaps: str = "fail",
    flow: int = DEFAULT_FLOW,
    outstanding_acks: int = 2,
    timeout: float,
) -> FastBatchAck:
    """Publish ``messages`` as one fast-ingest batch; see :meth:`JetStream.publish_stream`."""
    _check_options(gaps, flow, outstanding_acks)
    js.require(features.FAST_BATCH)
    entries: Iterator[Any] = iter(messages)
    try:
        first = next(entries)
    except StopIteration:
        raise InvalidArgumentError("publish_stream needs at least one message") from None
    try:
        member(first, 0)  # a bad first entry is named before the control channel's SUB goes out
    except BAD_ENTRY as exc:
        raise _named(exc, 0) from None
    pub = _Publisher(js, gaps, flow, outstanding_acks, timeout)
    try:
        return _run(pub, first, entries)
    finally:
        pub.close()


def _run(pub: _Publisher, first: Any, entries: Iterator[Any]) -> FastBatchAck:
    """Send every entry, the last one committing; the loop is the hot path of a bulk load."""
    heads: dict[str, bytes] = {}  # subject -> REQUEST_HEAD of it and the reply prefix, for subjects checked
    limit = pub.conn.max_payload
    frames = pub.frames
    append = frames.append
    seq = 1
    try:
        current = next(entries)
    except StopIteration:
        _add_checked(pub, heads, first, 0, 1, COMMIT)  # a batch of one: the commit's ack is the only answer
        pub.wait(lambda: pub.final is not None, 1)
        return _result(pub, 1)
    _add_checked(pub, heads, first, 0, 1, START)
    pub.wait(lambda: pub.started or pub.stopped, 1)  # the server's first word sets the pace
    budget = pub.acked + pub.every * pub.outstanding  # send up to this batch sequence, then wait
    payload_bytes = 0
    for following in entries:
        if pub.stopped:
            break
        seq += 1
        # The common entry: a (subject, bytes) pair, its subject seen before, and no header.
        if type(current) is tuple and len(current) == 2 and type(payload := current[1]) is bytes and (
            (head := heads.get(current[0])) is not None and len(payload) <= limit
        ):
            append(FAST_APPEND_FRAME % (head, seq, len(payload), payload))
            payload_bytes += len(payload)
        else:
            _add_checked(pub, heads, current, seq - 1, seq, APPEND)
        if seq >= budget or len(frames) >= CHUNK:
            pub.payload_bytes += payload_bytes
            payload_bytes = 0
            if seq >= budget:
                pub.wait(lambda s=seq: pub.acked + pub.every * pub.outstanding > s or pub.stopped, seq)
            else:
                pub.flush()
                if pub.sub.pending_msgs:
                    pub.drain()
            budget = pub.acked + pub.every * pub.outstanding
        current = following
    else:
        if not pub.stopped:
            seq += 1
            _add_checked(pub, heads, current, seq - 1, seq, COMMIT)
    pub.payload_bytes += payload_bytes
    pub.wait(lambda: pub.final is not None, seq)
    return _result(pub, seq)


#: What a bad entry raises: a bad subject, header or id, or a payload that is not bytes-like (a TypeError).
BAD_ENTRY = (InvalidArgumentError, BadPayloadError)


def _named(exc: InvalidArgumentError | BadPayloadError, index: int) -> InvalidArgumentError | BadPayloadError:
    """The error of a bad entry, of its own kind, saying which entry it is."""
    return exc if str(exc).startswith("batch message") else type(exc)(f"batch message {index}: {exc}")


def _add_checked(pub: _Publisher, heads: dict[str, bytes], entry: Any, index: int, seq: int, op: int) -> None:
    """Any entry, checked whole; bad input ends the batch with what went before (see :func:`_stop_at`)."""
    try:
        m = member(entry, index)
    except BAD_ENTRY as exc:
        raise _stop_at(pub, seq - 1, _named(exc, index)) from None
    subject = m.subject.encode()
    header = encode(m.headers) if m.headers else b""
    limit = pub.conn.max_payload
    if len(m.payload) + len(header) > limit:
        too_big = InvalidArgumentError(
            f"batch message {index} of {len(m.payload) + len(header)} bytes exceeds max_payload {limit}"
        )
        raise _stop_at(pub, seq - 1, too_big)
    heads.setdefault(m.subject, REQUEST_HEAD % (subject, pub.prefix))
    pub.add(subject, header, m.payload, seq, op)


def _stop_at(
    pub: _Publisher, sent: int, error: InvalidArgumentError | BadPayloadError
) -> InvalidArgumentError | BadPayloadError:
    """Bad input after ``sent`` messages: end the batch with what was sent, and say so in an error of its kind."""
    if sent == 0:
        return error
    pub.add(pub.last_subject, b"", b"", sent + 1, COMMIT_EOB)
    pub.wait(lambda: pub.final is not None, sent + 1)
    stored = pub.final.count if pub.final is not None else 0
    return type(error)(f"{error} (the batch was ended there: {stored} earlier message(s) stored)")


def _result(pub: _Publisher, sent: int) -> FastBatchAck:
    final = pub.final
    assert final is not None
    failed = pub.gaps == "fail" and (pub.gap_reports or pub.error_reports)
    if final.error is not None and not failed:
        e = final.error
        raise api_error(e.code, e.err_code, e.description)
    ack = None
    if final.error is None:
        if not final.stream:
            raise JetStreamAPIError(0, 0, f"fast batch {pub.batch_id}: an ack without a stream")
        ack = FastBatchAck(
            stream=final.stream, seq=final.seq, count=final.count or (1 if sent == 1 else 0),
            batch=final.batch or pub.batch_id, gaps=pub.gap_reports, errors=pub.error_reports, domain=final.domain,
        )
    if failed or ack is None or (pub.gaps == "fail" and ack.count < sent):
        stored = f"{ack.count} of {sent} messages stored" if ack is not None else f"{sent} messages sent"
        what = (f"gap {pub.gap_reports[0]}" if pub.gap_reports
                else f"message {pub.error_reports[0][0]} refused: {pub.error_reports[0][1].description}"
                if pub.error_reports else "the stream ended it")
        raise FastBatchError(
            f"fast batch {pub.batch_id} ended early ({what}); {stored}",
            ack=ack, sent=sent, gaps=pub.gap_reports, errors=pub.error_reports,
        )
    return ack
