"""The jetstream sink: rows to a stream exactly once, however late a retry or replay comes.

Two modes, chosen on the driver when the query or write starts
(:func:`plan_write`):

``atomic`` (the target stream has ``allow_atomic``, server 2.12+, and the write names it)
    The option ``stream`` names the target, or the option ``subject`` finds
    it; every row's subject must be one of that stream's subjects (a row
    for another stream fails its task).  Each task publishes its rows as
    atomic batches (ADR-50) of up to 999 rows, each closed by a commit
    marker on the sink's own subject ``<commitPrefix>.<write>.<partition>``
    in the same stream.  The marker says how many of the task's rows are
    stored (for the micro-batch it names), and it is stored with its rows
    or not at all.  A task that starts again (a Spark retry, or a
    micro-batch replayed after the driver died) reads the last marker with
    one get and skips what it says is stored.  Each marker expects the
    previous one's sequence
    (``Nats-Expected-Last-Subject-Sequence``), so two attempts running at
    once cannot both commit: the late one fails and is retried, and the
    retry starts from the marker.  Nothing depends on ``duplicate_window``.
    This holds as long as a retried task gets the same rows in the same
    order, which Spark gives for a replayable source (such as this one)
    and a deterministic query.

``msgid`` (any other stream, and every write that sets neither ``stream`` nor ``subject``)
    Without either option the rows name their subjects and the target is
    not known before they come, so rows for a stream with ``allow_atomic``
    are written this way too.  Every row gets a deterministic
    ``Nats-Msg-Id``; the stream drops repeats only within its
    ``duplicate_window``.  A warning at the start says where the guarantee
    ends.

Runs in executor Python workers (``write_*``) on the task's thread, over the
process-wide connection of :mod:`jsclient.spark.connections`.  Each record
batch's columns stay Arrow arrays (a subject is checked once per distinct
value); an atomic batch's frames are joined from them by Arrow kernels, a
chunk at a time, with no Python object per row, and the message-id mode
formats each frame from the columns taken as lists once (no Row, Headers or
future per row: its acks, one per row, cost more than its frames).  Acks are
counted per chunk or per inbox.  Nothing here is shared between threads.
"""

from __future__ import annotations

import bisect
import enum
import json
import logging
import uuid
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pyspark.sql.datasource import WriterCommitMessage

from ..errors import (
    BatchIncompleteError,
    BatchTooManyInflightError,
    InvalidArgumentError,
    JetStreamAPIError,
    MessageNotFoundError,
    StreamNotFoundError,
    TimeoutError,
    WrongLastSequenceError,
)
from ..headers import BATCH_MEMBER_BLOCK, Headers, encode_line, msg_id_block
from ..jetstream.api import decode_pub_ack
from ..jetstream.batch import Member, batch_ack, check_batch_id, new_batch_id, send_commit, send_members
from ..jetstream.channel import TIMED_OUT, Channel
from ..jetstream.manager import ACKS, MessageManager
from ..jetstream.status import Request
from ..message import Msg
from ..protocol import check_publish_subject, hpub_frame
from .arrow import MSG_ID, user_header
from .connections import connection
from .options import SparkOptions

if TYPE_CHECKING:
    import pyarrow as pa

    from ..core.iface import DeliveryPort
    from ..jetstream.context import JetStream
    from ..message import Msg

log = logging.getLogger("jsclient.spark")

#: Rows per atomic batch: the server's limit of 1,000 messages, less the marker.
CHUNK_ROWS = 999
#: Bytes of payload per atomic batch before it is committed early (the server stages a batch whole).
CHUNK_BYTES = 4 << 20
EXPECTED_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
#: A batch member's header block around its own lines, batch id and sequence, as jsclient.headers spells it.
_BLOCK_HEAD, _ID_HEAD, _SEQ_HEAD, _BLOCK_TAIL = BATCH_MEMBER_BLOCK.replace(b"%d", b"%s").split(b"%s")


