"""Pulled messages and direct-get replies to Arrow record batches, in bulk.

Pure functions on the calling thread (an executor's task thread); no locks.
pyarrow is imported lazily by the callers' modules, never by ``jsclient``.

Reading from a consumer: each message's ``<subject> <sid> <ack reply>``
line is split at spaces and its ack reply at dots, in C++; the stream
sequence and the time stamp (nanoseconds) sit at fixed places among the
reply's tokens, and the header block is the message's own.  Most of a
pull's bytes are runs of plain MSG frames, which :func:`cut_deliveries`
cuts in C++ too (for :meth:`jsclient.jetstream.bulk.BulkReader.pull_runs`):
the bytes split once at CRLF, lines and payloads taking turns, and a frame
taken only where its line has the one form the server writes and its
payload the size the line says, so that a payload holding CRLF, or any
other frame, ends the run and goes to the reader's own parser.

Reading by direct get: a batched direct-get reply's header block is the message's own
headers followed by eight lines the server appends (``Nats-Stream``,
``Nats-Subject``, ``Nats-Sequence``, ``Nats-Time-Stamp``, ``Nats-Num-Pending``,
``Nats-Last-Sequence`` and the blank end), so after one split of every block
at CRLF, in C++, the subject, sequence and time of each message sit at fixed
distances from the end of its list.  Only rows that carry headers of their
own take a step in Python.

Headers named ``Nats-*`` belong to the server (delivery details, expectation
checks, batch control, TTL, rollups): the ``headers`` column leaves them out
except ``Nats-Msg-Id``, which is the publisher's and which the sink uses as
the message id, and ``Nats-Marker-Reason``, which says why the server left a
marker (ADR-48: a key removed by age, for a bucket's changes).  The sink never
sends the others, nor the marker's reason, from that column.
Values are kept byte for byte.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..headers import Headers, parse
from ..jetstream.bulk import Cut, Run
from ..jetstream.direct import StoredMessage
from ..jetstream.kv import MARKER_REASON_HEADER as MARKER_REASON
from ..jetstream.metadata import parse_metadata
from ..protocol.parser import MAX_CONTROL_LINE

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA = (
    "subject string, data binary, headers map<string,array<string>>, stream string, seq long, timestamp timestamp"
)
MSG_ID = "Nats-Msg-Id"
_DELIVERY_LINES = 8  # the server's six headers, then the blank line and the empty tail of the split
_SUBJECT, _SEQUENCE, _TIME = b"Nats-Subject: ", b"Nats-Sequence: ", b"Nats-Time-Stamp: "


def arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("subject", pa.string()),
            ("data", pa.binary()),
            ("headers", pa.map_(pa.string(), pa.list_(pa.string()))),
            ("stream", pa.string()),
            ("seq", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
        ]
    )


def user_header(name: str) -> bool:
    """Whether a header is the publisher's to keep (not one of the server's ``Nats-*`` control headers)."""
    return not name.startswith("Nats-") or name == MSG_ID


def header_map(headers: Headers) -> list[tuple[str, list[str]]] | None:
    """Headers as map entries (values grouped by name, in order): user headers, and a marker's reason."""
    entries = [(name, headers.get_all(name)) for name in headers if user_header(name) or name == MARKER_REASON]
    return entries or None


def subject_filter_regex(filters: Sequence[str]) -> str:
    """One RE2 pattern matching any of the NATS subject filters (``*`` one token, ``>`` the rest)."""

    def one(pattern: str) -> str:
        parts = []
        for token in pattern.split("."):
            parts.append("[^.]+" if token == "*" else ".+" if token == ">" else re.escape(token))
        return "\\.".join(parts)

    return "^(?:" + "|".join(one(f) for f in filters) + ")$"