class SinkMode(enum.Enum):
    """How the sink writes exactly once (see the module docstring)."""

    ATOMIC = "atomic"  # atomic batches with a commit marker: exactly once without a time limit
    MSGID = "msgid"  # a Nats-Msg-Id per row: exactly once within the stream's duplicate window


@dataclass(frozen=True)
class WritePlan:
    """How a write reaches its stream; made on the driver, pickled to every task."""

    mode: SinkMode
    stream: str | None
    commit_prefix: str | None
    duplicate_window: float | None
    #: The target stream's subjects (atomic mode): every row's subject must be one of them.
    subjects: tuple[str, ...] = ()

    def marker_subject(self, write: str, partition: int) -> str:
        return f"{self.commit_prefix}.{write}.{partition}"


def _covers(pattern: str, subject: str) -> bool:
    p, s = pattern.split("."), subject.split(".")
    for i, token in enumerate(p):
        if token == ">":
            return len(s) > i
        if i >= len(s) or (token != "*" and token != s[i]):
            return False
    return len(p) == len(s)


def plan_write(opts: SparkOptions, *, bucket: str | None = None) -> WritePlan:
    """Driver side, at the start of a write or query: atomic markers where the stream allows, else message ids.

    ``bucket``: the write goes to that key-value bucket, whose stream ``opts.stream`` names (only the
    messages differ: they speak of the bucket).
    """
    target = f"bucket {bucket!r}" if bucket else None
    if not opts.subject and not opts.stream:
        # Rows name their own subjects and no stream was named: nothing to look at before the rows come.
        plan = WritePlan(SinkMode.MSGID, None, None, None)
    else:
        js = connection(opts).jetstream(timeout=30)
        stream = opts.stream or js.find_stream(opts.subject)  # type: ignore[arg-type]
        try:
            info = js.stream_info(stream)
        except StreamNotFoundError:
            what = target or f"stream {stream!r}"
            raise InvalidArgumentError(f"the jetstream sink's {what} does not exist") from None
        window = info.config.duplicate_window
        window_s = float(window) if window else 120.0  # the server's default
        if info.config.allow_atomic is True:
            prefix = opts.commit_prefix or f"_jsclient.commits.{stream}"
            check_publish_subject(f"{prefix}.w.0", "commitPrefix")
            if not any(_covers(s, f"{prefix}.w.0") for s in info.config.subjects or ()):
                raise InvalidArgumentError(
                    f"{target or f'stream {stream!r}'} takes atomic batches, so the jetstream sink writes exactly once "
                    f"with commit markers on {prefix}.>, but the subjects of stream {stream!r}, "
                    f"{info.config.subjects}, do not include it: add {prefix + '.>'!r} to the stream "
                    f"(js.update_stream(js.stream_info({stream!r}).config, subjects=[..., {prefix + '.>'!r}]))"
                    + ("" if bucket else " or set commitPrefix to a subject it has")
                )
            plan = WritePlan(SinkMode.ATOMIC, stream, prefix, window_s, tuple(info.config.subjects or ()))
        else:
            plan = WritePlan(SinkMode.MSGID, stream, None, window_s)
    if plan.mode is SinkMode.MSGID:
        where = (
            f"within the duplicate_window of {target or f'stream {plan.stream!r}'} ({plan.duplicate_window:g} s)"
            if plan.stream
            else "within the target stream's duplicate_window (2 minutes unless configured)"
        )
        how = (
            f"give the bucket's stream {plan.stream!r} allow_atomic=True (server 2.12+) and the subject "
            f"'_jsclient.commits.{plan.stream}.>'"
            if bucket
            else "write to a stream created with allow_atomic=True (server 2.12+) and name it with the option stream"
        )
        log.warning(
            "jetstream sink: exactly once holds only %s: a task retried or a micro-batch replayed later than "
            "that writes its rows again. For exactly once without that limit, %s.",
            where, how,
        )
    return plan


class PublishedCommit(WriterCommitMessage):
    """What a write task reports to the driver (pickled back to it)."""

    def __init__(self, published: int, duplicates: int, skipped: int, marker: str | None) -> None:
        self.published = published
        self.duplicates = duplicates
        #: Rows a retry found already stored (atomic mode) and did not send again.
        self.skipped = skipped
        self.marker = marker


@dataclass
class Columns:
    """One record batch's rows as the pieces every frame needs: binary Arrow arrays without nulls."""

    subjects: pa.Array
    payloads: pa.Array
    header_lines: pa.Array | None  # each row's ``Name: value`` lines; None: no row has any

    @classmethod
    def of(cls, subjects: list[bytes], payloads: list[bytes], header_lines: list[bytes]) -> Columns:
        """Columns from lists (a row shape that reads its rows one by one)."""
        import pyarrow as pa

        lines = pa.array(header_lines, pa.binary()) if any(header_lines) else None
        return cls(pa.array(subjects, pa.binary()), pa.array(payloads, pa.binary()), lines)

    def __len__(self) -> int:
        return len(self.payloads)

    def slice(self, start: int, length: int | None = None) -> Columns:
        lines = self.header_lines
        return Columns(self.subjects.slice(start, length), self.payloads.slice(start, length),
                       None if lines is None else lines.slice(start, length))

    @staticmethod
    def concat(parts: Sequence[Columns]) -> Columns:
        """The rows of ``parts``, in order, as one set of arrays."""
        import pyarrow as pa

        if len(parts) == 1:
            return parts[0]
        lines = None
        if any(p.header_lines is not None for p in parts):
            lines = pa.concat_arrays([p.header_lines if p.header_lines is not None else
                                      pa.array([b""] * len(p), pa.binary()) for p in parts])
        return Columns(pa.concat_arrays([p.subjects for p in parts]),
                       pa.concat_arrays([p.payloads for p in parts]), lines)

    def lists(self) -> tuple[list[bytes], list[bytes], list[bytes]]:
        """Subjects, payloads and header lines as lists of bytes (a frame formatted per row)."""
        lines = self.header_lines.to_pylist() if self.header_lines is not None else [b""] * len(self)
        return self.subjects.to_pylist(), self.payloads.to_pylist(), lines


class RowShape(Protocol):
    """Turns a record batch of the DataFrame written into the frames' pieces (a stream's or a bucket's rows)."""

    def __call__(self, batch: pa.RecordBatch) -> Columns: ...


class StreamRows:
    """A stream's rows: ``subject`` (or the option), ``data``, optional ``headers`` and ``msg_id``."""

    def __init__(self, opts: SparkOptions, plan: WritePlan) -> None:
        self.opts = opts
        self.plan = plan
        self.checked: set[str] = set()  # subjects already found valid

    def __call__(self, batch: pa.RecordBatch) -> Columns:
        return _columns(batch, self.opts, self.checked, self.plan)


def _columns(batch: pa.RecordBatch, opts: SparkOptions, checked: set[str], plan: WritePlan) -> Columns:
    import pyarrow as pa
    import pyarrow.compute as pc

    names = batch.schema.names
    n = batch.num_rows
    if "subject" in names:
        subject = batch.column("subject")
    elif opts.subject:
        subject = pa.repeat(pa.scalar(opts.subject, pa.string()), n)
    else:
        raise InvalidArgumentError("writing to jetstream needs a subject column or the option subject")
    for s in pc.unique(subject).to_pylist():  # each distinct subject once
        if s not in checked:
            if not isinstance(s, str):
                raise InvalidArgumentError(f"jetstream sink: a row's subject is {s!r}, not a subject")
            check_publish_subject(s)
            if plan.mode is SinkMode.ATOMIC:
                _check_in_target(plan, s)
            checked.add(s)
    if "data" not in names:
        raise InvalidArgumentError("writing to jetstream needs a data column (binary or string)")
    headers = batch.column("headers").to_pylist() if "headers" in names else None
    ids = batch.column("msg_id").to_pylist() if "msg_id" in names else None
    lines = [b""] * n if headers is not None or ids is not None else []
    if headers is not None:
        for i, entries in enumerate(headers):
            if entries:
                lines[i] = _header_lines(entries, ids is None)
    if ids is not None:
        for i, msg_id in enumerate(ids):
            if msg_id:
                lines[i] += encode_line(MSG_ID, str(msg_id))
    return Columns(subject.cast(pa.binary()), _payloads(batch.column("data")),
                   pa.array(lines, pa.binary()) if any(lines) else None)