def replies_to_batch(
    headers: Sequence[bytes], payloads: Sequence[bytes], stream: str, last: int, subject_regex: str | None = None
) -> tuple[pa.RecordBatch, int, pa.Array]:
    """Rows for direct-get replies (header blocks and payloads) up to sequence ``last`` (and matching
    ``subject_regex``), how many were in range, and the sequences of every reply.

    The count is taken before the subject filter, so a caller can compare it
    with what the stream held when the range was planned.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    blocks = pa.array(headers, pa.binary())
    lines = pc.split_pattern(blocks, "\r\n")
    ends = pc.cast(lines.offsets[1:], pa.int64())
    flat = lines.values

    def field(back: int, prefix: bytes) -> pa.Array | None:
        taken = pc.take(flat, pc.subtract(ends, back))
        if not pc.all(pc.starts_with(taken, prefix.decode())).as_py():
            return None
        return pc.utf8_slice_codeunits(taken.cast(pa.string()), len(prefix))

    subject = field(7, _SUBJECT)
    seq_text = field(6, _SEQUENCE)
    time_text = field(5, _TIME)
    if subject is None or seq_text is None or time_text is None:
        return _replies_to_batch_slowly(headers, payloads, last, subject_regex)
    seq = pc.cast(seq_text, pa.int64())
    try:
        stamp = pc.cast(pc.cast(time_text, pa.timestamp("ns", "UTC")), pa.timestamp("us", "UTC"), safe=False)
    except pa.ArrowInvalid:  # an older server's time format
        return _replies_to_batch_slowly(headers, payloads, last, subject_regex)
    own = pc.subtract(pc.list_value_length(lines), 1 + _DELIVERY_LINES)  # less the version line: the user's
    with_headers = pc.indices_nonzero(pc.greater(own, 0)).to_pylist()
    return _filtered(
        [subject, pa.array(payloads, pa.binary()), _header_column(headers, with_headers),
         pa.array([stream] * len(headers), pa.string()), seq, stamp],
        last, subject_regex,
    )


#: Where the stream sequence and the time stamp sit among an ack reply's tokens, by their count:
#: ``$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>`` and the form with
#: domain and account hash before the stream (and a token after the pending count).
_ACK_TOKENS = {9: (5, 7), 11: (7, 9), 12: (7, 9)}


def deliveries_to_batch(
    args: Sequence[bytes], headers: Sequence[bytes], payloads: Sequence[bytes], stream: str, last: int,
    subject_regex: str | None = None,
) -> tuple[pa.RecordBatch, int, pa.Array]:
    """:func:`replies_to_batch` for a pull consumer's messages (``args``: their ``<subject> <sid> <reply>``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    words = pc.split_pattern(pa.array(args, pa.binary()), " ")
    if pc.min_max(pc.list_value_length(words)).as_py() != {"min": 3, "max": 3}:
        return _deliveries_to_batch_slowly(args, headers, payloads, stream, last, subject_regex)
    tokens = pc.split_pattern(pc.list_element(words, 2), ".")
    counts = pc.min_max(pc.list_value_length(tokens)).as_py()
    places = _ACK_TOKENS.get(counts["min"]) if counts["min"] == counts["max"] else None
    if places is None:
        return _deliveries_to_batch_slowly(args, headers, payloads, stream, last, subject_regex)
    seq = pc.cast(pc.list_element(tokens, places[0]).cast(pa.string()), pa.int64())
    nanos = pc.cast(pc.list_element(tokens, places[1]).cast(pa.string()), pa.int64())
    subject = pc.list_element(words, 0).cast(pa.string())
    stamp = pc.cast(nanos.cast(pa.timestamp("ns", "UTC")), pa.timestamp("us", "UTC"), safe=False)
    return _filtered(
        [subject, pa.array(payloads, pa.binary()), _own_headers(headers), pa.array([stream] * len(args), pa.string()),
         seq, stamp],
        last, subject_regex,
    )


class PulledRun:
    """A run of plain MSG deliveries as :func:`cut_deliveries` found them: subjects, ack replies and payloads,
    binary arrays (a :class:`jsclient.jetstream.bulk.Run`)."""

    __slots__ = ("payloads", "replies", "subjects")

    def __init__(self, subjects: pa.Array, replies: pa.Array, payloads: pa.Array) -> None:
        self.subjects = subjects
        self.replies = replies
        self.payloads = payloads

    @property
    def count(self) -> int:
        return len(self.payloads)

    @property
    def counted(self) -> int:
        """Bytes toward a pull's max_bytes, as the server counts them: subject, reply and payload."""
        import pyarrow.compute as pc

        return sum(pc.sum(pc.binary_length(a)).as_py() or 0 for a in (self.subjects, self.replies, self.payloads))

    @property
    def last_reply(self) -> bytes:
        last: bytes = self.replies[-1].as_py()
        return last