def _payloads(data: pa.Array) -> pa.Array:
    """The data column as binary, a null as empty: binary or string, as is (a string as its UTF-8)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = data.type
    if pa.types.is_binary(kind):
        out = data
    elif (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_large_binary(kind)
          or pa.types.is_fixed_size_binary(kind) or str(kind) in ("binary_view", "string_view")):  # views: 16+
        out = data.cast(pa.binary())
    else:
        first = next((v for v in data.to_pylist() if v is not None), None)
        if first is not None:
            raise InvalidArgumentError(f"jetstream sink: data must be binary or string, not {type(first).__name__}")
        return pa.array([b""] * len(data), pa.binary())
    return pc.fill_null(out, b"") if out.null_count else out


def _check_in_target(plan: WritePlan, subject: str) -> None:
    """Atomic mode: a row must go to the target stream, and not among its commit markers."""
    if plan.commit_prefix and _covers(plan.commit_prefix + ".>", subject):
        raise InvalidArgumentError(
            f"jetstream sink: a row's subject {subject!r} is under the sink's commit prefix {plan.commit_prefix!r}"
        )
    if not any(_covers(pattern, subject) for pattern in plan.subjects):
        raise InvalidArgumentError(
            f"jetstream sink: a row's subject {subject!r} is not one of stream {plan.stream!r}'s subjects "
            f"{list(plan.subjects)}: an atomic write stores every row in the stream it writes to (option stream, "
            "or the stream of the option subject); write rows for other streams in a write of their own"
        )


def _payload(data: Any) -> bytes:
    if data is None:
        return b""
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise InvalidArgumentError(f"jetstream sink: data must be binary or string, not {type(data).__name__}")


def _header_lines(entries: Iterable[tuple[str, Any]], keep_msg_id: bool) -> bytes:
    """A row's headers column as ``Name: value`` lines, without the server's control headers."""
    out = []
    for name, values in entries:
        if not user_header(name) or (name == MSG_ID and not keep_msg_id):
            continue
        for value in values if isinstance(values, (list, tuple)) else (values,):
            if value is None:
                continue
            out.append(encode_line(name, str(value)))
    return b"".join(out)


# -- atomic mode ---------------------------------------------------------------------


@dataclass
class _Marker:
    seq: int  # the marker's stream sequence (0: none yet)
    batch: int  # the micro-batch it belongs to (-1: none)
    rows: int  # rows of that micro-batch stored


def read_marker(js: JetStream, stream: str, subject: str) -> _Marker:
    try:
        msg = js.get_msg(stream, last_by_subj=subject)
    except MessageNotFoundError:
        return _Marker(0, -1, 0)
    body = json.loads(msg.data)
    return _Marker(msg.seq, int(body["batch"]), int(body["rows"]))


@dataclass
class _Chunk:
    """Rows of one atomic batch, kept until the batch's ack is in (a failed batch is sent again)."""

    rows: Columns
    size: int  # payload bytes
    rows_after: int  # the task's rows stored once this chunk is
    commit: Future[Msg] | None = None


class _AtomicTask:
    """One task's rows as atomic batches closed by markers (executor side).

    Pipelined one deep: the next chunk's members are sent while the server
    commits the previous chunk; the next commit goes out once the previous
    ack has given the marker's sequence it must expect.  Each chunk is kept
    until its ack is in, so a batch the server did not store is sent again
    (only after the marker shows it was not stored).
    """

    def __init__(self, js: JetStream, plan: WritePlan, subject: str, batch_id: int, timeout: float) -> None:
        assert plan.stream is not None
        self.js = js
        self.stream = plan.stream
        self.subject = subject
        self.batch_id = batch_id
        self.timeout = timeout
        found = read_marker(js, plan.stream, subject)
        self.marker_seq = found.seq
        if found.batch == batch_id:
            self.stored = found.rows  # an earlier attempt of this very task stored these
        elif found.batch > batch_id:
            raise InvalidArgumentError(
                f"jetstream sink: marker {subject} already names micro-batch {found.batch}, later than {batch_id}: "
                "is another query writing with the same checkpoint?"
            )
        else:
            self.stored = 0
        self.skipped = self.stored
        self.seen = 0  # rows of this task looked at so far
        self.published = 0
        self.pending: list[Columns] = []  # rows of the open chunk, in pieces
        self.pending_rows = 0
        self.pending_bytes = 0
        self.inflight: _Chunk | None = None  # sent, ack not yet in

    def add(self, cols: Columns) -> None:
        """Take the rows of one record batch past those already stored; send each full chunk.

        A chunk closes at its CHUNK_ROWS-th row, or at the row that brings
        its payloads to CHUNK_BYTES, whichever comes first.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        n = len(cols)
        start = min(n, max(0, self.skipped - self.seen))  # the first rows an earlier attempt stored
        self.seen += n
        if start == n:
            return
        rows = cols.slice(start)
        ends = pc.cumulative_sum(pc.binary_length(rows.payloads).cast(pa.int64()))  # payload bytes up to each row
        i, m = 0, len(rows)
        while i < m:
            before = ends[i - 1].as_py() if i else 0
            end = min(m, i + CHUNK_ROWS - self.pending_rows)
            size = ends[end - 1].as_py() - before
            full = end - i == CHUNK_ROWS - self.pending_rows
            if self.pending_bytes + size >= CHUNK_BYTES:  # the chunk closes at the row that reaches the limit
                reach = CHUNK_BYTES - self.pending_bytes + before
                end = i + 1 + bisect.bisect_left(ends.slice(i, end - i).to_pylist(), reach)
                size = ends[end - 1].as_py() - before
                full = True
            self.pending.append(rows.slice(i, end - i))
            self.pending_rows += end - i
            self.pending_bytes += size
            if full:
                self._flush()
            i = end

    def finish(self) -> None:
        if self.pending_rows:
            self._flush()
        if self.inflight is not None:
            chunk, self.inflight = self.inflight, None
            self._settle(chunk)

    def _flush(self) -> None:
        rows_after = (self.inflight.rows_after if self.inflight else self.stored) + self.pending_rows
        chunk = _Chunk(Columns.concat(self.pending), self.pending_bytes, rows_after)
        self.pending, self.pending_rows, self.pending_bytes = [], 0, 0
        bid = self._members(chunk)
        if self.inflight is not None:
            previous, self.inflight = self.inflight, None
            if not self._settle(previous):
                bid = self._members(chunk)  # the previous chunk was sent again after these: start them over
        chunk.commit = self._commit(chunk, bid)
        self.inflight = chunk

    def _members(self, chunk: _Chunk) -> str:
        bid = new_batch_id()
        frames = member_frames(chunk.rows, check_batch_id(bid))
        send_members(self.js, frames, count=len(chunk.rows), payload_bytes=chunk.size)
        return bid

    def _commit(self, chunk: _Chunk, bid: str) -> Future[Msg]:
        marker = Member(
            self.subject,
            json.dumps({"batch": self.batch_id, "rows": chunk.rows_after}).encode(),
            Headers({EXPECTED_SUBJECT_SEQ: str(self.marker_seq)}),
        )
        return send_commit(self.js, marker, batch_id=bid, total=len(chunk.rows) + 1, timeout=self.timeout)

    def _settle(self, chunk: _Chunk) -> bool:
        """Wait for a chunk's ack; True when it was stored as sent, False when it had to be sent again."""
        assert chunk.commit is not None
        for attempt in range(4):
            try:
                ack = batch_ack(chunk.commit, self.subject)
            except (BatchIncompleteError, BatchTooManyInflightError, TimeoutError) as exc:
                # Not stored, or not known: the marker says which.  Only then is sending again safe.
                found = read_marker(self.js, self.stream, self.subject)
                if found.seq != self.marker_seq and found.batch == self.batch_id and found.rows == chunk.rows_after:
                    self._stored(chunk, found.seq)
                    return attempt == 0
                if found.seq != self.marker_seq or attempt == 3:
                    raise
                log.info("jetstream sink: batch to %s not stored (%s); sending it again", self.stream, exc)
                chunk.commit = self._commit(chunk, self._members(chunk))
                continue
            except WrongLastSequenceError:
                raise JetStreamAPIError(
                    400, 10071,
                    f"jetstream sink: another attempt wrote to {self.subject} meanwhile (a speculative or zombie "
                    "task); this attempt stops and its retry starts from what is stored",
                ) from None
            self._stored(chunk, ack.seq)
            return attempt == 0
        raise AssertionError("unreachable")  # pragma: no cover

    def _stored(self, chunk: _Chunk, marker_seq: int) -> None:
        self.marker_seq = marker_seq
        self.stored = chunk.rows_after
        self.published += len(chunk.rows)