_strides: dict[tuple[int, int], pa.Array] = {}  # (step, start) -> start, start + step, ...: indexes into a flat list


def _every(step: int, start: int, n: int) -> pa.Array:
    """Indexes start, start + step, ... (n of them), from a per-process cache that grows as needed."""
    import pyarrow as pa

    have = _strides.get((step, start))
    if have is None or len(have) < n:
        have = _strides[step, start] = pa.array(range(start, start + step * max(n, 2 * len(have or ())), step),
                                                pa.int64())
    return have.slice(0, n)


def cut_deliveries(raw: bytes | bytearray) -> tuple[int, PulledRun | None]:
    """The run of plain MSG frames at the start of ``raw`` (a frame's start): how many bytes it takes, and the
    run (None: the first frame is of another kind, or not whole yet).  ``raw`` is only read, and not kept.

    A frame is taken when its line is ``MSG <subject> <sid> <reply> <size>``,
    single spaces apart, in printable ASCII, no longer than the parser
    allows, and the ``size`` bytes after the line end where a CRLF starts:
    what :func:`~jsclient.protocol.parse_msg_line` reads from such a line,
    read in bulk.  The run ends at the first frame that is not so (a status,
    a PING, headers, a payload holding CRLF, what has not all come).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    whole = pa.Array.from_buffers(pa.binary(), 1, [None, pa.py_buffer(struct.pack("<ii", 0, len(raw))),
                                                   pa.py_buffer(raw)])
    pieces = pc.split_pattern(whole, "\r\n").values  # lines and payloads taking turns, then what follows
    n = (len(pieces) - 1) // 2  # frames followed by their CRLF
    if not n:
        return 0, None
    lines, payloads = pieces.take(_every(2, 0, n)), pieces.take(_every(2, 1, n))
    words = pc.split_pattern(lines, " ")
    # Printable ASCII first: after a payload holding CRLF the pieces are out of step, and the UTF-8 kernels
    # below raise on bytes that are not UTF-8 where they should only end the run.
    shaped = pc.index(pc.and_(
        pc.and_(pc.starts_with(lines, "MSG "), pc.equal(pc.list_value_length(words), 5)),
        pc.and_(pc.ascii_is_printable(lines.view(pa.string())), pc.less_equal(pc.binary_length(lines),
                                                                               MAX_CONTROL_LINE)),
    ), False)
    if shaped.as_py() >= 0:
        n = shaped.as_py()
        lines, payloads = lines.slice(0, n), payloads.slice(0, n)
    if not n:
        return 0, None
    flat = words.values  # five words a line, for the first n
    subjects, sids, replies, sizes = (flat.take(_every(5, i, n)) for i in (1, 2, 3, 4))
    ok = pc.and_(
        pc.and_(pc.utf8_is_digit(sids.view(pa.string())), pc.utf8_is_digit(sizes.view(pa.string()))),
        pc.and_(pc.greater(pc.binary_length(subjects), 0), pc.greater(pc.binary_length(replies), 0)),
    )
    ok = pc.and_(ok, pc.less_equal(pc.binary_length(sizes), 9))  # a size past that is no frame read in bulk
    bad = pc.index(ok, False).as_py()
    if bad >= 0:
        n = bad
        lines, payloads, subjects, replies, sizes = (a.slice(0, n) for a in (lines, payloads, subjects, replies, sizes))
    if n:
        wrong = pc.index(pc.equal(pc.cast(sizes.view(pa.string()), pa.int64()), pc.binary_length(payloads)), False)
        if wrong.as_py() >= 0:
            n = wrong.as_py()
            lines, payloads, subjects, replies = (a.slice(0, n) for a in (lines, payloads, subjects, replies))
    if not n:
        return 0, None
    used = pc.sum(pc.binary_length(lines)).as_py() + pc.sum(pc.binary_length(payloads)).as_py() + 4 * n
    return used, PulledRun(subjects, replies, payloads)


def _ack_fields(replies: pa.Array) -> tuple[pa.Array, pa.Array] | None:
    """Stream sequences and time stamps (nanoseconds) from ack replies, or None where they are not all of one
    form in :data:`_ACK_TOKENS`.  Replies that share the first's tokens up to the sequence (one consumer's,
    delivered once) are cut there and only the rest split."""
    import pyarrow.compute as pc

    tokens = replies[0].as_py().split(b".")
    places = _ACK_TOKENS.get(len(tokens))
    if places is not None:
        head = b".".join(tokens[: places[0]]) + b"."
        if pc.all(pc.starts_with(replies, head.decode("ascii", "replace"))).as_py():
            rest = pc.split_pattern(pc.binary_slice(replies, len(head), 1 << 30), ".")
            counts = pc.min_max(pc.list_value_length(rest)).as_py()
            if counts["min"] == counts["max"] == len(tokens) - places[0]:
                width, flat = counts["min"], rest.values
                n = len(replies)
                return flat.take(_every(width, 0, n)), flat.take(_every(width, places[1] - places[0], n))
    split = pc.split_pattern(replies, ".")
    counts = pc.min_max(pc.list_value_length(split)).as_py()
    places = _ACK_TOKENS.get(counts["min"]) if counts["min"] == counts["max"] else None
    if places is None:
        return None
    return pc.list_element(split, places[0]), pc.list_element(split, places[1])


def runs_to_batch(
    runs: Sequence[PulledRun], stream: str, last: int, subject_regex: str | None = None
) -> tuple[pa.RecordBatch, int, pa.Array]:
    """:func:`deliveries_to_batch` for runs :func:`cut_deliveries` cut, in order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    subjects = pa.concat_arrays([r.subjects for r in runs])
    replies = pa.concat_arrays([r.replies for r in runs])
    payloads = pa.concat_arrays([r.payloads for r in runs])
    fields = _ack_fields(replies)
    if fields is None:
        args = [b"%s 1 %s" % pair for pair in zip(subjects.to_pylist(), replies.to_pylist(), strict=True)]
        return _deliveries_to_batch_slowly(args, [b""] * len(args), payloads.to_pylist(), stream, last, subject_regex)
    seq = pc.cast(fields[0].view(pa.string()), pa.int64())
    nanos = pc.cast(fields[1].view(pa.string()), pa.int64())
    stamp = pc.cast(nanos.cast(pa.timestamp("ns", "UTC")), pa.timestamp("us", "UTC"), safe=False)
    map_type = pa.map_(pa.string(), pa.list_(pa.string()))
    return _filtered(
        [subjects.view(pa.string()), payloads, pa.nulls(len(payloads), map_type),
         pa.repeat(pa.scalar(stream, pa.string()), len(payloads)), seq, stamp],
        last, subject_regex,
    )