#: Frame sizes below this are written by looking their text up (:func:`_digits`), not by a cast, which costs
#: several times more per number.
_LOOKED_UP = 1 << 16
_digit_texts: list[pa.Array] = []  # the table, once made (one per process, whichever batch id length)


def _digits() -> pa.Array:
    """The text of every number below _LOOKED_UP, as binary; made on first use (two threads may both make it)."""
    if not _digit_texts:
        import pyarrow as pa
        import pyarrow.compute as pc

        _digit_texts.append(pc.cast(pa.array(range(_LOOKED_UP), pa.int64()), pa.string()).cast(pa.binary()))
    return _digit_texts[0]


class _Shared:
    """The pieces of member frames 1..CHUNK_ROWS that depend on the member's place alone, made once per process
    and batch id length: header block sizes without the member's own lines (``sizes``, and as `` <size> ``
    text, ``size_texts``), and each block's end from its sequence on (``tails``); the frames' constant
    pieces as Arrow scalars (``pieces``: ``HPUB ``, a space, CRLF and nothing)."""

    def __init__(self, id_len: int) -> None:
        import pyarrow as pa

        seqs = [b"%d" % i for i in range(1, CHUNK_ROWS + 1)]
        fixed = len(_BLOCK_HEAD) + len(_ID_HEAD) + id_len + len(_SEQ_HEAD) + len(_BLOCK_TAIL)
        self.sizes = pa.array([fixed + len(seq) for seq in seqs], pa.int64())
        self.size_texts = pa.array([b" %d " % (fixed + len(seq)) for seq in seqs], pa.binary())
        self.tails = pa.array([_SEQ_HEAD + seq + _BLOCK_TAIL for seq in seqs], pa.binary())
        self.pieces = [pa.scalar(piece, pa.binary()) for piece in (b"HPUB ", b" ", b"\r\n", b"")]


_shared: dict[int, _Shared] = {}


def member_frames(rows: Columns, batch_id: bytes) -> memoryview:
    """The HPUB frames of batch members 1..len(rows) (at most CHUNK_ROWS) of batch ``batch_id``, back to back,
    as :func:`jsclient.jetstream.batch.member_frame` makes each (subjects and lines already checked), joined by
    Arrow kernels: a handful of calls for the whole chunk, what depends on a member's place made once.  The
    frames are a view of the Arrow array's bytes, which the connection copies once, into its buffer."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(rows)
    shared = _shared.get(len(batch_id)) or _shared.setdefault(len(batch_id), _Shared(len(batch_id)))
    sizes, tails = shared.sizes.slice(0, n), shared.tails.slice(0, n)
    op, space, crlf, nothing = shared.pieces

    def text(numbers: pa.Array) -> pa.Array:
        if pc.max(numbers).as_py() < _LOOKED_UP:
            return _digits().take(numbers)
        return pc.cast(numbers, pa.string()).cast(pa.binary())

    lines = rows.header_lines
    if lines is None:  # the block's size depends on the member's place alone
        total = pc.add(sizes, pc.binary_length(rows.payloads))
        head = pa.scalar(b"\r\n" + _BLOCK_HEAD + _ID_HEAD + batch_id, pa.binary())
        parts = [shared.size_texts.slice(0, n), text(total), head]
    else:
        block = pc.add(sizes, pc.binary_length(lines))
        total = pc.add(block, pc.binary_length(rows.payloads))
        parts = [space, text(block), space, text(total), pa.scalar(b"\r\n" + _BLOCK_HEAD, pa.binary()), lines,
                 pa.scalar(_ID_HEAD + batch_id, pa.binary())]
    frames = pc.binary_join_element_wise(op, rows.subjects, *parts, tails, rows.payloads, crlf, nothing)
    offsets = memoryview(frames.buffers()[1]).cast("i")  # int32, as a binary array keeps them
    first, last = offsets[frames.offset], offsets[frames.offset + n]
    return memoryview(frames.buffers()[2]).cast("B")[first:last]


# -- msgid mode ----------------------------------------------------------------------


class _MsgIdTask:
    """Rows with deterministic message ids, acks counted on one wildcard inbox (executor side)."""

    def __init__(self, js: JetStream, id_prefix: str, window: int, timeout: float) -> None:
        self.js = js
        self.conn = js.conn
        self.id_prefix = id_prefix.encode()
        self.window = window
        self.timeout = timeout
        self.inbox = self.conn.new_inbox()
        self.sub: DeliveryPort = self.conn.subscribe(
            self.inbox + ".*", pending_msgs_limit=1 << 22, pending_bytes_limit=1 << 30
        )
        # Any status on the inbox ends the write (a 503: no stream stores a row's subject).
        self.acks = Channel(self.sub, MessageManager(self.conn.core), ACKS, request=Request.PUBLISH)
        self.sent = 0
        self.acked = 0
        self.published = 0
        self.duplicates = 0

    def add(self, cols: Columns) -> None:
        subjects, payloads, lines = cols.lists()
        inbox = self.inbox.encode()
        n = len(payloads)
        i = 0
        while i < n:
            room = self.window - (self.sent - self.acked)
            if room <= 0:
                self._settle(self.sent - self.window // 2)
                continue
            hi = min(n, i + room)
            parts = []
            size = 0
            for k in range(i, hi):
                index = self.sent + k - i
                header = msg_id_block(lines[k], b"%s-%d" % (self.id_prefix, index))
                payload = payloads[k]
                size += len(payload)
                parts.append(hpub_frame(subjects[k], header, payload, b"%s.%d" % (inbox, index)))
            self.conn.publish_encoded(b"".join(parts), messages=hi - i, payload_bytes=size)
            self.sent += hi - i
            i = hi

    def _settle(self, upto: int) -> None:
        """Take acks until ``upto`` have come; raise on the first error."""
        self.conn.core.send_pending()
        take = self.acks.take
        while self.acked < upto:
            got = take(self.timeout)
            if not isinstance(got, Msg):
                if got.verdict is TIMED_OUT:
                    raise TimeoutError(
                        f"jetstream sink: {self.sent - self.acked} publish acks still missing after {self.timeout} s"
                    )
                raise got.error or AssertionError(got.verdict)  # ACKS has no other verdict than an error
            # Raises the server's error by its code, or on a duplicate of sequence 0 (an id still in process).
            if decode_pub_ack(got.data).duplicate:
                self.duplicates += 1
            self.acked += 1
            self.published += 1

    def finish(self) -> None:
        try:
            self._settle(self.sent)
        finally:
            self.sub.unsubscribe()


# -- the task ------------------------------------------------------------------------


def write_batches(
    opts: SparkOptions,
    plan: WritePlan,
    batches: Iterator[pa.RecordBatch],
    *,
    write: str,
    batch_id: int,
    partition: int,
    shape: RowShape | None = None,
) -> PublishedCommit:
    """Executor side: every row of this task stored once, every ack in, before returning.

    ``shape`` reads the DataFrame's rows (left out: a stream's, :class:`StreamRows`).
    """
    js = connection(opts).jetstream(timeout=opts.ack_timeout)
    rows = shape or StreamRows(opts, plan)
    if plan.mode is SinkMode.ATOMIC:
        subject = plan.marker_subject(write, partition)
        task = _AtomicTask(js, plan, subject, batch_id, opts.ack_timeout)
        for batch in batches:
            if batch.num_rows:
                task.add(rows(batch))
        task.finish()
        return PublishedCommit(task.published, 0, task.skipped, subject)
    ids = _MsgIdTask(js, f"{write}-{batch_id}-{partition}", 2 * opts.max_pending, opts.ack_timeout)
    try:
        for batch in batches:
            if batch.num_rows:
                ids.add(rows(batch))
    finally:
        ids.finish()
    return PublishedCommit(ids.published, ids.duplicates, 0, None)


def rows_to_batches(rows: Iterator[Any], field_names: list[str], size: int = 4096) -> Iterator[pa.RecordBatch]:
    """Row objects (pyspark without Arrow writers) as record batches for :func:`write_batches`."""
    import pyarrow as pa

    chunk: list[Any] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= size:
            yield _rows_batch(pa, chunk, field_names)
            chunk = []
    if chunk:
        yield _rows_batch(pa, chunk, field_names)


def _rows_batch(pa: Any, rows: list[Any], names: list[str]) -> pa.RecordBatch:
    columns = {}
    for name in names:
        values = [row[name] for row in rows]
        if name == "headers":
            values = [list(v.items()) if isinstance(v, dict) else v for v in values]
            columns[name] = pa.array(values, pa.map_(pa.string(), pa.list_(pa.string())))
        elif name == "data":
            columns[name] = pa.array([_payload(v) if type(v) is not bytes else v for v in values], pa.binary())
        else:
            columns[name] = pa.array([None if v is None else str(v) for v in values], pa.string())
    return pa.RecordBatch.from_pydict(columns)


def cleanup_markers(opts: SparkOptions, plan: WritePlan, markers: Iterable[str | None], *, keep: int) -> None:
    """Driver side, after every task of a write or micro-batch succeeded: markers no retry can need."""
    if plan.mode is not SinkMode.ATOMIC or plan.stream is None:
        return
    js = connection(opts).jetstream(timeout=30)
    for subject in sorted({m for m in markers if m}):
        try:
            js.purge_stream(plan.stream, subject=subject, keep=keep or None)
        except JetStreamAPIError as exc:  # tidying only: a marker left behind costs a few bytes
            log.info("jetstream sink: could not purge marker %s: %s", subject, exc)


def new_write_id() -> str:
    return uuid.uuid4().hex


__all__ = [
    "Columns",
    "PublishedCommit",
    "RowShape",
    "StreamRows",
    "WritePlan",
    "cleanup_markers",
    "new_write_id",
    "plan_write",
    "read_marker",
    "rows_to_batches",
    "write_batches",
]