def parts_to_batches(
    parts: Sequence[Cut | Run], stream: str, last: int, subject_regex: str | None = None
) -> list[tuple[pa.RecordBatch, int, pa.Array]]:
    """One pull's messages (:meth:`~jsclient.jetstream.bulk.BulkReader.pull_runs` with :func:`cut_deliveries`)
    as record batches, in order: each stretch of runs one batch, each part the reader's parser cut another."""
    out = []
    runs: list[PulledRun] = []
    for part in parts:
        if not isinstance(part, Cut):
            assert isinstance(part, PulledRun)  # the cutter's
            runs.append(part)
            continue
        if runs:
            out.append(runs_to_batch(runs, stream, last, subject_regex))
            runs = []
        out.append(deliveries_to_batch(part.args, part.headers, part.payloads, stream, last, subject_regex))
    if runs:
        out.append(runs_to_batch(runs, stream, last, subject_regex))
    return out


def _deliveries_to_batch_slowly(
    args: Sequence[bytes], headers: Sequence[bytes], payloads: Sequence[bytes], stream: str, last: int,
    subject_regex: str | None,
) -> tuple[pa.RecordBatch, int, pa.Array]:
    """One message at a time (an ack reply of another form: :func:`parse_metadata` reads it or names it)."""
    import pyarrow as pa

    metas = [parse_metadata(a.rpartition(b" ")[2].decode()) for a in args]
    subjects = [a.split(b" ", 1)[0].decode() for a in args]
    return _filtered(
        [pa.array(subjects, pa.string()), pa.array(payloads, pa.binary()), _own_headers(headers),
         pa.array([stream] * len(args), pa.string()), pa.array([m.sequence.stream for m in metas], pa.int64()),
         pa.array([m.timestamp_ns // 1000 for m in metas], pa.timestamp("us", "UTC"))],
        last, subject_regex,
    )


def _own_headers(blocks: Sequence[bytes]) -> pa.Array:
    """The ``headers`` column of pulled messages: a block is the message's own, empty when it has none."""
    return _header_column(blocks, [i for i, block in enumerate(blocks) if block])


def _header_column(blocks: Sequence[bytes], own: list[int]) -> pa.Array:
    """The ``headers`` column: the blocks of rows ``own`` (the others carry no headers of their own) as maps of
    their user headers (the server's delivery headers left out)."""
    import pyarrow as pa

    map_type = pa.map_(pa.string(), pa.list_(pa.string()))
    if not own:
        return pa.nulls(len(blocks), map_type)
    values: list[Any] = [None] * len(blocks)
    for i in own:
        values[i] = header_map(parse(blocks[i]))
    return pa.array(values, map_type)


def _filtered(columns: list[pa.Array], last: int, subject_regex: str | None) -> tuple[pa.RecordBatch, int, pa.Array]:
    """The batch of rows up to sequence ``last`` matching ``subject_regex``, how many were in range, and every
    row's sequence."""
    import pyarrow as pa
    import pyarrow.compute as pc

    batch = pa.RecordBatch.from_arrays(columns, schema=arrow_schema())
    seq = columns[4]
    keep = pc.less_equal(seq, last)
    in_range = pc.sum(keep).as_py() or 0
    if subject_regex is not None:
        keep = pc.and_(keep, pc.match_substring_regex(columns[0], subject_regex))
    if in_range == len(seq) and subject_regex is None:
        return batch, in_range, seq
    return batch.filter(keep), in_range, seq


def _replies_to_batch_slowly(
    headers: Sequence[bytes], payloads: Sequence[bytes], last: int, subject_regex: str | None
) -> tuple[pa.RecordBatch, int, pa.Array]:
    """One message at a time (a reply whose server lines are not where the fast path expects them)."""
    from ..message import Msg

    stored = [StoredMessage(Msg.make("", p, header=h)) for h, p in zip(headers, payloads, strict=True)]
    in_range = [m for m in stored if m.seq <= last]
    if subject_regex is not None:
        matcher = re.compile(subject_regex)
        kept = [m for m in in_range if matcher.match(m.subject)]
    else:
        kept = in_range
    import pyarrow as pa

    return stored_to_batch(kept), len(in_range), pa.array([m.seq for m in stored], pa.int64())


def stored_to_batch(rows: Sequence[StoredMessage]) -> pa.RecordBatch:
    """Rows from messages already parsed (the ordered-consumer fallback for streams without direct get)."""
    import pyarrow as pa

    headers = [
        header_map(m.headers) if len(m.headers) else None
        for m in rows
    ]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([m.subject for m in rows], pa.string()),
            pa.array([m.data for m in rows], pa.binary()),
            pa.array(headers, pa.map_(pa.string(), pa.list_(pa.string()))),
            pa.array([m.stream for m in rows], pa.string()),
            pa.array([m.seq for m in rows], pa.int64()),
            pa.array([m.time for m in rows], pa.timestamp("us", tz="UTC")),
        ],
        schema=arrow_schema(),
    )


__all__ = [
    "MARKER_REASON", "SCHEMA",
    "PulledRun", "arrow_schema", "cut_deliveries", "deliveries_to_batch", "header_map", "parts_to_batches",
    "replies_to_batch", "runs_to_batch", "stored_to_batch", "subject_filter_regex",
]
